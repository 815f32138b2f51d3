"""The fused compiler's pipeline: a Function lowered, fused into a Program, its epilogues
folded in and its arena planned — what the CPU and GPU backends share before each renders the
Program for its target (``docs/design.md`` §3)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opgraph.backends.fused.builder import TargetFeatures, build_program
from opgraph.backends.fused.epilogues import fuse_epilogues
from opgraph.backends.fused.fusion import Kind, classify
from opgraph.backends.fused.lowering import (
    GATHERS,
    REDUCTIONS,
    REWRITES,
    SCALAR_OPS,
    STEP_OPS,
    VIEW_OPS,
)
from opgraph.backends.fused.memory import Lifetimes, MemoryPlan, lifetimes, plan_memory
from opgraph.backends.fused.program import Program
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.errors import UnsupportedOpError
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.passes.decompose import decompose
from opgraph.passes.expand_powers import POWER_RULES
from opgraph.passes.fold_quantized_chains import fold_quantized_chains
from opgraph.passes.fuse_core import GELU_RULES
from opgraph.passes.fuse_quantized_products import fuse_quantized_products
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.pipeline import optimize as optimize_function
from opgraph.passes.specialize_shapes import is_symbolic
from opgraph.passes.unbox_tuples import unbox_tuples
from opgraph.pattern import rewrite

#: Rewrites into what the fused compiler computes best: a GELU written out (erf or tanh form,
#: the cube as ``x**3`` too) becomes one ``Gelu``, which ``lowering/activation.py`` expands
#: again in the form that computes fastest (the tanh form as ``x / (1 + exp(-2u))``); a float
#: power by 2, 3 or 4 becomes products.
KERNEL_RULES = GELU_RULES + POWER_RULES

#: The lowering registries: an op class in one of them has code generated for it.
NATIVE_TABLES = (SCALAR_OPS, REDUCTIONS, VIEW_OPS, STEP_OPS, REWRITES, GATHERS)


def is_native_class(cls: type[Op]) -> bool:
    """Whether the fused compiler generates code for ops of class ``cls`` itself (else they
    are decomposed when they can be, and otherwise run their reference kernel)."""
    return any(cls in table for table in NATIVE_TABLES)


def is_native(op: Op) -> bool:
    """Whether the fused compiler generates code for ``op`` itself."""
    return is_native_class(type(op))


def lower(fn: Function, optimize: bool = True, features: TargetFeatures | None = None) -> Function:
    """Clone, inline calls, unbox tuples, turn products of dequantized 8-bit values into
    integer products (``fuse_quantized_products``: before folding dequantizes the weights),
    fold pointwise chains of one 8-bit value into table lookups (``fold_quantized_chains``;
    per-channel ones on planes of ``features.channel_table_plane`` elements or more),
    decompose what has no native lowering, apply the
    rewrites (``REWRITES``: expansions that fuse better), optimize, apply
    :data:`KERNEL_RULES`, rewrite again.

    Needs: a valid Function. Guarantees: no tuples or calls; every op is native, has a
    reference kernel, or is reported by :func:`compile_program` as unsupported.
    """
    fn = fuse_quantized_products(unbox_tuples(inline_calls(fn.clone())))
    plane = (features or TargetFeatures()).channel_table_plane
    fn = fold_quantized_chains(fn, plane)  # after the products took their dequantized operands
    fn = apply_rewrites(decompose(fn, is_supported=is_native, keep_symbolic=is_symbolic(fn)))
    if optimize:
        fn = apply_rewrites(rewrite(optimize_function(fn), KERNEL_RULES))
    return fn


def apply_rewrites(fn: Function) -> Function:
    """Apply the rewrites registered by op class until none fires."""

    def rewrite(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        rule = REWRITES.get(type(node.op))
        return None if rule is None else rule(node, inputs)

    for _ in range(8):
        mapping = rebuild_nodes(fn.nodes, rewrite)
        if not mapping:
            return fn
        fn = fn.with_outputs(mapping)
    return fn


@dataclass(frozen=True)
class FusedProgram:
    """What the shared pipeline hands a backend to render.

    Attributes:
        lowered: the Function after :func:`lower` (node labels and fallbacks refer to it).
        program: its steps over buffers, in the planned order.
        plan: where each arena buffer lives.
    """

    lowered: Function
    program: Program
    plan: MemoryPlan


def require_static(function: Function, backend: str) -> None:
    """Raise ``UnsupportedOpError`` when ``function`` has symbolic dimensions: the fused
    backends compile static shapes only (so far)."""
    require_sized(function, backend)
    if not is_symbolic(function):
        return
    types = ", ".join(str(t) for t in function.parameter_types)
    raise UnsupportedOpError(
        f"{backend} needs static shapes; {function.name} has symbolic dimensions ({types}). "
        "Run it on INTERPRETER, which binds symbols per call, or specialise it first: "
        "og.passes.specialize_shapes(fn, {'batch': 8})"
    )


def require_sized(function: Function, backend: str) -> None:
    """Raise ``UnsupportedOpError`` when a node of ``function`` decides an output size from
    its input values (a data-dependent symbol): the fused memory plan needs every size at the
    start of a call."""
    data = sorted({n.op.name for n in function.nodes if n.op.bound_symbols()})
    if data:
        raise UnsupportedOpError(
            f"{backend} cannot run {', '.join(data)} in {function.name}: its output size is "
            "decided by the input values at run time (a data-dependent symbol), and the "
            f"{backend} memory plan needs sizes known before the call. Run it on INTERPRETER"
        )


def compile_program(
    function: Function,
    backend: str,
    optimize: bool = True,
    threads: int = 1,
    features: TargetFeatures | None = None,
) -> FusedProgram:
    """Lower ``function``, fuse it into a Program, fold epilogues into their producers and
    plan the arena.

    Args:
        function: what to compile (not changed).
        backend: the backend's name, for the error message.
        optimize: run the default optimization pipeline.
        threads: how many threads steps may split their work between (per-thread scratch).
        features: the target-specific steps the lowering may choose (default: all, the
            CPU's); the GPU has neither column panels nor Winograd.

    Raises:
        UnsupportedOpError: an op has neither a lowering nor a reference kernel.
    """
    require_static(function, backend)
    lowered, program = _build(function, backend, optimize, threads, features)
    plan = plan_memory(program)
    return FusedProgram(lowered, program, plan)


@dataclass(frozen=True)
class SymbolicProgram:
    """What the shared pipeline hands a backend for a Function with symbolic sizes: as
    :class:`FusedProgram`, with the arena's lifetimes in place of a plan (each binding's plan
    is :func:`~opgraph.backends.fused.memory.place` of them, for that binding's sizes)."""

    lowered: Function
    program: Program
    lifetimes: Lifetimes


def compile_symbolic_program(
    function: Function,
    backend: str,
    optimize: bool = True,
    threads: int = 1,
    features: TargetFeatures | None = None,
) -> SymbolicProgram:
    """:func:`compile_program` for a Function with symbolic dimensions: sizes, strides and
    offsets of the Program are expressions of the symbols; step ops without a symbolic lowering
    (``SYMBOLIC_STEP_OPS``) run their reference kernels.

    Raises:
        UnsupportedOpError: a data-dependent node, or an op with neither a lowering nor a
            reference kernel.
    """
    require_sized(function, backend)
    lowered, program = _build(function, backend, optimize, threads, features)
    return SymbolicProgram(lowered, program, lifetimes(program))


def _build(
    function: Function,
    backend: str,
    optimize: bool,
    threads: int,
    features: TargetFeatures | None = None,
) -> tuple[Function, Program]:
    lowered = lower(function, optimize, features)
    missing = sorted(
        {
            n.op.name
            for n in lowered.ops
            if classify(n) is Kind.FALLBACK
            and type(n.op) not in KERNELS
            and not (is_symbolic(lowered) and n.op.has_decomposition())  # decomposed per call
        }
    )
    if missing:
        raise UnsupportedOpError(
            f"{backend} has no kernel for: {', '.join(missing)} (in {function.name})"
        )
    program = build_program(lowered, threads, features)
    fuse_epilogues(program)
    return lowered, program
