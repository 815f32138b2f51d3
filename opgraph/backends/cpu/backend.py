"""The CPU backend: lower, fuse, plan memory, generate C, compile once, run natively."""

from __future__ import annotations

import logging
import time
from collections import Counter

from opgraph.backends.cpu.codegen.bf16 import to_bf16, with_rounded_rows
from opgraph.backends.cpu.codegen.module import SymbolSlots, generate
from opgraph.backends.cpu.compiler import CompilerError, Toolchain
from opgraph.backends.cpu.config import (
    CpuConfig,
    check_precision,
    compiler_problem,
    default_config,
    l2_cache_bytes,
)
from opgraph.backends.cpu.executable import CpuExecutable
from opgraph.backends.cpu.rewrites import rewrite_for_cpu
from opgraph.backends.cpu.staged import StagedCpuExecutable, is_data_dependent
from opgraph.backends.cpu.symbolic import SymbolicCpuExecutable, arena_buffers, symbol_names
from opgraph.backends.fused.builder import TargetFeatures
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.backends.fused.pipeline import compile_program, compile_symbolic_program
from opgraph.backends.fused.program import KKind, LoopStep, Program
from opgraph.core.errors import UnsupportedOpError
from opgraph.core.function import Function
from opgraph.passes.specialize_shapes import is_symbolic
from opgraph.runtime.backend import Backend, Progress

log = logging.getLogger("opgraph.cpu")

_COMPUTING = (KKind.OP, KKind.REDUCE)


def unavailable_reason() -> str:
    """Why ``og.backend("CPU")`` cannot run here ("" when it can): no C compiler, or an
    ``OPGRAPH_CC`` that names none. Read from the environment once per process."""
    return compiler_problem()


