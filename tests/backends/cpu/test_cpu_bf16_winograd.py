"""The bf16 Winograd on pair panels (``codegen/bf16_winograd.py``): the same results as the
plain bf16 Winograd (bit for bit: the same roundings and the same order of f32 sums), the
documented bound against f32, and the plain emitter where the scratch cannot hold the
panels."""

import subprocess

import numpy as np
import pytest
from test_cpu_bf16 import BOUND, needs_bf16, relative, step_kinds

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.codegen import bf16, bf16_winograd, bf16_winograd_rows, dialect
from opgraph.backends.cpu.codegen import module as codegen_module

CASES = [  # (n, c, h, o, pad): what each exercises
    (1, 64, 28, 64, 1),  # row blocks of one image, 14 tiles a row
    (32, 64, 8, 64, 1),  # several images per unit (the batch in the panels' columns)
    (3, 17, 9, 20, 1),  # odd channels (the last pair's second half is zero), odd width
    (4, 32, 10, 24, 0),  # no padding: no edge tiles on the left
    (1, 40, 57, 16, 1),  # 29 tiles a row: rows cross the 32-tile panels
    (16, 96, 4, 48, 1),  # 4x4 planes: two tiles a row, 16 images a unit
]


def conv(case: tuple[int, ...], seed: int = 0) -> tuple[og.Function, np.ndarray]:
    n, c, h, o, p = case
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    x = og.parameter(og.f32, (n, c, h, h), name="x")
    pads = {"padding_below": (p, p), "padding_above": (p, p)}
    bias = og.constant(np.full((n, o, h + 2 * p - 2, h + 2 * p - 2), 0.1, np.float32))
    y = ops.relu(ops.convolution(x, og.constant(w), **pads) + bias)
    return og.Function([y], [x], name="conv"), rng.standard_normal((n, c, h, h)).astype(np.float32)


@needs_bf16
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_pair_panels_equal_the_plain_bf16_winograd(case, monkeypatch):
    monkeypatch.setattr(bf16_winograd_rows, "MIN_WASTE", 2.0)  # tiles as rows: never
    fn, xv = conv(case)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16WinogradStep" in step_kinds(exe)
    assert "og_bf16_wgemm(" in exe.source()
    got = exe(xv)[0]
    plain = bf16.EMITTERS[bf16.Bf16WinogradStep]
    monkeypatch.setitem(codegen_module.STEP_EMITTERS, bf16.Bf16WinogradStep, plain)
    old = og.backend("CPU").compile(fn, precision="bf16")
    assert "og_bf16_wgemm(" not in old.source()
    np.testing.assert_array_equal(got, old(xv)[0])
    assert relative(got, og.backend("CPU").compile(fn)(xv)[0]) < BOUND


@needs_bf16
def test_units_with_too_few_tiles_keep_the_plain_emitter():
    """33 images of 4x4 outputs: units of 32 images (128 tiles) and a last one of 4 tiles,
    whose panels (32 columns) would not fit the f32 scratch."""
    fn, xv = conv((33, 32, 4, 32, 1))
    exe = og.backend("CPU").compile(fn, precision="bf16")
    steps = [s for s in exe.program.steps if isinstance(s, bf16.Bf16WinogradStep)]
    assert steps and not bf16_winograd.fits(steps[0])
    assert "og_bf16_wgemm(" not in exe.source()
    assert relative(exe(xv)[0], og.backend("CPU").compile(fn)(xv)[0]) < BOUND


def test_the_pair_gemm_compiles_without_a_bf16_cpu(tmp_path):
    """The helper is C the module's compiler accepts on any machine (``gcc -fsyntax-only``)."""
    compiler = default_config().compiler
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "wgemm.c"
    parts = [dialect.PRELUDE, dialect.HELPERS["gemm_bf16"](), dialect.HELPERS["bf16_wgemm"]()]
    source.write_text("\n".join(parts))
    flags = ["-fsyntax-only", "-march=x86-64-v4", "-mavx512bf16", "-fopenmp-simd"]
    done = subprocess.run([compiler, *flags, str(source)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


PLANE_CASES = {  # name: (n, c, h, o, pad); the units' planes unpadded a multiple of 4 KiB
    "64 x 32x32, units of 4 tile rows (64 tiles): planes of 8 KiB": (2, 64, 32, 64, 1),
    "512 x 4x4, 32 images a unit, shared transform in 8 channel blocks": (32, 512, 4, 512, 1),
}


@needs_bf16
@pytest.mark.parametrize("name", list(PLANE_CASES))
def test_pair_planes_lie_an_odd_number_of_lines_apart(name, monkeypatch):
    """The pair panels' and products' 16 planes are ``plane_stride`` apart (a layout only:
    the results are bitwise the plain bf16 Winograd's, itself on padded planes)."""
    monkeypatch.setattr(bf16_winograd_rows, "MIN_WASTE", 2.0)  # tiles as rows: never
    fn, xv = conv(PLANE_CASES[name])
    exe = og.backend("CPU").compile(fn, precision="bf16")
    steps = [s for s in exe.program.steps if isinstance(s, bf16.Bf16WinogradStep)]
    assert steps and bf16_winograd.fits(steps[0])
    assert steps[0].shared == (steps[0].channel_blocks > 1)
    source = exe.source()
    assert "V + xi * vs, pairs, M + xi * ms" in source and "dd = d + ab * vs" in source
    assert "ms + (oc - o0) * tb + col]" in source
    got = exe(xv)[0]
    plain = bf16.EMITTERS[bf16.Bf16WinogradStep]
    monkeypatch.setitem(codegen_module.STEP_EMITTERS, bf16.Bf16WinogradStep, plain)
    np.testing.assert_array_equal(got, og.backend("CPU").compile(fn, precision="bf16")(xv)[0])
    assert relative(got, og.backend("CPU").compile(fn)(xv)[0]) < BOUND
