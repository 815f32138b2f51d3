"""Assemble one C module per Function: its kernels and a single entry point.

``int og_run(void* const* T, char* A, og_callback cb, double* prof)`` runs every step in
order. ``T`` holds the constants, then the arguments, then the results; ``A`` is the arena.
Fallback steps call ``cb(step, T, A)`` (Python runs the reference kernel). A failing step
returns ``(step << 8) | (check + 1)``; a failing callback returns -1 (Python kept the error).
With profiling, ``prof[step]`` accumulates each step's seconds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opgraph.backends.cpu.codegen import (
    attention,
    attention_bf16,
    bf16,
    bf16_taps,
    bf16_winograd,
    bf16_winograd_rows,
    conv_backprop,
    conv_panels,
    dialect,
    erf_bf16,  # noqa: F401  (registers bf16 mode's fast erf: codegen/erf_bf16.py)
    int8,
    kernels,
    pointwise,
    runtime,
    selection,
    winograd_filters,
)
from opgraph.backends.cpu.codegen.blas import PROTOTYPES, GemmEmitter
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.depthwise import DirectConvEmitter
from opgraph.backends.cpu.codegen.dims import DIM_HELPERS, render_dim
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.scan import ScanEmitter
from opgraph.backends.cpu.codegen.symbolic_blas import SymbolicGemmEmitter
from opgraph.backends.cpu.codegen.symbolic_windows import (
    SymbolicConvEmitter,
    SymbolicPoolEmitter,
    SymbolicWinogradEmitter,
)
from opgraph.backends.cpu.codegen.windows import ConvEmitter, PoolEmitter
from opgraph.backends.cpu.codegen.winograd import WinogradEmitter
from opgraph.backends.cpu.config import CpuConfig
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.backends.fused.program import (
    BufferKind,
    ConvStep,
    FallbackStep,
    GemmStep,
    LoopStep,
    PoolStep,
    Program,
    ScanStep,
    Step,
    WinogradStep,
)

#: Results at least this large are written with non-temporal stores: the caller reads them
#: later (if at all), so caching them only evicts the inputs still being read.
STREAM_BYTES = 1 << 22


#: A module is split into at most this many translation units, compiled in parallel (a
#: progress bar advances once per unit). A unit holds at least ``UNIT_CHARS`` characters of
#: step code, and at least as much as the prelude every unit repeats: each unit costs the
#: compiler about 0.05 s of its own (measured with gcc 12: a 48-layer MLP module took 1.1 s of
#: CPU as one unit, 2.5 s as 16), so small modules stay one unit. The expensive generic
#: helpers (the panel GEMM and GEMV) are not compiled in modules at all but once, in the
#: library of :mod:`~opgraph.backends.cpu.codegen.kernels`, so no unit has to gather their
#: callers any more.
MAX_UNITS = 8
UNIT_CHARS = 12000


@dataclass(frozen=True)
class GeneratedModule:
    """The source and what the runtime needs to know about it.

    ``units`` are the translation units the C compiler builds (one, or several that are
    linked together); ``source`` is all of them, the text the cache key hashes.
    """

    units: tuple[str, ...]
    #: "blas", "mvec": what to link; "kernels" and "kernel:<helper>" per library unit it
    #: calls (:func:`~opgraph.backends.cpu.codegen.kernels.needs_of`): what to load first
    needs: frozenset[str]
    checks: tuple[tuple[Check, ...], ...]  # per step

    @property
    def source(self) -> str:
        """Every translation unit, one after the other (the first holds ``og_run``)."""
        if len(self.units) == 1:
            return self.units[0]
        return "".join(
            f"/* ==== translation unit {i + 1} of {len(self.units)} ==== */\n{unit}"
            for i, unit in enumerate(self.units)
        )


def table_slots(program: Program) -> dict[int, int]:
    """Index in ``T`` of every constant, argument and result buffer."""
    constants = [b for b in program.buffers if b.kind is BufferKind.CONST]
    slots = {b.id: b.index for b in constants}
    for b in program.buffers:
        if b.kind is BufferKind.ARG:
            slots[b.id] = len(constants) + b.index
        elif b.kind is BufferKind.RESULT:
            slots[b.id] = len(constants) + program.num_args + b.index
    return slots


@dataclass(frozen=True)
class SymbolSlots:
    """Where a symbolic module reads what a call decides, in ``T`` after the results: each
    symbol's value, then each arena buffer's byte offset (the binding's memory plan)."""

    symbols: dict[str, int]
    offsets: dict[int, int]

    @staticmethod
    def of(program: Program, symbols: list[str], arena: list[int]) -> SymbolSlots:
        first = len(table_slots(program))
        return SymbolSlots(
            {s: first + i for i, s in enumerate(symbols)},
            {b: first + len(symbols) + i for i, b in enumerate(arena)},
        )

    @property
    def size(self) -> int:
        """Entries of ``T`` these slots need beyond the buffers'."""
        return len(self.symbols) + len(self.offsets)


def generate(
    program: Program,
    plan: MemoryPlan,
    config: CpuConfig,
    name: str,
    profile: bool = False,
    symbolic: SymbolSlots | None = None,
) -> GeneratedModule:
    """The C source of ``program`` laid out by ``plan``; a symbolic program (``symbolic``
    given) reads its sizes and arena offsets from ``T`` instead (``plan`` then gives only the
    in-place pairs any binding may use)."""
    slots = table_slots(program)

    def base(buffer: int) -> str:
        if buffer in slots:
            return f"(char*)T[{slots[buffer]}]"
        if symbolic is not None:
            return f"(A + (long)T[{symbolic.offsets[buffer]}])"
        return f"(A + {plan.offsets.get(buffer, 0)}L)"

    module = ModuleContext(base, config.num_threads, config.parallel_threshold)
    module.panel_halves = config.panel_halves()  # as the lowering packed them (backend.py)
    module.vector_lanes = config.vector_lanes()
    module.panels_resident = _resident(program)
    if symbolic is not None:
        module.symbolic = True
        module.dim = functools.partial(render_dim, slots=symbolic.symbols)
    module.stream_bytes = STREAM_BYTES
    module.sizes = {b.id: b.nbytes for b in program.buffers if b.kind is BufferKind.RESULT}
    inplace = {b for pair in plan.inplace for b in pair}
    functions: list[str] = []
    calls: list[str] = []
    checks: list[tuple[Check, ...]] = []
    for i, step in enumerate(program.steps):
        text, call, step_checks = _step(step, i, module)
        if inplace & {v.buffer for v in step.writes()}:
            text = text.replace("* restrict ", "* ")
        functions.append(text)
        calls.append(_timed(call, i) if profile else call)
        checks.append(step_checks)
    target = (*config.target_flags(), *config.extra_cflags)
    units = _assemble(program, name, module, functions, calls, profile, target)
    needs = {"blas"} if module.uses_blas else set()
    needs |= {"mvec"} if any(n in dialect.VECTOR_MATH for n, _ in module.math) else set()
    needs |= kernels.needs_of(module.helpers)
    return GeneratedModule(units, frozenset(needs), tuple(checks))


def _resident(program: Program) -> bool:
    """Whether the module's buffers, each counted whole (intermediates without reuse), fit
    ``dialect.RESIDENT_BYTES`` (a symbolic size never does)."""
    sizes = [b.nbytes for b in program.buffers]
    return all(type(n) is int for n in sizes) and dialect.panels_resident(sum(map(int, sizes)))


def group_steps(functions: list[str], unit_chars: int = UNIT_CHARS) -> list[list[int]]:
    """The steps of each translation unit (indices into ``functions``, each list ascending).

    One unit when the module is small. Otherwise the steps are cut into consecutive runs of
    about equal source size, at most ``MAX_UNITS`` units in all, each of at least
    ``unit_chars`` characters.
    """
    sizes = [len(f) for f in functions]
    count = max(1, min(MAX_UNITS, len(sizes), sum(sizes) // max(1, unit_chars)))
    if count == 1:
        return [list(range(len(functions)))]
    groups: list[list[int]] = []
    total = sum(sizes)
    current: list[int] = []
    seen = 0
    for i, size in enumerate(sizes):
        current.append(i)
        seen += size
        if len(groups) < count - 1 and seen * count >= total * (len(groups) + 1):
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


Emitted = tuple[str, str, tuple[Check, ...]]  # (C functions, the entry's call, checks)


def _loop(step: LoopStep, i: int, module: ModuleContext) -> Emitted:
    texts: list[str] = []
    calls: list[str] = []
    checks: list[Check] = []
    for j, kernel in enumerate(step.kernels):
        emitter = CLoopEmitter(kernel, f"k{i}_{j}", module, step.label, checks)
        texts.append(emitter.emit())
        calls.append(f"if ((e = k{i}_{j}_run(T, A))) return OG_FAIL({i}, e);")
    return "\n\n".join(texts), "\n  ".join(calls), tuple(checks)


def _gemm(step: GemmStep, i: int, module: ModuleContext) -> Emitted:
    checks: list[Check] = []
    emitter = SymbolicGemmEmitter if module.symbolic else GemmEmitter
    text = emitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


def _conv(step: ConvStep, i: int, module: ModuleContext) -> Emitted:
    checks: list[Check] = []
    emitter = DirectConvEmitter if step.direct else ConvEmitter
    if module.symbolic:
        emitter = SymbolicConvEmitter  # never direct: those fall back (lowering/convolution.py)
    text = emitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


def _winograd(step: WinogradStep, i: int, module: ModuleContext) -> Emitted:
    checks: list[Check] = []
    emitter = SymbolicWinogradEmitter if module.symbolic else WinogradEmitter
    text = emitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


def _pool(step: PoolStep, i: int, module: ModuleContext) -> Emitted:
    emitter = SymbolicPoolEmitter if module.symbolic else PoolEmitter
    return emitter(step, f"w{i}", module).emit(), f"w{i}_run(T, A);", ()


def _scan(step: ScanStep, i: int, module: ModuleContext) -> Emitted:
    return ScanEmitter(step, f"s{i}", module).emit(), f"s{i}_run(T, A);", ()


def _fallback(step: FallbackStep, i: int, module: ModuleContext) -> Emitted:
    text = f"/* step {i} falls back to the reference kernel: {step.label.replace('*/', '')} */"
    return text, f"if (cb({i}, T, A)) return -1;", ()


#: The C generator of each kind of step.
STEP_EMITTERS: dict[type, Callable[[Any, int, ModuleContext], Emitted]] = {
    LoopStep: _loop,
    GemmStep: _gemm,
    ConvStep: _conv,
    WinogradStep: _winograd,
    PoolStep: _pool,
    ScanStep: _scan,
    FallbackStep: _fallback,
}
STEP_EMITTERS.update(bf16.EMITTERS)  # precision="bf16" (codegen/bf16.py)
STEP_EMITTERS.update(bf16_winograd.EMITTERS)  # its Winograd on pair panels
STEP_EMITTERS.update(bf16_winograd_rows.EMITTERS)  # and with the tiles as rows
STEP_EMITTERS.update(selection.EMITTERS)  # ArgMax/ArgMin, TopK, scatters (fused/indexed.py)
STEP_EMITTERS.update(conv_backprop.EMITTERS)  # a convolution's gradients
STEP_EMITTERS.update(int8.EMITTERS)  # integer products of quantized models (codegen/int8.py)
STEP_EMITTERS.update(attention.EMITTERS)  # fused attention (codegen/attention.py)
STEP_EMITTERS.update(attention_bf16.EMITTERS)  # its bf16 mode (codegen/attention_bf16.py)
STEP_EMITTERS.update(conv_panels.EMITTERS)  # few-pixel convolutions (codegen/conv_panels.py)
STEP_EMITTERS.update(pointwise.EMITTERS)  # 1x1 convolutions (codegen/pointwise.py)
STEP_EMITTERS.update(bf16_taps.EMITTERS)  # bf16 panel convolutions by taps (codegen/bf16_taps.py)
STEP_EMITTERS.update(winograd_filters.EMITTERS)  # large planes' filter gradients


def _step(step: Step, i: int, module: ModuleContext) -> Emitted:
    return STEP_EMITTERS[type(step)](step, i, module)


def _timed(call: str, i: int) -> str:
    return (
        "{ struct timespec t0_, t1_; clock_gettime(CLOCK_MONOTONIC, &t0_);\n    "
        + call
        + "\n    clock_gettime(CLOCK_MONOTONIC, &t1_);\n"
        + f"    prof[{i}] += (t1_.tv_sec - t0_.tv_sec) + 1e-9 * (t1_.tv_nsec - t0_.tv_nsec); }}"
    )


def _assemble(
    program: Program,
    name: str,
    module: ModuleContext,
    functions: list[str],
    calls: list[str],
    profile: bool,
    target: tuple[str, ...],
) -> tuple[str, ...]:
    head = [
        f"/* opgraph CPU module for function {name}: {len(program.steps)} step(s) */",
        dialect.PRELUDE,
    ]
    if module.uses_pool:
        head.append(runtime.DECLARATION)
    if profile:
        head.append("#include <time.h>")
    if module.uses_blas:
        head.append(PROTOTYPES)
    head.append(dialect.simd_declarations(module.math))
    if module.symbolic:
        head.append(DIM_HELPERS)
    head.append(dialect.HELPERS["bf16"]())
    helpers = list(module.helpers)
    own = [h for h in helpers if h not in kernels.LIBRARY_HELPERS]
    head.append("\n".join(dialect.C.helper_code(h) for h in own))
    head.append(kernels.declarations(helpers, target))
    head.append("typedef int (*og_callback)(int, void* const*, char*);")
    head.append("#define OG_FAIL(step, bits) (((step) << 8) | (__builtin_ctz(bits) + 1))")
    groups = group_steps(functions, max(UNIT_CHARS, sum(len(part) for part in head)))
    if len(groups) == 1:
        entry = _entry("int og_run", calls)
        return ("\n\n".join(part for part in [*head, *functions, entry] if part) + "\n",)
    return _units(head, functions, calls, groups)


def _units(
    head: list[str], functions: list[str], calls: list[str], groups: list[list[int]]
) -> tuple[str, ...]:
    """The translation units of a module whose steps are split into ``groups``.

    Each step ``i`` gets an entry ``og_step_i`` (hidden: not exported from the module) in its
    unit; the first unit also defines ``og_run``, which calls them in order and passes a
    failure code through.
    """
    hidden = '__attribute__((visibility("hidden"))) int'
    signature = "(void* const* T, char* A, og_callback cb, double* prof)"
    first = set(groups[0])
    run = [
        *[f"{hidden} og_step_{i}{signature};" for i in range(len(calls)) if i not in first],
        "int og_run" + signature + " {",
        "  int e = 0;",
        *[f"  if ((e = og_step_{i}(T, A, cb, prof))) return e;" for i in range(len(calls))],
        "  return 0;",
        "}",
    ]
    units = []
    for u, group in enumerate(groups):
        body = [*head, *[functions[i] for i in group]]
        body += [_entry(f"{hidden} og_step_{i}", [calls[i]]) for i in group]
        if u == 0:
            body.append("\n".join(run))
        units.append("\n\n".join(part for part in body if part) + "\n")
    return tuple(units)


def _entry(declaration: str, calls: list[str]) -> str:
    """A function ``declaration(T, A, cb, prof)`` that makes ``calls`` in order."""
    return "\n".join(
        [
            declaration + "(void* const* T, char* A, og_callback cb, double* prof) {",
            "  int e = 0; (void)e; (void)cb; (void)prof;",
            *[f"  {c}" for c in calls],
            "  return 0;",
            "}",
        ]
    )
