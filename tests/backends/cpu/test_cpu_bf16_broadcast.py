"""The bf16 micro-kernels (``og_bf16_mk*`` in ``codegen/bf16.py``) broadcast each row's bf16
pair into a register (``vbroadcastss``) for its two ``vdpbf16ps``, except in the builds where
``dialect.BROADCAST_TARGETS`` takes embedded broadcasts (tuned for AMD Zen, without AVX-VNNI:
a Zen 4), where ``vdpbf16ps`` reads it as ``m32{1to16}``. On a Zen 5 the register form ran the
12-row kernel at 0.99 of the instruction's peak against 0.91 (docs/performance.md,
2026-11-27, h109). Both forms are exact: the embedded one is run here too, through flags that
make this CPU's build look like a Zen 4's."""

import dataclasses

import numpy as np
import pytest
from asm_checks import (  # beside this file (rootdir import)
    ZEN4,
    by_broadcast_target,
    compile_to_asm,
    innermost_loops,
)
from bf16_support import needs_bf16  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import bf16, dialect
from opgraph.backends.cpu.compiler import CFLAGS

ENTRY = "void entry(const float* A, const uint16_t* Q, float* C, int M, int K, int N) {"


@by_broadcast_target
@pytest.mark.parametrize(
    "call",
    [
        "og_gemm_bf16_panels(A, 768, Q, C, 768, M, K, 0, N);",
        "og_sgemm_bf16(101, 111, 111, M, N, K, 1, Q, K, A, N, 0, C, N);",
    ],
    ids=["panels", "left-constant"],
)
def test_row_pairs_broadcast_by_target(call, tuning, embedded, tmp_path):
    """The 12-row loops: 24 ``vdpbf16ps`` per pair step, reading the 12 row pairs as embedded
    broadcasts (Zen 4) or from 12 ``vbroadcastss`` and none embedded (elsewhere), and
    prefetching both lines of the panel row ``PREFETCH_ROWS`` ahead (8 KiB)."""
    lines = [dialect.PRELUDE, dialect.HELPERS["gemm_bf16"](), ENTRY, f"  {call}", "}"]
    flags = (*CFLAGS, "-mavx512bf16", *tuning)
    asm = compile_to_asm(lines, "avx512", tmp_path, "gemm_bf16", flags)
    loops = [b for b in innermost_loops(asm) if sum("vdpbf16ps" in x for x in b) == 2 * bf16.ROWS]
    assert loops, "no 12-row vdpbf16ps loop found"
    for body in loops:
        assert sum("{1to16}" in x for x in body) == (2 * bf16.ROWS if embedded else 0)
        broadcasts = [x for x in body if x.startswith("vbroadcastss")]
        assert len(broadcasts) == (0 if embedded else bf16.ROWS), body
        assert all("(" in x for x in broadcasts)  # straight from memory
        fetched = sorted(x.split()[1] for x in body if x.startswith("prefetcht0"))
        assert len(fetched) == 2 and fetched[1] == "64" + fetched[0], body
        loads = [_address(x.split()[1]) for x in body if x.startswith("vmovups")]
        ahead = _address(fetched[0])
        assert [ahead[0] - o for o, r in loads if r == ahead[1]] == [
            128 * bf16.PREFETCH_ROWS,
            128 * bf16.PREFETCH_ROWS - 64,
        ], body


def _address(operand: str) -> tuple[int, str]:
    """An AT&T memory operand ``offset(%reg)`` as (offset, register)."""
    offset, register = operand.rstrip(",").split("(", 1)
    return int(offset or "0"), register.split(",")[0].rstrip(")")


def _exact_products() -> tuple[og.Function, list[np.ndarray], list[np.ndarray]]:
    """Products by constant weights through every tile height (2 to 12 rows, 29 and 128; one
    row stays an f32 product),
    partial and full panels, odd inner dimensions, and inner dimensions deeper than one block
    (769: two blocks of ``PANEL_DEPTH``; 3100: read rounded once, ``og_gemm_bf16_rows``):
    small integers, exact in bf16 and in every f32 sum, so any row, column or inner index
    the kernel gets wrong shows."""
    rng = np.random.default_rng(109)
    shapes = [(r, 67, 45) for r in range(2, 13)] + [(29, 769, 96), (128, 3100, 40), (7, 2, 33)]
    params, outputs, data, want = [], [], [], []
    for i, (m, k, n) in enumerate(shapes):
        w = rng.integers(-3, 4, (k, n)).astype(np.float32)
        x = og.parameter(og.f32, (m, k), name=f"x{i}")
        params.append(x)
        outputs.append(ops.dot(x, og.constant(w)))
        a = rng.integers(-3, 4, (m, k)).astype(np.float32)
        data.append(a)
        want.append((a.astype(np.int64) @ w.astype(np.int64)).astype(np.float32))
    return og.Function(outputs, params, name="products"), data, want


@needs_bf16
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("extra", [(), ZEN4], ids=["this-cpu", "zen4-form"])
def test_both_forms_exact(extra, threads):
    fn, data, want = _exact_products()
    config = dataclasses.replace(default_config(), extra_cflags=extra, num_threads=threads)
    exe = CpuBackend(config).compile(fn, precision="bf16")
    kinds = {type(s).__name__ for s in exe.program.steps}  # type: ignore[attr-defined]
    assert kinds == {"Bf16GemmStep"}
    for got, expected in zip(exe(*data), want, strict=True):
        np.testing.assert_array_equal(got, expected)


@needs_bf16
def test_both_forms_give_the_same_bits_on_random_values():
    """Random floats (rounded to bf16 as the kernels read them): the two forms run the same
    instructions on the same values, so their sums are bit-identical."""
    rng = np.random.default_rng(1090)
    x = og.parameter(og.f32, (50, 300), name="x")
    w = rng.standard_normal((300, 70)).astype(np.float32)
    fn = og.Function([ops.dot(x, og.constant(w))], [x], name="linear")
    a = rng.standard_normal((50, 300)).astype(np.float32)
    got = [
        CpuBackend(dataclasses.replace(default_config(), extra_cflags=extra)).compile(
            fn, precision="bf16"
        )(a)[0]
        for extra in [(), ZEN4]
    ]
    np.testing.assert_array_equal(got[0], got[1])
