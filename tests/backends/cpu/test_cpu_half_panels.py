"""AVX2 builds store each 32-column panel of a product by a constant matrix as two 16-column
halves (``TargetFeatures.panel_halves``, ``CpuConfig.panel_halves()``) and multiply them with
the ``gemm_half_panels`` unit (``codegen/dialect.py``: ``HALF_PANELS``, the 6 x 16 tile). Layout, choice, results against INTERPRETER (products, panel
convolutions, fused attention, symbolic rows, two threads), registers and refusal."""

import dataclasses
import math
import re
import subprocess

import numpy as np
import pytest
from asm_checks import STACK, innermost_loops  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.compiler import CFLAGS
from opgraph.backends.fused.lowering.attention import AttentionStep
from opgraph.backends.fused.lowering.conv_panels import PanelConvStep
from opgraph.backends.fused.lowering.linalg import halve_panels

RNG = np.random.default_rng(87)


def backend_for(isa: str, threads: int = 2) -> CpuBackend:
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    return CpuBackend(dataclasses.replace(default_config(), isa=isa, num_threads=threads))


def interpreter(fn: og.Function, *args: np.ndarray) -> list[np.ndarray]:
    return og.backend("INTERPRETER").compile(fn)(*args)


# ------------------------------------------------------------------------------ layout
def test_halve_panels_stores_each_half_contiguously():
    panels = np.arange(3 * 5 * 32, dtype=np.float32).reshape(3, 5, 32)
    halves = halve_panels(panels)
    assert halves.shape == panels.shape and halves.flags.c_contiguous
    flat = halves.reshape(3, 2, 5, 16)  # panel, half, k, column of the half
    for p in range(3):
        for h in range(2):
            np.testing.assert_array_equal(flat[p, h], panels[p, :, 16 * h : 16 * h + 16])


@pytest.mark.parametrize(
    ("isa", "flags", "halves"),
    [
        ("avx2", {"avx2", "fma", "avx512f"}, True),  # forced AVX2 on an AVX-512 CPU
        ("avx512", {"avx2", "fma", "avx512f"}, False),
        ("native", {"avx", "avx2", "fma", "avx512f"}, False),
        ("native", {"avx", "avx2", "fma"}, True),  # an AVX2-only CPU (Zen 3)
        ("native", {"sse2"}, False),
        ("native", set(), False),  # no /proc/cpuinfo, or not x86
    ],
)
def test_panel_halves_follow_the_generated_isa(monkeypatch, isa, flags, halves):
    monkeypatch.setattr(cpu_config, "cpu_flags", lambda: frozenset(flags))
    config = dataclasses.replace(default_config(), isa=isa)
    assert config.panel_halves() is halves
    assert config.vector_lanes() == (8 if halves else 16)
    features = CpuBackend(config)._features()
    assert (features.panel_halves, features.vector_lanes) == (halves, config.vector_lanes())


def _product(rows, inner, cols):
    weights = RNG.standard_normal((inner, cols)).astype(np.float32)
    x = og.parameter(og.f32, (rows, inner))
    fn = og.Function([ops.relu(ops.matmul(x, og.constant(weights)))], [x])
    return fn, RNG.standard_normal((rows, inner)).astype(np.float32)


def test_avx2_modules_call_the_half_panel_unit_and_avx512_modules_do_not():
    fn, _ = _product(64, 300, 96)
    avx2 = backend_for("avx2").compile(fn)
    assert "kernel:gemm_half_panels" in avx2.generated.needs
    assert not {"kernel:gemm_panels", "kernel:gemm_panels_resident"} & avx2.generated.needs
    avx512 = backend_for("avx512").compile(fn)
    assert "kernel:gemm_panels_resident" in avx512.generated.needs  # a small module
    assert "kernel:gemm_half_panels" not in avx512.generated.needs


# ----------------------------------------------------------------------------- results
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    ("rows", "inner", "cols"),
    [
        (6, 64, 32),  # one full tile per half
        (7, 257, 40),  # a half panel of 8 valid columns, a 1-row tile
        (13, 1500, 100),  # two inner blocks: accumulators reloaded from c
        (128, 768, 768),  # BERT's projections: full tiles, column blocks on two threads
        (49, 2500, 112),  # panels outer over 3 inner blocks: the next panel's halves prefetched
        (300, 600, 48),  # rows > 32 x panels, a's inner block past the L2 bound: rows outer
        (600, 96, 80),  # a row split on two threads (ROW_SPLIT rows)
    ],
)
def test_half_panel_products_match_interpreter(threads, rows, inner, cols):
    fn, data = _product(rows, inner, cols)
    exe = backend_for("avx2", threads).compile(fn)
    assert "kernel:gemm_half_panels" in exe.generated.needs
    (got,) = exe(data)
    (want,) = interpreter(fn, data)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(inner))


def test_half_panel_products_equal_the_whole_panel_kernels_bit_for_bit():
    """The same multiply-adds in the same order on both layouts and tiles: AVX2's half panels
    give AVX-512's values exactly (both cut k into the same blocks)."""
    fn, data = _product(61, 700, 72)
    (avx2,) = backend_for("avx2", 1).compile(fn)(data)
    (avx512,) = backend_for("avx512", 1).compile(fn)(data)
    np.testing.assert_array_equal(avx2, avx512)


