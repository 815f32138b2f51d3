"""The panel GEMM's micro-kernel (``og_mk`` in ``codegen/dialect.py``): its accumulators are
named variables that stay in registers through the whole call, full tiles reading and writing
``c`` directly and narrow ones through a zero-padded copy of their rows. Each unit the CPU can
run (whole panels for every ISA, half panels for AVX2; the AVX-512 unit also with Zen 4's
tuning, whose full tiles take ``og_mk_full``) is called through ``ctypes`` on integer-valued
operands, so every sum is exact in f32: every tile height (1 to 13 rows, 29), full and narrow
column tiles (32, 71, 100 columns), one inner block and three (the accumulators reloaded
from ``c``)."""

import ctypes
import subprocess

import numpy as np
import pytest
from asm_checks import STACK, ZEN4, compile_to_asm

from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.compiler import CFLAGS

RNG = np.random.default_rng(113)
#: (helper, ISA, tuning flags after -march, half panels)
UNITS = {
    "native": ("gemm_panels", "native", (), False),
    "avx512": ("gemm_panels", "avx512", (), False),
    "avx512-zen4": ("gemm_panels", "avx512", ZEN4, False),
    "avx2": ("gemm_panels", "avx2", (), False),
    "avx2-halves": ("gemm_half_panels", "avx2", (), True),
}
ROWS = [*range(1, 14), 29]


def _unit(name: str, tmp_path) -> ctypes.CDLL:
    helper, isa, tuning, _ = UNITS[name]
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    compiler = default_config().compiler
    if compiler is None:
        pytest.skip("no C compiler")
    source, library = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    code = dialect.HELPERS[helper]().replace("static void og_gemm_panels(", "void og_gemm_panels(")
    source.write_text(dialect.PRELUDE + "\n" + code + "\n")
    flags = [CFLAGS[0], *cpu_config.ISA_FLAGS[isa], *CFLAGS[1:], *tuning]
    subprocess.run([compiler, *flags, str(source), "-o", str(library)], check=True)
    lib = ctypes.CDLL(str(library))
    lib.og_gemm_panels.restype = None
    return lib


def _pack(w: np.ndarray, halves: bool) -> np.ndarray:
    """``w`` (K x N) as 32-column panels (K x 32 each, zero-padded), or each panel as its two
    16-column halves one after the other."""
    k, n = w.shape
    panels = -(-n // 32)
    padded = np.zeros((k, panels * 32), np.float32)
    padded[:, :n] = w
    blocks = padded.reshape(k, panels, 32).transpose(1, 0, 2)  # panel, k, column
    if halves:
        blocks = blocks.reshape(panels, k, 2, 16).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(blocks).reshape(-1)


@pytest.mark.parametrize("name", list(UNITS))
def test_every_tile_exact(name, tmp_path):
    lib = _unit(name, tmp_path)
    pointer = ctypes.POINTER(ctypes.c_float)
    for inner in (64, 2100):  # 2100: three inner blocks of at most 1024
        for cols in (32, 71, 100):
            w = RNG.integers(-3, 4, (inner, cols)).astype(np.float32)
            panels = _pack(w, UNITS[name][3])
            for rows in ROWS:
                a = RNG.integers(-3, 4, (rows, inner + 5)).astype(np.float32)  # lda > K
                c = np.full((rows, cols + 3), np.nan, np.float32)  # ldc > N: kept
                lib.og_gemm_panels(
                    a.ctypes.data_as(pointer),
                    ctypes.c_long(inner + 5),
                    panels.ctypes.data_as(pointer),
                    c.ctypes.data_as(pointer),
                    ctypes.c_long(cols + 3),
                    ctypes.c_long(rows),
                    ctypes.c_long(inner),
                    ctypes.c_long(0),
                    ctypes.c_long(cols),
                )
                want = a[:, :inner].astype(np.int64) @ w.astype(np.int64)
                where = f"{name}: {rows} x {inner} x {cols}"
                np.testing.assert_array_equal(c[:, :cols], want.astype(np.float32), where)
                assert np.isnan(c[:, cols:]).all(), f"{where}: wrote past column {cols}"


def test_full_tile_accumulators_never_touch_the_stack(tmp_path):
    """AVX-512's full 12-row tile, compiled alone with a Zen 5's tuning: no vector register is
    loaded from or stored to the stack anywhere in the call (the accumulators as arrays were
    loaded from the stack before the inner loop and stored there after it, then copied to
    ``c`` through the stack). AVX2's 6-row tile (12 accumulators, 15 of 16 registers) still
    moves some through the stack outside its inner loop (GCC 12). With the next panel group's
    prefetch (``pf``, one line per inner step) as ``og_gemm_panels`` passes it."""
    entry = [
        "void entry(const float* a, long lda, const float* p, long k0, long k1, float* c,",
        "           long ldc, const char* pf) {",
        "  og_mk_tile(12, a, lda, p, k0, k1, c, ldc, pf, 64);",
        "}",
    ]
    source = dialect.HELPERS["gemm_panels"]()
    tuning = ("-mtune=znver3", "-mavxvnni")
    asm = compile_to_asm(
        [dialect.PRELUDE, source, *entry], "avx512", tmp_path, "tile", (*CFLAGS, *tuning)
    )
    body = asm.split("entry:", 1)[1].split(".size\tentry", 1)[0]
    assert "%zmm" in body and "vfmadd" in body
    spills = [x for x in body.splitlines() if ("%zmm" in x or "%ymm" in x) and STACK.search(x)]
    assert spills == []
