"""``bench/gemm_tiles.py`` gives each panel kernel's GF/s as a share of its ISA's multiply-add
peak, measured by a register-only loop: for AVX2 twelve independent 256-bit multiply-adds per
iteration, for AVX-512 twelve 512-bit ones (no loads, no other vector instruction), and the
CPU it ran on, from ``/proc/cpuinfo``'s first processor."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from asm_checks import compile_to_asm, innermost_loops  # beside this file (rootdir import)

from bench.gemm_tiles import PEAK_CHAINS, build, instrumented, peak_isa, peak_source
from bench.machine import cpu_identity
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.config import supports_isa

FMA = re.compile(r"vfmadd231ps\s+%(\w+), %(\w+), %(\w+)")


@pytest.mark.parametrize(("isa", "register"), [("avx2", "ymm"), ("avx512", "zmm")])
def test_peak_loop_is_independent_multiply_adds_of_the_isa_width(
    isa: str, register: str, tmp_path: Path
) -> None:
    asm = compile_to_asm([peak_source(isa)], isa, tmp_path, "peak", base=("-O2",))
    loops = [loop for loop in innermost_loops(asm) if any("vfmadd" in line for line in loop)]
    assert len(loops) == 1
    fmas = [FMA.search(line) for line in loops[0] if "vfmadd" in line]
    assert len(fmas) == PEAK_CHAINS
    accumulators = {m.group(3) for m in fmas if m}
    assert len(accumulators) == PEAK_CHAINS  # independent chains
    operands = {m.group(1) for m in fmas if m} | {m.group(2) for m in fmas if m}
    assert not operands & accumulators
    assert all(r.startswith(register) for r in accumulators | operands)
    others = [line for line in loops[0] if re.match(r"v\w+\s", line) and "vfmadd" not in line]
    assert others == []


def test_cpu_identity_reads_the_first_processor() -> None:
    text = (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
        "model name\t: AMD EPYC 9005\nflags\t\t: fpu avx2\n\n"
        "processor\t: 1\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: other\n"
    )
    assert cpu_identity(text) == "AMD EPYC 9005 (family 26, model 2)"


def test_cpu_identity_without_cpuinfo() -> None:
    assert cpu_identity("") == "unknown CPU (family ?, model ?)"


def test_native_unit_is_measured_against_the_widest_peak_of_this_cpu() -> None:
    assert peak_isa("avx2") == "avx2" and peak_isa("avx512") == "avx512"
    assert peak_isa("native") == ("avx512" if supports_isa("avx512") else "avx2")


def test_first_tile_timing_wraps_every_micro_kernel_call() -> None:
    code = dialect.HELPERS["gemm_panels"]()
    timed = instrumented(code)
    assert timed.count("__builtin_ia32_rdtsc() - og_t0") == code.count("#define OG_MK(R)") > 0
    assert timed.count("og_t0 = __builtin_ia32_rdtsc()") == code.count("#define OG_MK(R)")


def test_first_tile_timing_counts_the_first_row_tiles_calls(tmp_path: Path) -> None:
    """24 x 64 times 64 x 64 in one column block: two row tiles of 12 over two panels, so half
    of the four micro-kernel calls are the first row tile's, and the product is right."""
    compiler = default_config().compiler
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    if not supports_isa("avx512"):
        pytest.skip("the row tiles of panel groups are the AVX-512 unit's; this CPU has no AVX-512")
    binary = build("native", tmp_path, compiler, first_tile=True)
    out = subprocess.run(
        [str(binary), "24", "64", "64", "1", "3", "0", "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    first, rest, share, _, _, err = (float(v) for v in out[:6])
    assert first > 0 and rest > 0
    assert share == 0.5
    assert err < 1e-4
