"""``CpuBackend.compile(fn, precision="bf16")``: which steps run in bf16, their results
against an oracle of bf16-rounded operands, the error bound against f32 (docs/cpu.md,
"Reduced precision"), and the refusals."""

import dataclasses
import subprocess

import ml_dtypes
import numpy as np
import pytest
from asm_checks import STACK, innermost_loops  # beside this file (rootdir import)
from bf16_support import needs_bf16  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfigError, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import bf16, dialect

#: The documented bound: max |bf16 - f32| / max |f32| on every product and model below.
BOUND = 1e-2


def rounded(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bf16 (nearest, ties to even), in f64 for an exact oracle."""
    return a.astype(ml_dtypes.bfloat16).astype(np.float64)


def relative(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def linear(m: int, k: int, n: int, seed: int = 0) -> tuple[og.Function, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = og.parameter(og.f32, (m, k), name="x")
    w = rng.standard_normal((k, n)).astype(np.float32)
    fn = og.Function([ops.dot(x, og.constant(w))], [x], name="linear")
    return fn, rng.standard_normal((m, k)).astype(np.float32), w


def step_kinds(exe: og.Executable) -> list[str]:
    return [type(s).__name__ for s in exe.program.steps]  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- refusals
def test_an_unknown_precision_is_refused():
    fn, _, _ = linear(2, 3, 4)
    with pytest.raises(CpuConfigError, match=r"precision='fp8'\): expected one of 'f32', 'bf16'"):
        og.backend("CPU").compile(fn, precision="fp8")


def test_bf16_is_refused_on_a_cpu_without_avx512_bf16(monkeypatch):
    """Simulated through the flags the ISA checks read: a clear error before compiling."""
    monkeypatch.setattr(cpu_config, "cpu_flags", lambda: frozenset({"avx2", "avx512f", "fma"}))
    fn, _, _ = linear(2, 3, 4)
    with pytest.raises(CpuConfigError, match="needs a CPU with avx512_bf16.*use precision='f32'"):
        og.backend("CPU").compile(fn, precision="bf16")


def test_bf16_is_refused_with_a_forced_avx2_isa(monkeypatch):
    monkeypatch.setattr(cpu_config, "cpu_flags", lambda: frozenset({"avx512_bf16", "avx2"}))
    with pytest.raises(CpuConfigError, match="generates AVX-512 code, but CpuConfig"):
        cpu_config.check_precision("bf16", "avx2")


def test_f32_is_accepted_everywhere(monkeypatch):
    monkeypatch.setattr(cpu_config, "cpu_flags", frozenset)
    cpu_config.check_precision("f32", "avx2")


# ----------------------------------------------------------------------------- products
@needs_bf16
@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        (13, 67, 45),  # a partial tile, odd inner dimension, a partial panel
        (40, 385, 100),  # two inner blocks, the second odd
        (100, 771, 64),  # two row chunks, three inner blocks
        (12, 32, 32),  # exactly one tile
        (5, 2, 33),
    ],
)
def test_a_product_by_constant_weights_is_the_product_of_bf16_operands(m, k, n):
    fn, x, w = linear(m, k, n)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16GemmStep" in step_kinds(exe)
    got = exe(x)[0]
    exact = rounded(x) @ rounded(w)  # products of bf16 are exact; f32 accumulation
    scale = np.abs(rounded(x)) @ np.abs(rounded(w))
    assert np.all(np.abs(got - exact) <= 1e-5 * scale + 1e-30)
    f32 = og.backend("CPU").compile(fn)(x)[0]
    assert relative(got, f32) < BOUND


@needs_bf16
def test_f32_stays_f32_and_bf16_only_touches_constant_products():
    rng = np.random.default_rng(1)
    x = og.parameter(og.f32, (16, 40), name="x")
    y = og.parameter(og.f32, (40, 48), name="y")
    w = og.constant(rng.standard_normal((40, 48)).astype(np.float32))
    fn = og.Function([ops.dot(x, w), ops.dot(x, y)], [x, y], name="two")
    cpu = og.backend("CPU")
    assert not any("Bf16" in kind for kind in step_kinds(cpu.compile(fn)))
    exe = cpu.compile(fn, precision="bf16")
    assert step_kinds(exe).count("Bf16GemmStep") == 1
    xv, yv = rng.standard_normal((16, 40), np.float32), rng.standard_normal((40, 48), np.float32)
    by_constant, by_parameter = exe(xv, yv)
    np.testing.assert_allclose(by_parameter, xv @ yv, rtol=1e-5, atol=1e-5)  # still f32
    assert relative(by_constant, xv @ w.node.op.value) < BOUND  # type: ignore[attr-defined]


@needs_bf16
def test_weights_with_an_infinity_stay_f32():
    """The kernels pad odd inner dimensions with products by zero: a constant holding an
    infinity or NaN keeps the f32 step (the padding would make NaN)."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((33, 40)).astype(np.float32)
    w[5, 7] = np.inf
    x = og.parameter(og.f32, (8, 33), name="x")
    fn = og.Function([ops.dot(x, og.constant(w))], [x], name="inf")
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16GemmStep" not in step_kinds(exe)
    xv = np.abs(rng.standard_normal((8, 33))).astype(np.float32)
    np.testing.assert_array_equal(exe(xv)[0], og.backend("CPU").compile(fn)(xv)[0])


@needs_bf16
def test_an_epilogue_runs_after_a_bf16_product():
    rng = np.random.default_rng(3)
    x = og.parameter(og.f32, (24, 64), name="x")
    w = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    biased = ops.dot(x, og.constant(w)) + ops.broadcast(og.constant(b), (24, 96), (0,))
    fn = og.Function([ops.relu(biased)], [x], name="ep")
    exe = og.backend("CPU").compile(fn, precision="bf16")
    xv = rng.standard_normal((24, 64)).astype(np.float32)
    want = np.maximum(rounded(xv) @ rounded(w) + b, 0)
    np.testing.assert_allclose(exe(xv)[0], want, rtol=1e-4, atol=1e-4)


# -------------------------------------------------------------------------- convolutions
CONVS = [  # (n, c, h, o, k, stride, pad, groups): the step each takes
    (1, 16, 14, 24, 3, 1, 1, 1),  # im2col rows (or Winograd)
    (2, 8, 9, 40, 3, 2, 1, 1),  # strided
    (1, 32, 8, 33, 1, 1, 0, 1),  # 1x1: the image is the right operand
    (1, 6, 7, 10, 5, 1, 2, 2),  # grouped, odd inner dimension (3 x 25)
    (1, 64, 28, 64, 3, 1, 1, 1),  # Winograd
    (4, 64, 4, 128, 3, 1, 1, 1),  # few output pixels: the panel product
    (4, 32, 5, 128, 3, 1, 1, 1),  # small planes: the wide path
]


@needs_bf16
@pytest.mark.parametrize("case", CONVS, ids=lambda c: "x".join(map(str, c)))
def test_convolutions_in_bf16(case):
    n, c, h, o, k, s, p, g = case
    rng = np.random.default_rng(4)
    w = rng.standard_normal((o, c // g, k, k)).astype(np.float32)
    x = og.parameter(og.f32, (n, c, h, h), name="x")
    pads = {"padding_below": (p, p), "padding_above": (p, p)}
    y = ops.convolution(x, og.constant(w), strides=(s, s), groups=g, **pads)
    fn = og.Function([y], [x], name="conv")
    xv = rng.standard_normal((n, c, h, h)).astype(np.float32)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    kinds = step_kinds(exe)
    bf16_steps = {"Bf16ConvStep", "Bf16WinogradStep", "Bf16RowWinogradStep", "Bf16PanelConvStep"}
    assert (bf16_steps | {"Bf16TapConvStep"}) & set(kinds)
    got = exe(xv)[0]
    f32 = og.backend("CPU").compile(fn)(xv)[0]
    assert relative(got, f32) < BOUND
    if {"Bf16ConvStep", "Bf16PanelConvStep", "Bf16TapConvStep"} & set(kinds):  # exact
        w16 = og.constant(rounded(w).astype(np.float32))
        y16 = ops.convolution(x, w16, strides=(s, s), groups=g, **pads)
        ref = og.backend("INTERPRETER").compile(og.Function([y16], [x], name="rounded"))
        exact = ref(rounded(xv).astype(np.float32))[0]
        np.testing.assert_allclose(got, exact, rtol=1e-4, atol=1e-4 * float(np.abs(exact).max()))


@needs_bf16
def test_the_stems_patches_round_to_even_by_vectors():
    """``og_sgemm_bf16`` rounds whole 32-column panels of patches by ``og_bf16_pairs``
    (``vcvtne2ps2bf16`` and ``vpermw``): input values halfway between two bf16 values round
    to the even one, as ml_dtypes does (truncation or ties away would move the sums by 2^-8
    of a term), and an infinity stays one; pairs keep their order (the filter row's taps)."""
    x = og.parameter(og.f32, (1, 3, 40, 40), name="x")
    w = np.random.default_rng(6).standard_normal((16, 3, 7, 7)).astype(np.float32)
    y = ops.convolution(x, og.constant(w), strides=(2, 2), padding_below=(3, 3),
                        padding_above=(3, 3))  # fmt: skip
    fn = og.Function([y], [x], name="stem")
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert "Bf16ConvStep" in step_kinds(exe) and "og_bf16_pairs(lo, hi, d)" in exe.source()
    j = np.arange(3 * 40 * 40).reshape(1, 3, 40, 40) % 128
    xv = ((1 + 2.0**-8 + j * 2.0**-7) * np.where(j % 5 == 0, -1, 1)).astype(np.float32)
    xv[0, 1, 20, 21] = np.inf
    got = exe(xv)[0]
    w16 = og.constant(rounded(w).astype(np.float32))
    y16 = ops.convolution(x, w16, strides=(2, 2), padding_below=(3, 3), padding_above=(3, 3))
    ref = og.backend("INTERPRETER").compile(og.Function([y16], [x], name="rounded"))
    exact = ref(rounded(xv).astype(np.float32))[0]
    finite = np.isfinite(exact)
    assert not finite.all() and np.array_equal(got[~finite], exact[~finite])
    scale = float(np.abs(exact[finite]).max())
    np.testing.assert_allclose(got[finite], exact[finite], rtol=1e-5, atol=1e-5 * scale)


# ---------------------------------------------------------------------------- a model
@needs_bf16
def test_a_small_residual_network_stays_within_the_bound():
    """conv-relu-conv + residual, pooled, then a classifier: the bench models' pieces."""
    rng = np.random.default_rng(5)
    x = og.parameter(og.f32, (2, 16, 12, 12), name="x")

    def conv(v: og.Output, o: int, c: int) -> og.Output:
        w = og.constant((rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32))
        return ops.convolution(v, w, padding_below=(1, 1), padding_above=(1, 1))

    h = ops.relu(conv(ops.relu(conv(x, 16, 16)), 16, 16) + x)
    pooled = ops.reshape(h, (2, 16 * 144))
    w = og.constant((rng.standard_normal((16 * 144, 40)) / 48).astype(np.float32))
    fn = og.Function([ops.dot(pooled, w)], [x], name="net")
    xv = rng.standard_normal((2, 16, 12, 12)).astype(np.float32)
    exe = og.backend("CPU").compile(fn, precision="bf16")
    assert any(kind.startswith("Bf16") for kind in step_kinds(exe))
    assert relative(exe(xv)[0], og.backend("CPU").compile(fn)(xv)[0]) < BOUND


@needs_bf16
def test_precision_is_part_of_the_compiled_module():
    """The f32 and bf16 modules of one Function are different cache entries."""
    fn, x, _ = linear(16, 48, 64)
    backend = CpuBackend(dataclasses.replace(default_config()))
    f32, b16 = backend.compile(fn), backend.compile(fn, precision="bf16")
    assert f32.source() != b16.source() and "og_gemm_bf16_panels(" in b16.source()
    assert not np.array_equal(f32(x)[0], b16(x)[0])


@pytest.mark.parametrize(
    "entry",
    [
        "og_gemm_bf16_panels(A, 768, Q, C, 768, M, K, 0, N);",
        "og_sgemm_bf16(101, 111, 111, M, N, K, 1, Q, K, A, N, 0, C, N);",
    ],
    ids=["panels", "left-constant"],
)
def test_bf16_micro_kernels_keep_their_accumulators_in_registers(entry, tmp_path):
    """Compiled with ``gcc -S`` (no bf16 CPU needed): the inner loops holding
    ``vdpbf16ps`` make no stack access (as arrays, GCC stored all 24 accumulators on every
    step, halving the speed)."""
    compiler = default_config().compiler
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "bf16.c"
    source.write_text(
        "\n".join(
            [
                dialect.PRELUDE,
                dialect.HELPERS["gemm_bf16"](),
                "void entry(const float* A, const uint16_t* Q, float* C, int M, int K, int N) {",
                f"  {entry}",
                "}",
            ]
        )
    )
    asm = tmp_path / "bf16.s"
    flags = ["-O3", "-march=x86-64-v4", "-mavx512bf16", "-fopenmp-simd", "-fwrapv"]
    done = subprocess.run(
        [compiler, *flags, "-S", str(source), "-o", str(asm)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loops = [b for b in innermost_loops(asm.read_text()) if any("vdpbf16ps" in x for x in b)]
    assert loops, "no vdpbf16ps loop found"
    assert max(sum("vdpbf16ps" in x for x in b) for b in loops) == 2 * bf16.ROWS
    assert [x for b in loops for x in b if "mm" in x and STACK.search(x)] == []