def test_symbolic_rows_use_half_panels():
    x = og.parameter(og.f32, (og.dim("batch", max=512), 200))
    weights = RNG.standard_normal((200, 70)).astype(np.float32)
    fn = og.Function([ops.matmul(x, og.constant(weights))], [x])
    exe = backend_for("avx2").compile(fn)
    assert "kernel:gemm_half_panels" in exe.generated.needs
    for rows in (1, 37, 300):
        data = RNG.standard_normal((rows, 200)).astype(np.float32)
        (got,) = exe(data)
        np.testing.assert_allclose(got, data @ weights, rtol=1e-4, atol=1e-3)


def test_panel_convolution_with_half_panels_matches_interpreter():
    w = (RNG.standard_normal((70, 64, 3, 3)) / 24).astype(np.float32)
    x = og.parameter(og.f32, (1, 64, 7, 7))
    y = ops.convolution(x, og.constant(w), padding_below=(1, 1), padding_above=(1, 1))
    fn = og.Function([ops.relu(y)], [x])
    exe = backend_for("avx2").compile(fn)
    assert any(isinstance(s, PanelConvStep) for s in exe.program.steps)
    data = RNG.standard_normal((1, 64, 7, 7)).astype(np.float32)
    (got,) = exe(data)
    (want,) = interpreter(fn, data)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _attention(tokens: int, heads: int, width: int) -> og.Function:
    """BERT's attention over (1, tokens, width) projections split into heads by views."""
    q, k, v = (og.parameter(og.f32, (1, tokens, width), n) for n in "qkv")

    def split(t: og.Output, perm: tuple[int, ...]) -> og.Output:
        return ops.transpose(ops.reshape(t, (1, tokens, heads, width // heads)), perm)

    scores = ops.matmul(split(q, (0, 2, 1, 3)), split(k, (0, 2, 3, 1)))
    scores = scores * (1.0 / math.sqrt(width // heads))
    context = ops.matmul(ops.softmax(scores, -1), split(v, (0, 2, 1, 3)))
    merged = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (1, tokens, width))
    return og.Function([merged], [q, k, v])


@pytest.mark.parametrize(("tokens", "heads", "width"), [(40, 2, 96), (128, 2, 128)])
def test_fused_attention_packs_half_panels(tokens, heads, width):
    """The attention step packs k and v into panels at run time: in half panels under AVX2
    (40 tokens and 48-wide heads: partly filled halves)."""
    fn = _attention(tokens, heads, width)
    exe = backend_for("avx2").compile(fn)
    assert any(isinstance(s, AttentionStep) for s in exe.program.steps)
    assert "jj < 16L" in exe.source()  # 16-column panels: two per 32-column panel
    arrays = [RNG.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    (got,) = exe(*arrays)
    (want,) = interpreter(fn, *arrays)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------- registers, refusal
def _compile_helper(march: tuple[str, ...], tmp_path) -> subprocess.CompletedProcess[str]:
    compiler = default_config().compiler
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "half.c"
    source.write_text(
        "\n".join(
            [
                dialect.PRELUDE,
                dialect.HELPERS["gemm_half_panels"](),
                "void entry(const float* A, const float* P, float* C, long M, long K, long N) {",
                "  og_gemm_panels(A, 768, P, C, 768, M, K, 0, N);",
                "}",
            ]
        )
    )
    flags = [f for f in (CFLAGS[0], *march, *CFLAGS[1:]) if f not in ("-shared", "-pipe")]
    return subprocess.run(
        [compiler, *flags, "-S", str(source), "-o", str(tmp_path / "half.s")],
        capture_output=True,
        text=True,
    )


def test_the_half_panel_kernel_keeps_its_accumulators_in_registers(tmp_path):
    """No stack access in any multiply-add loop; the full tile's loop has six broadcasts and
    twelve multiply-adds."""
    if not cpu_config.supports_isa("avx2"):
        pytest.skip("this CPU cannot run avx2 code")
    done = _compile_helper(cpu_config.ISA_FLAGS["avx2"], tmp_path)
    assert done.returncode == 0, done.stderr
    loops = [
        body
        for body in innermost_loops((tmp_path / "half.s").read_text())
        if any(re.match(r"v?fmadd", line) for line in body)
    ]
    assert loops, "no multiply-add loop found in the compiled kernel"
    assert [line for body in loops for line in body if "mm" in line and STACK.search(line)] == []
    full = [
        body
        for body in loops
        if sum(line.startswith("vfmadd231ps") for line in body) == 12
        and sum(line.startswith("vbroadcastss") for line in body) == 6
    ]
    assert full, "the full 6 x 16 tile's loop is not an innermost loop of the kernel"


def test_the_half_panel_unit_refuses_other_targets(tmp_path):
    """Half panels are AVX2's layout: compiled for AVX-512 (whose modules pack whole panels)
    the unit stops the compiler with an error that names it."""
    done = _compile_helper(cpu_config.ISA_FLAGS["avx512"], tmp_path)
    assert done.returncode != 0
    assert "half panels (gemm_half_panels) are the layout of AVX2 builds only" in done.stderr