class CpuBackend(Backend):
    """The optimized CPU backend (``og.backend("CPU")``).

    Args:
        config: compiler, cache directory, threads…; default: :func:`default_config`.
    """

    name = "CPU"

    def __init__(self, config: CpuConfig | None = None) -> None:
        self._from_environment = config is None
        self.config = config or default_config()
        self.toolchain = Toolchain(self.config)

    def compile(
        self,
        function: Function,
        profile: bool = False,
        *,
        progress: Progress | None = None,
        precision: str = "f32",
    ) -> CpuExecutable | SymbolicCpuExecutable | StagedCpuExecutable:
        """Compile ``function``.

        Args:
            function: the Function (not modified).
            profile: record per-step times (``performance_counters``).
            progress: called as ``progress(done, total)`` while the C compiler works: once
                with ``done=0``, then once per compiled batch of kernels (nothing when the
                module comes from the cache).
            precision: ``"f32"`` (default: every op in its own type), or ``"bf16"``: products
                by constant weights (Linear layers, convolutions) round both operands to bf16
                and accumulate in f32 (docs/cpu.md, "Reduced precision", gives the error
                bounds); needs a CPU with AVX512-BF16. The IR and every other op stay f32.

        Raises:
            UnsupportedOpError: an op has neither a CPU lowering nor a reference kernel.
            CompilerError: no C compiler (use INTERPRETER), or it failed.
            CpuConfigError: an unknown ``precision``, or one this CPU cannot run.
            UnsupportedOpError: ``precision="bf16"`` for a Function with symbolic sizes.
        """
        symbolic = is_symbolic(function)
        if symbolic and precision == "bf16":
            raise UnsupportedOpError(
                f"CPU precision='bf16' needs static shapes; {function.name} has symbolic "
                "dimensions: compile it with precision='f32', or specialise it first: "
                "og.passes.specialize_shapes(fn, {'batch': 8})"
            )
        check_precision(precision, self.config.isa)
        if is_data_dependent(function):  # stages around the data-dependent nodes
            return StagedCpuExecutable(
                function, lambda stage: self.compile(stage, profile, progress=progress), profile
            )
        if symbolic:
            return self._compile_symbolic(function, profile, progress)
        started = time.perf_counter()
        fused = compile_program(
            self._rewritten(function),
            self.name,
            self.config.optimize,
            self.config.num_threads,
            TargetFeatures(winograd_f4=False, padded_rows=False, patches=False)
            if precision == "bf16"
            else self._features(),
        )
        self._require_compiler()
        program, plan = fused.program, fused.plan
        if precision == "bf16":
            program, plan = with_rounded_rows(to_bf16(program), plan, self.config.num_threads)
        lowered_at = time.perf_counter()
        generated = generate(program, plan, self.config, function.name, profile)
        generated_at = time.perf_counter()
        compiled = self.toolchain.build(
            generated.source, generated.needs, units=generated.units, progress=progress
        )
        log.info(
            "compiled %s: %d nodes -> %d after lowering; %s; lower %.1f ms, codegen %.1f ms, "
            "native module %.1f ms (%s)",
            function.name,
            len(function.nodes),
            len(fused.lowered.nodes),
            describe_program(fused.program),
            (lowered_at - started) * 1e3,
            (generated_at - lowered_at) * 1e3,
            (time.perf_counter() - generated_at) * 1e3,
            "cache hit" if compiled.cache_hit else f"{len(generated.units)} C batch(es)",
        )
        return CpuExecutable(function, fused.lowered, program, plan, generated, compiled, profile)

    def _features(self) -> TargetFeatures:
        """The f32 lowering's target features: AVX2's half panels, whose 6-row tile reads
        rows 4 KiB apart without the padded copy (``lowering/row_padding.py``), and the
        vectors' lanes."""
        halves = self.config.panel_halves()
        return TargetFeatures(
            panel_halves=halves,
            padded_rows=not halves,
            vector_lanes=self.config.vector_lanes(),
            l2_bytes=l2_cache_bytes(),
        )

    def _rewritten(self, function: Function) -> Function:
        """``function`` with the CPU's own rewrites (``cpu/rewrites.py``) when optimizing."""
        return rewrite_for_cpu(function) if self.config.optimize else function

    def _compile_symbolic(
        self, function: Function, profile: bool, progress: Progress | None
    ) -> SymbolicCpuExecutable:
        """One native module for every binding of ``function``'s symbols
        (``cpu/symbolic.py``)."""
        started = time.perf_counter()
        symbolic = compile_symbolic_program(
            self._rewritten(function),
            self.name,
            self.config.optimize,
            self.config.num_threads,
            self._features(),
        )
        self._require_compiler()
        slots = SymbolSlots.of(symbolic.program, symbol_names(symbolic), arena_buffers(symbolic))
        template = MemoryPlan({}, {}, 0, symbolic.lifetimes.inplace)
        generated = generate(
            symbolic.program, template, self.config, function.name, profile, symbolic=slots
        )
        compiled = self.toolchain.build(
            generated.source, generated.needs, units=generated.units, progress=progress
        )
        log.info(
            "compiled symbolic %s: %s in %.1f ms (%s)",
            function.name,
            describe_program(symbolic.program),
            (time.perf_counter() - started) * 1e3,
            "cache hit" if compiled.cache_hit else f"{len(generated.units)} C batch(es)",
        )
        return SymbolicCpuExecutable(function, symbolic, slots, generated, compiled, profile)

    def _require_compiler(self) -> None:
        problem = compiler_problem() if self._from_environment else ""
        if problem:
            raise CompilerError(f"the CPU backend cannot compile: {problem}")
        self.toolchain.require_compiler()


def describe_program(program: Program) -> str:
    """Step and kernel counts of ``program``, for the log: "7 steps (3 fused loop kernels
    over 12 nodes, 2 Gemm, 1 Fallback)"."""
    kinds: Counter[str] = Counter()
    kernels = fused = 0
    for step in program.steps:
        if isinstance(step, LoopStep):
            kernels += len(step.kernels)
            fused += sum(1 for k in step.kernels for n in k.nodes if n.kind in _COMPUTING)
        else:
            kinds[type(step).__name__.removesuffix("Step")] += 1
    parts = [f"{kernels} fused loop kernel(s) over {fused} op(s)"] if kernels else []
    parts += [f"{count} {kind}" for kind, count in sorted(kinds.items())]
    return f"{len(program.steps)} step(s) ({', '.join(parts) or 'none'})"
