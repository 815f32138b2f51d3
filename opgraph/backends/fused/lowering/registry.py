"""The fused compiler's lowering registries, keyed by op class (DESIGN.md §4).

* ``SCALAR_OPS``: the scalar semantics of an elementwise op, written once as an expression
  template over argument expressions. Templates use only the dialect-neutral
  :class:`ScalarContext` (math functions, literals, helpers, run-time checks), so every
  target renders them through its dialect (``fused/dialect.py``).
* ``VIEW_OPS``: movement ops as operand re-views (no copy).
* ``REDUCTIONS``: accumulate/identity rules of reductions, fused as row phases.
* ``STEP_OPS``: ops that lower to a whole native step (BLAS contractions, …).
* ``GATHERS``: indexing ops as indexed loads inside loop kernels (Gather, GatherElements,
  GatherND): the data read at positions computed from index values.
* ``REWRITES``: graph rewrites applied before fusion (expansions that fuse better).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from opgraph.core.element_type import ElementType
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.core.registry import Registry
from opgraph.core.shape import DimShape

if TYPE_CHECKING:
    from opgraph.backends.fused.program import IndexTerm
    from opgraph.backends.fused.views import Operand


class ScalarContext(Protocol):
    """What a scalar renderer may ask of the code generator."""

    @property
    def inputs(self) -> tuple[ElementType, ...]:
        """Element types of the op's inputs."""

    @property
    def output(self) -> ElementType:
        """Element type of the op's output."""

    def math(self, name: str, *args: str) -> str:
        """A libm call (``"exp"``, ``"pow"``…) in the precision of the output type."""

    def math_in(self, name: str, t: ElementType, *args: str) -> str:
        """A libm call in the precision of ``t``."""

    def literal(self, value: bool | int | float, t: ElementType | None = None) -> str:
        """An exact literal (default type: the output's)."""

    def constant(self, i: int) -> bool | int | float | None:
        """The value of argument ``i`` where it is a uniform constant known when the code is
        generated (a literal operand), else None."""

    def ctype(self, t: ElementType | None = None) -> str:
        """The compute type of ``t`` (default: the output's)."""

    def narrow(self, t: ElementType, expr: str) -> str:
        """``expr``, a ``double``, rounded once to the 16-bit float ``t`` (a compute value)."""

    def helper(self, name: str) -> None:
        """Require a helper function (``"div_i32"``, ``"f2i_u8"``…) in the module."""

    def check(self, condition: str, message: str) -> None:
        """Fail the run with ``message`` (an ExecutionError naming the node) when
        ``condition`` holds for some element."""


#: ``render(op, args, ctx) -> expression``: the op's value, in the compute type of its output.
ScalarRenderer = Callable[[Any, Sequence[str], ScalarContext], str]
SCALAR_OPS: Registry[type, ScalarRenderer] = Registry("scalar renderer")

#: ``rule(op, operand, copy) -> operand``; ``copy(operand)`` makes a dense copy, for what
#: strides cannot express.
ViewRule = Callable[[Any, "Operand", Callable[["Operand"], "Operand"]], "Operand"]
VIEW_OPS: Registry[type, ViewRule] = Registry("view rule")


@dataclass(frozen=True)
class ReductionRule:
    """How a reduction accumulates.

    Attributes:
        combine: C statement template updating ``{acc}`` with ``{x}``.
        omp: the OpenMP reduction operator that merges per-lane accumulators.
        identity: the identity for an element type, as a value (the dialect writes it).
        propagates_nan: NaN inputs make the result NaN (max/min track a flag).
        pairwise: on floating-point types, rounding depends on the order of accumulation
            (sums): the row is accumulated in blocks whose partial results are combined
            pairwise, so the error grows with the logarithm of the length, not the length.
    """

    combine: str
    omp: str
    identity: Callable[[ElementType], bool | int | float]
    propagates_nan: bool = False
    pairwise: bool = False


REDUCTIONS: Registry[type, ReductionRule] = Registry("reduction rule")


def reduction_axes(op: Op) -> tuple[int, ...]:
    """The reduced axes of a registered reduction op."""
    axes: tuple[int, ...] = op.axes  # type: ignore[attr-defined]
    return axes


#: ``rewrite(node, inputs) -> replacement outputs | None``: graph rewrites before fusion.
Rewrite = Callable[[Node, tuple[Output, ...]], Sequence[Output] | None]
REWRITES: Registry[type, Rewrite] = Registry("fusion rewrite")

#: Ops lowered to a whole native step: ``lowering(program_builder, node)`` adds the step.
STEP_OPS: Registry[type, Callable[..., Any]] = Registry("step lowering")
#: The ``STEP_OPS`` whose lowering (and every target's code for the steps it makes) handles
#: symbolic sizes; on a symbolic Function, the other step ops run their reference kernels.
SYMBOLIC_STEP_OPS: set[type] = set()

#: ``bridge(op, input_shape, output_shape, full_shape, axes, input_level) -> level | None``:
#: a movement op that, inside a row kernel, re-presents a row value at another shape without
#: moving data (a row value broadcast back along the reduced axes, a keep-dims reshape).
Bridge = Callable[[Any, DimShape, DimShape, DimShape, tuple[int, ...], int], int | None]
BRIDGES: Registry[type, Bridge] = Registry("bridge rule")


@dataclass(frozen=True)
class IndexedRead:
    """How a gather reads its data, over the gather's output shape (the kernel's domain).

    Attributes:
        table: the data as a view of the output's shape: each output element's position in
            the data, not counting the indexed axes (stride 0 along the axes the indices
            span).
        indices: one operand of the output's shape per indexed axis of the data (the
            index values, re-viewed: broadcast along the axes they do not span).
        terms: the indexed axes: each index operand's value, wrapped when negative and
            checked against the axis size, adds ``value * stride`` to the table position.
    """

    table: Operand
    indices: tuple[Operand, ...]
    terms: tuple[IndexTerm, ...]


#: ``rule(op, x, indices, output_shape) -> IndexedRead``: an indexing op as an indexed load
#: inside a loop kernel, ``x`` and ``indices`` being the operands of its two inputs.
GatherRule = Callable[[Any, "Operand", "Operand", DimShape], IndexedRead]
GATHERS: Registry[type, GatherRule] = Registry("gather rule")
