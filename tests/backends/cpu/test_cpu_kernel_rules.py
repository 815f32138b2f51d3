"""The fused compiler's KERNEL_RULES on CPU: a GELU written out (as exporters write it, the
cube as ``Pow(x, 3)``) is recognised as one Gelu and expanded in the fused compiler's form (the
tanh form as ``x / (1 + exp(-2u))``: one ``exp``, no ``tanh``, no ``pow``), float powers by
2..4 run as products; near misses keep their nodes; values match INTERPRETER."""

import math

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.pipeline import KERNEL_RULES, lower
from opgraph.pattern import rewrite


def full(value, shape):
    return ops.broadcast(og.constant(np.float32(value)), shape, tuple(range(len(shape))))


TANH_SCALE = math.sqrt(2 / math.pi)


def tanh_gelu(x, cube="pow", k=0.044715, scale=TANH_SCALE):
    shape = x.shape
    cubed = ops.power(x, full(3.0, shape)) if cube == "pow" else x * (x * x)
    inner = full(scale, shape) * (x + full(k, shape) * cubed)
    return (full(0.5, shape) * x) * (full(1.0, shape) + ops.tanh(inner))


def erf_gelu(x):
    shape = x.shape
    return x * full(0.5, shape) * (full(1.0, shape) + ops.erf(x / full(math.sqrt(2), shape)))


def lowered_names(fn):
    return [n.op.name for n in lower(fn).ops]


def recognised_names(fn):
    return [n.op.name for n in rewrite(fn, KERNEL_RULES).ops if n.op.name != "Constant"]


TANH_FORM = {"Exp", "Div"}  # the expansion's costly ops: no Tanh, no Pow


def check_values(cpu, fn, x, rtol=2e-6, atol=2e-6):
    (got,) = cpu.compile(fn)(x)
    (want,) = og.backend("INTERPRETER").compile(fn)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


@pytest.mark.parametrize("cube", ["pow", "products"])
def test_tanh_gelu_becomes_one_gelu(cpu, cube):
    x = og.parameter(og.f32, (4, 257))
    fn = og.Function([tanh_gelu(x, cube)], [x])
    assert recognised_names(fn) == ["Gelu"]
    names = lowered_names(fn)
    assert set(names) >= TANH_FORM and not {"Tanh", "Pow"} & set(names)
    source = cpu.compile(fn).source()
    kernel = source[source.index("static int k0_0") : source.index("k0_0_run")]
    assert kernel.count("expf(") == 1 and "tanhf" not in kernel
    values = np.random.default_rng(0).normal(0, 4, (4, 257)).astype(np.float32)
    values[0, :7] = [np.inf, -np.inf, np.nan, -30.0, 30.0, 1e13, -1e13]
    check_values(cpu, fn, values)


def test_erf_gelu_becomes_one_gelu(cpu):
    x = og.parameter(og.f32, (3, 100))
    fn = og.Function([erf_gelu(x)], [x])
    assert recognised_names(fn) == ["Gelu"]
    assert lowered_names(fn).count("Erf") == 1
    check_values(cpu, fn, np.random.default_rng(1).normal(0, 3, (3, 100)).astype(np.float32))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_op_is_native(cpu, approximate):
    x = og.parameter(og.f32, (2, 64))
    fn = og.Function([ops.gelu(x, approximate)], [x])
    exe = cpu.compile(fn)
    assert exe.fallback_ops() == []
    assert "Gelu" not in lowered_names(fn)  # expanded into core ops that fuse
    check_values(cpu, fn, np.linspace(-12, 12, 128, dtype=np.float32).reshape(2, 64))


@pytest.mark.parametrize(("k", "scale"), [(0.05, TANH_SCALE), (0.044715, 0.7)])
def test_near_miss_is_not_a_gelu(cpu, k, scale):
    x = og.parameter(og.f32, (2, 33))
    fn = og.Function([tanh_gelu(x, "pow", k, scale)], [x])
    assert "Gelu" not in recognised_names(fn)
    names = lowered_names(fn)
    assert "Tanh" in names
    assert "Pow" not in names  # the cube still becomes products
    check_values(cpu, fn, np.random.default_rng(2).normal(0, 2, (2, 33)).astype(np.float32))


def test_gelu_of_a_value_used_elsewhere_keeps_the_value(cpu):
    """The GELU's input feeds another result too: both results stay right."""
    x = og.parameter(og.f32, (2, 40))
    h = x * full(2.0, x.shape)
    fn = og.Function([tanh_gelu(h), h], [x])
    assert "Gelu" in recognised_names(fn)
    values = np.random.default_rng(3).normal(0, 2, (2, 40)).astype(np.float32)
    got = cpu.compile(fn)(values)
    want = og.backend("INTERPRETER").compile(fn)(values)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=2e-6)


def test_square_becomes_a_product_on_cpu(cpu):
    x = og.parameter(og.f32, (8, 16))
    fn = og.Function([ops.reduce_sum(ops.power(x, full(2.0, x.shape)), (1,))], [x])
    assert "Pow" not in lowered_names(fn)
    assert "powf" not in cpu.compile(fn).source()
    check_values(cpu, fn, np.random.default_rng(4).normal(0, 2, (8, 16)).astype(np.float32))
