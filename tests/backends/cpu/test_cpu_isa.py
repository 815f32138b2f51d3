"""The instruction set the CPU backend compiles for (``CpuConfig.isa``): its flags, its cache
key, its errors, register blocking without spills for each ISA, and equal results."""

import dataclasses
import re

import numpy as np
import pytest
from asm_checks import STACK, compile_to_asm, innermost_loops  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfig, CpuConfigError, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.compiler import Toolchain
from opgraph.testing.compare import assert_close
from opgraph.testing.records import RECORDS

FORCED = ("avx2", "avx512")


def backend_for(isa: str) -> CpuBackend:
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    return CpuBackend(dataclasses.replace(default_config(), isa=isa))


def test_an_unknown_isa_is_refused():
    with pytest.raises(CpuConfigError, match="isa must be one of native, avx2, avx512"):
        dataclasses.replace(default_config(), isa="avx1024")


def test_a_forced_isa_the_cpu_lacks_is_refused_before_compiling(monkeypatch):
    """Code for an ISA the CPU lacks would stop the process with SIGILL: a clear error."""
    monkeypatch.setattr(cpu_config, "cpu_flags", lambda: frozenset({"sse2", "avx"}))
    config = dataclasses.replace(default_config(), isa="avx512")
    with pytest.raises(CpuConfigError, match="lacks avx2, avx512bw"):
        config.target_flags()
    assert not cpu_config.supports_isa("avx2")
    assert dataclasses.replace(config, isa="native").target_flags() == ("-march=native",)


def test_forced_isa_flags_replace_march_native():
    config = dataclasses.replace(default_config(), isa="native")
    flags = Toolchain(config).flags(frozenset())
    assert "-march=native" in flags
    if cpu_config.supports_isa("avx2"):
        forced = Toolchain(dataclasses.replace(config, isa="avx2")).flags(frozenset())
        assert "-march=x86-64-v3" in forced and "-march=native" not in forced


def test_with_compiler_keeps_the_isa():
    config = CpuConfig(default_config().cache_dir, None, isa="avx2")
    assert config.with_compiler("cc").isa == "avx2"


def test_the_isa_is_part_of_the_cache_key(tmp_path):
    x = og.parameter(og.f32, (4,))
    fn = og.Function([ops.exp(x)], [x])
    keys = set()
    for isa in ("native", *FORCED):
        if cpu_config.supports_isa(isa):
            base = dataclasses.replace(default_config(), cache_dir=tmp_path, isa=isa)
            keys.add(CpuBackend(base).compile(fn).compiled.key)
    assert len(keys) == 1 + sum(cpu_config.supports_isa(i) for i in FORCED)


# ----------------------------------------------------------------------------- spills
def _kernel_loops(isa: str, helper: str, tmp_path) -> list[list[str]]:
    """Innermost multiply-add loops of a panel helper compiled for ``isa`` (``gcc -S``)."""
    entry = {
        "gemm_panels": "og_gemm_panels(A, 768, P, C, 768, M, K, 0, N);",
        "gemv_panels": "og_gemv_panels(A, 1, P, C, K, 0, N);",
    }[helper]
    lines = [
        dialect.PRELUDE,
        dialect.HELPERS[helper](),
        "void entry(const float* A, const float* P, float* C, long M, long K, long N) {",
        f"  {entry}",
        "}",
    ]
    return [
        body
        for body in innermost_loops(compile_to_asm(lines, isa, tmp_path, helper))
        if any(re.match(r"v?fmadd|v?mulps", line) for line in body)
    ]


@pytest.mark.parametrize("isa", ["native", *FORCED])
@pytest.mark.parametrize("helper", ["gemm_panels", "gemv_panels"])
def test_panel_kernels_keep_their_accumulators_in_registers(isa, helper, tmp_path):
    """The micro-kernels' inner loops make no stack (rsp/rbp-relative) vector access: the
    register blocking fits the ISA's registers (12 x 32 zmm accumulators would need 48 ymm
    under AVX2, which spilled thousands of times)."""
    loops = _kernel_loops(isa, helper, tmp_path)
    assert loops, "no multiply-add loop found in the compiled kernel"
    spills = [line for body in loops for line in body if "mm" in line and STACK.search(line)]
    assert spills == []


