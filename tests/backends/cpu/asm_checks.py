"""Assembly checks shared by the CPU tests: a vector-math loop compiled with a module's flags
for one instruction set (``gcc -S``), the innermost loops of an assembly listing, and the
pattern of a stack access (a spilled register)."""

import re
import subprocess
from pathlib import Path

import pytest

import opgraph as og
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu import default_config
from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.compiler import CFLAGS

#: A memory operand addressed from the stack or frame pointer.
STACK = re.compile(r"\(%[re]?sp[,)]|\(%[re]?bp[,)]")
#: GCC 12's view of a Zen 4 (Zen 5 adds AVX-VNNI): a build ``dialect.BROADCAST_TARGETS`` takes.
ZEN4 = ("-mtune=znver3", "-mno-avxvnni")
#: Tunings (flags after ``-march``), each with whether ``dialect.BROADCAST_TARGETS`` takes it:
#: the kernels that read broadcast operands embedded there and from a register elsewhere.
by_broadcast_target = pytest.mark.parametrize(
    ("tuning", "embedded"),
    [
        (ZEN4, True),
        (("-mtune=znver3", "-mavxvnni"), False),  # a Zen 5 to GCC 12
        (("-mtune=generic",), False),
    ],
    ids=["zen4", "zen5", "generic"],
)


def compile_to_asm(
    lines: list[str], isa: str, tmp_path: Path, name: str, base: tuple[str, ...] = CFLAGS
) -> str:
    """``gcc -S`` of the C ``lines`` with the module flags ``base`` for ``isa`` (skips where
    there is no compiler; any CPU can compile for any ``isa``)."""
    compiler = default_config().compiler
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / f"{name}_{isa}.c"
    source.write_text("\n".join(lines))
    flags = [base[0], *cpu_config.ISA_FLAGS[isa], *base[1:], "-fopenmp-simd"]
    flags = [f for f in flags if f not in ("-shared", "-pipe")]
    asm = tmp_path / f"{name}_{isa}.s"
    done = subprocess.run(
        [compiler, *flags, "-S", str(source), "-o", str(asm)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return asm.read_text()


def simd_loop_asm(
    function: str, statement: str, isa: str, tmp_path: Path, base: tuple[str, ...] = CFLAGS
) -> str:
    """The assembly of an ``omp simd`` loop running ``statement`` (over ``x[i]`` into ``y[i]``)
    with the f32 vector ``function`` declared as generated modules declare it (skips where
    the CPU cannot run ``isa``)."""
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    lines = [
        dialect.PRELUDE,
        dialect.simd_declarations({(function, og.f32)}),
        "void entry(const float* restrict x, float* restrict y, long n) {",
        "  #pragma omp simd",
        f"  for (long i = 0; i < n; ++i) {statement}",
        "}",
    ]
    return compile_to_asm(lines, isa, tmp_path, function, base)


def innermost_loops(asm: str) -> list[list[str]]:
    """Bodies of the innermost loops: a label to the last backward jump to it, containing no
    other such loop."""
    lines = [line.strip() for line in asm.splitlines()]
    labels = {line[:-1]: i for i, line in enumerate(lines) if re.fullmatch(r"\.L\w+:", line)}
    loops = []
    for i, line in enumerate(lines):
        jump = re.fullmatch(r"j\w+\s+(\.L\w+)", line)
        if jump and jump.group(1) in labels and labels[jump.group(1)] < i:
            loops.append((labels[jump.group(1)], i))
    inner = [
        (a, b)
        for a, b in loops
        if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)
    ]
    return [lines[a : b + 1] for a, b in inner]
