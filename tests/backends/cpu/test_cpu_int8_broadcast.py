"""The 8-bit convolution kernels (``og_q8s_mk*`` in ``codegen/int8.py``) broadcast each
filter quad into a register (``vpbroadcastd``) and multiply by register operands, except in
the builds where ``dialect.BROADCAST_TARGETS`` takes embedded broadcasts (tuned for AMD Zen,
without AVX-VNNI: a Zen 4), where ``vpdpbusd`` reads it as ``m32{1to16}``. On a Zen 5 the
register form ran the conv GEMM 5-10 % faster (docs/performance.md, 2026-11-26, H104). Both
forms are exact: the embedded one is run here too, through flags that make this CPU's build
look like a Zen 4's."""

import dataclasses

import numpy as np
import pytest
from asm_checks import (  # beside this file (rootdir import)
    ZEN4,
    by_broadcast_target,
    compile_to_asm,
    innermost_loops,
)
from int8_graphs import conv_integer_graph  # beside this file (rootdir import)

import opgraph as og
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import dialect, int8  # noqa: F401 (registers the helper)
from opgraph.backends.cpu.compiler import CFLAGS
from opgraph.backends.fused.lowering.quantized import QConvStep

INTERPRETER = og.backend("INTERPRETER")
VNNI = "-mavx512vnni"


def _unit() -> list[str]:
    unit = dialect.HELPERS["q8_conv_gemm"]()
    return [dialect.PRELUDE, unit.replace("static void og_q8_conv_gemm(", "void og_q8_conv_gemm(")]


@by_broadcast_target
def test_filter_quads_broadcast_by_target(tuning, embedded, tmp_path):
    """The 12-row loops: 24 ``vpdpbusd`` per filter-quad step, with 12 embedded broadcasts
    (Zen 4) or 12 ``vpbroadcastd`` and none embedded (elsewhere)."""
    flags = (*CFLAGS, VNNI, *tuning)
    asm = compile_to_asm(_unit(), "avx512", tmp_path, "q8_conv_gemm", flags)
    loops = [b for b in innermost_loops(asm) if sum("vpdpbusd" in x for x in b) == 24]
    assert loops, "no 12-row vpdpbusd loop found"
    for body in loops:
        assert sum("{1to16}" in x for x in body) == (24 if embedded else 0)
        assert sum(x.startswith("vpbroadcastd") for x in body) == (0 if embedded else 12)


@pytest.mark.skipif(
    not {"avx512f", "avx512_vnni"} <= cpu_config.cpu_flags(), reason="no AVX512-VNNI"
)
@pytest.mark.parametrize("extra", [(), ZEN4], ids=["this-cpu", "zen4-form"])
def test_both_forms_exact(extra):
    """Convolutions through every row tile height (O = 37: 12 + 12 + 12 + 1 rows), a tail of
    the inner dimension and several blocks of it, equal to INTERPRETER's."""
    config = dataclasses.replace(default_config(), extra_cflags=extra)
    rng = np.random.default_rng(104)
    for shape, o, kernel, t, zero in [
        ((2, 16, 9, 9), 37, (3, 3), og.u8, 7),
        ((1, 3, 12, 12), 11, (5, 5), og.u8, 130),  # K = 75: a partial quad
        ((1, 64, 8, 8), 29, (3, 3), og.i8, -5),  # 144 quads: two blocks of the inner axis
    ]:
        fn, data = conv_integer_graph(rng, shape, o, kernel, (1, 1), (1, 1), (1, 1), 1, t, zero)
        exe = CpuBackend(config).compile(fn)
        assert any(isinstance(s, QConvStep) for s in exe.program.steps)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))


@pytest.mark.parametrize("tuning", [ZEN4, ("-mtune=znver3", "-mavxvnni")], ids=["zen4", "zen5"])
def test_activation_quads_broadcast_from_memory(tuning, tmp_path):
    """The matrix-product kernels (``og_q8u_mk*``) broadcast each activation quad straight
    from memory and flip its sign bits in a vector (no scalar load, xor and broadcast from a
    general register), and prefetch the weight panel ``PANEL_PREFETCH_ROWS`` quad rows
    ahead, both lines of a row. The copy for u8 activations (``flip`` 0) has no xor: 12
    ``vpxord`` per 24 ``vpdpbusd`` share their ports (h145)."""
    unit = dialect.HELPERS["q8_gemm"]().replace("static void og_q8_gemm(", "void og_q8_gemm(")
    asm = compile_to_asm(
        [dialect.PRELUDE, unit], "avx512", tmp_path, "q8_gemm", (*CFLAGS, VNNI, *tuning)
    )
    loops = [b for b in innermost_loops(asm) if sum("vpdpbusd" in x for x in b) == 24]
    assert loops, "no 12-row vpdpbusd loop found"
    xors = set()
    for body in loops:
        broadcasts = [x for x in body if x.startswith("vpbroadcastd")]
        assert len(broadcasts) == 12 and all("(" in x for x in broadcasts), broadcasts
        xors.add(sum(x.startswith("vpxord") for x in body))
        fetched = sorted(x.split()[1] for x in body if x.startswith("prefetcht0"))
        assert len(fetched) == 2 and fetched[1] == "64" + fetched[0], body
    assert xors == {0, 12}, xors  # flip 0, then any flip