def test_the_spill_check_sees_spills(tmp_path, monkeypatch):
    """The check above fails on AVX-512's blocking compiled for AVX2 (the old kernel)."""
    avx512 = next(b for b in dialect.GEMM_BLOCKING if "AVX512" in b[0])
    monkeypatch.setattr(dialect, "GEMM_BLOCKING", (("1", *avx512[1:]),))
    loops = _kernel_loops("avx2", "gemm_panels", tmp_path)
    assert any("mm" in line and STACK.search(line) for body in loops for line in body)


# ---------------------------------------------------------------------------- results
LINALG = [r for r in RECORDS if r.name.startswith(("dot_", "matmul_", "gemm"))]


@pytest.mark.parametrize("isa", FORCED)
@pytest.mark.parametrize("record", LINALG, ids=lambda r: r.name)
def test_linalg_records_with_constant_weights_match_interpreter(isa, record):
    """The GEMM and linear records, every input but the first a constant (the repacked
    panel kernels), on each ISA, against INTERPRETER."""
    backend = backend_for(isa)
    t = og.f32
    if t not in record.element_types:
        pytest.skip(f"{record.name} has no f32 case")
    args = record.arguments(t)
    first = og.parameter(t, args[0].shape)
    built = record.build(first, *(og.constant(a) for a in args[1:]))
    results = list(built) if isinstance(built, tuple | list) else [built]
    fn = og.Function(results, [first])
    got = backend.compile(fn)(args[0])
    want = og.backend("INTERPRETER").compile(fn)(args[0])
    rtol, atol = record.tolerance(t)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol, atol, f"{record.name} on {isa}")


@pytest.mark.parametrize("isa", FORCED)
@pytest.mark.parametrize(
    ("rows", "inner", "cols"),
    [
        (1, 7, 40),
        (5, 385, 33),
        (6, 256, 32),
        (7, 257, 48),
        (13, 800, 100),
        (128, 768, 768),
        (49, 2500, 100),  # panels outer over 3 inner blocks: AVX2 prefetches the next panel
        (128, 3072, 96),  # rows > 32 x panels, a's inner block in L2: AVX2 keeps panels outer
        (300, 600, 40),  # rows > 32 x panels, a's inner block past the L2 bound: rows outer
    ],
)
def test_panel_gemm_shapes_match_interpreter(isa, rows, inner, cols):
    """Row tiles, column sub-tiles and inner blocks with remainders, on each ISA."""
    backend = backend_for(isa)
    rng = np.random.default_rng(rows * inner + cols)
    weights = rng.standard_normal((inner, cols)).astype(np.float32)
    data = rng.standard_normal((rows, inner)).astype(np.float32)
    x = og.parameter(og.f32, (rows, inner))
    fn = og.Function([ops.relu(ops.matmul(x, og.constant(weights)))], [x])
    exe = backend.compile(fn)
    assert "og_gemm_panels" in exe.source() or "og_gemv_panels" in exe.source()
    (got,) = exe(data)
    (want,) = og.backend("INTERPRETER").compile(fn)(data)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(inner))


def test_only_the_avx2_gemm_prefetches_the_next_panel():
    """The prefetch of the next panel is AVX2's (half the flops per byte of panel read); the
    AVX-512 and SSE branches do not fetch the next panel (AVX-512 prefetches the panel it
    streams, a few rows ahead: ``test_cpu_panel_broadcast.py``)."""
    code = dialect.HELPERS["gemm_panels"]()
    branches = re.split(r"^#(?:el)?if ", code, flags=re.MULTILINE)[1:]
    prefetching = [b.splitlines()[0] for b in branches if "__builtin_prefetch(next" in b]
    assert prefetching == ["defined(__AVX__)"]


def test_only_the_avx2_gemm_keeps_panels_outer_while_a_fits_in_l2():
    """AVX2's loop order bounds rows outer by the size of ``a``'s inner block; the AVX-512 and
    SSE branches keep the plain rule (their object code unchanged)."""
    code = dialect.HELPERS["gemm_panels"]()
    tests = "|".join(re.escape(test) for test, *_ in dialect.GEMM_BLOCKING)
    # the per-ISA branches only (a branch may hold nested #if blocks of its own)
    parts = re.split(rf"^#(?:el)?if ({tests})$", code, flags=re.MULTILINE)[1:]
    orders = {
        test: re.search(r"int rows_outer = (.*);", body).group(1)
        for test, body in zip(parts[::2], parts[1::2], strict=True)
    }
    assert orders["defined(__AVX512F__)"] == orders["1"] == "M > 32 * panels"
    assert orders["defined(__AVX__)"] == "M > 32 * panels && M * K > 131072L * ((K + 1023) / 1024)"
