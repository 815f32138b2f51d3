"""Filter gradients of 3x3 stride-1 convolutions by Winograd F(3x3, 2x2)
(``fused/lowering/winograd_filter_gradient.py``, ``cpu/codegen/winograd_filters.py``): the
native step agrees with INTERPRETER's reference kernel on one thread and two, on small and
large planes; a perturbed transform coefficient is caught; the shapes the step does not take
keep the im2col step."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import gradients
from opgraph.backends.cpu.backend import CpuBackend
from opgraph.backends.cpu.codegen import winograd_filters as codegen
from opgraph.backends.cpu.config import default_config
from opgraph.backends.fused.conv_backprop import ConvFilterGradientStep, WinogradFilterGradientStep
from opgraph.core import element_type as et
from opgraph.core.literals import parameter


def _filter_gradient(n, c, o, h, padding=(1, 1, 1, 1), stride=1, dilation=1, groups=1,
                     t=et.f32, w=None):  # fmt: skip
    x = parameter(t, (n, c, h, w or h), name="x")
    f = parameter(t, (o, c // groups, 3, 3), name="w")
    pb, pa = padding[:2], padding[2:]
    y = ops.convolution(x, f, (stride, stride), (dilation, dilation), pb, pa, None, groups)
    ct = parameter(t, y.shape, name="ct")
    (dw,) = gradients([y], [f], [ct])
    return og.Function([dw], [x, ct])


def _run(fn, threads=2, seed=0):
    rng = np.random.default_rng(seed)
    dtype = fn.parameters[0].element_type.dtype
    args = [rng.standard_normal(p.shape).astype(dtype) for p in fn.parameters]
    exe = CpuBackend(dataclasses.replace(default_config(), num_threads=threads)).compile(fn)
    (got,) = exe(*args)
    (want,) = og.backend("INTERPRETER").compile(fn)(*args)
    return got, want, [type(s) for s in exe.program.steps]


def _compare(fn, threads=2, seed=0):
    got, want, kinds = _run(fn, threads, seed)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    return kinds


#: (N, C, O, plane, padding below/above, width): shapes the native step takes.
WINOGRAD = {
    "32x32": (2, 64, 64, 32, (1, 1, 1, 1), None),
    "32x32-one-image": (1, 64, 64, 32, (1, 1, 1, 1), None),
    "16x16-more-out": (2, 64, 80, 16, (1, 1, 1, 1), None),
    "8x8": (3, 64, 64, 8, (1, 1, 1, 1), None),
    "4x4-512": (2, 512, 64, 4, (1, 1, 1, 1), None),
    "32-channels": (3, 32, 48, 18, (1, 1, 1, 1), None),
    "no-padding": (3, 64, 64, 10, (0, 0, 0, 0), None),
    "padding-2": (1, 64, 64, 6, (2, 2, 2, 2), None),
    "asymmetric": (2, 64, 64, 9, (1, 0, 0, 1), None),
    "wide-not-square": (2, 64, 64, 8, (1, 2, 1, 2), None),
    "rows-not-columns": (2, 32, 32, 12, (1, 1, 1, 1), 20),
    "blocks-span-images": (5, 32, 32, 6, (1, 1, 1, 1), None),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", sorted(WINOGRAD))
def test_winograd_step_matches_the_reference(name, threads):
    n, c, o, h, padding, w = WINOGRAD[name]
    fn = _filter_gradient(n, c, o, h, padding, w=w)
    kinds = _compare(fn, threads)
    assert WinogradFilterGradientStep in kinds and ConvFilterGradientStep not in kinds


@pytest.mark.parametrize(
    ("matrix", "at"), [("BT", (1, 2)), ("A", (2, 1)), ("GT", (0, 1)), ("GT", (1, 3))]
)
def test_a_perturbed_transform_coefficient_is_caught(monkeypatch, matrix, at):
    """Each transform is generated from its matrix: changing one entry changes the C, and
    the result no longer matches the reference (the tests above would fail)."""
    perturbed = getattr(codegen, matrix).copy()
    perturbed[at] += 0.25
    monkeypatch.setattr(codegen, matrix, perturbed)
    got, want, kinds = _run(_filter_gradient(2, 32, 32, 8), threads=1)
    assert WinogradFilterGradientStep in kinds
    assert np.abs(got - want).max() > 1e-2 * np.abs(want).max()


#: Shapes that keep the im2col filter gradient.
KEEP = {
    "odd-plane": dict(n=2, c=64, o=64, h=7),
    "few-channels": dict(n=2, c=16, o=64, h=8),
    "few-out-channels": dict(n=2, c=64, o=16, h=8),
    "stride-2": dict(n=2, c=64, o=64, h=16, stride=2),
    "dilated": dict(n=2, c=64, o=64, h=12, dilation=2),
    "grouped": dict(n=2, c=128, o=128, h=8, groups=2),
    "f64": dict(n=2, c=64, o=64, h=8, t=et.f64),
    "padding-3": dict(n=2, c=64, o=64, h=8, padding=(3, 3, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(KEEP))
def test_other_shapes_keep_the_gemm(name):
    kinds = _compare(_filter_gradient(**KEEP[name]))
    assert ConvFilterGradientStep in kinds and WinogradFilterGradientStep not in kinds


def test_filter_and_data_gradient_of_one_layer_together():
    """A layer's whole backward (data gradient by Winograd F(2x2, 3x3), filter gradient by
    F(3x3, 2x2)) in one Function, against INTERPRETER."""
    x = parameter(et.f32, (4, 64, 8, 8), name="x")
    w = parameter(et.f32, (64, 64, 3, 3), name="w")
    y = ops.relu(ops.convolution(x, w, (1, 1), (1, 1), (1, 1), (1, 1)))
    ct = parameter(et.f32, y.shape, name="ct")
    dx, dw = gradients([y], [x, w], [ct])
    fn = og.Function([dx, dw], [x, w, ct])
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    exe = og.backend("CPU").compile(fn)
    got = exe(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, v in zip(got, want, strict=True):
        np.testing.assert_allclose(g, v, rtol=2e-5, atol=2e-5 * np.abs(v).max())
    assert WinogradFilterGradientStep in [type(s) for s in exe.program.steps]
