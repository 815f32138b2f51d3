"""Tuples and calls (seed semantics). ``unbox_tuples`` and ``inline_calls`` remove them before
any backend sees the graph."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.shape import as_int
from opgraph.core.tensor_type import TupleType, ValueType

__all__ = [
    "Tuple",
    "tuple_",
    "GetTupleElement",
    "get_tuple_element",
    "Call",
    "call",
    "StopGradient",
    "stop_gradient",
]


if TYPE_CHECKING:
    from opgraph.core.function import Function


@opclass
class Tuple(Op):
    """A tuple value of its inputs (tensors or tuples)."""

    accepts_tuples = True
    lowered_by = "unbox_tuples"

    def infer(self, *values: ValueType) -> TupleType:
        return TupleType(tuple(values))


def tuple_(*values: Output) -> Output:
    """A tuple-typed value holding ``values``."""
    return Tuple()(*values)


@opclass
class GetTupleElement(Op):
    """Element ``index`` (a compile-time constant) of a tuple value."""

    index: int
    num_inputs = 1
    accepts_tuples = True
    lowered_by = "unbox_tuples"

    def __post_init__(self) -> None:
        set_attr(self, "index", as_int(self.index, "index"))

    def infer(self, t: ValueType) -> ValueType:
        require(isinstance(t, TupleType), f"input must be a tuple, got tensor {t}")
        assert isinstance(t, TupleType)
        require(
            0 <= self.index < len(t.elements), f"index {self.index} is out of range for tuple {t}"
        )
        return t.elements[self.index]


def get_tuple_element(t: Output, index: int) -> Output:
    """Element ``index`` of tuple value ``t``."""
    return GetTupleElement(index)(t)


@opclass
class Call(Op):
    """Apply a Function to arguments: a user-defined op. ``inline_calls`` expands it."""

    function: Function
    multi_output = True
    lowered_by = "inline_calls"

    def infer(self, *args: ValueType) -> tuple[ValueType, ...]:
        params = self.function.parameter_types
        if len(args) != len(params):
            raise OpTypeError(
                f"function {self.function.name} takes {len(params)} argument(s), got {len(args)}"
            )
        for i, (arg, param) in enumerate(zip(args, params, strict=True)):
            require(
                arg == param,
                f"argument {i} has type {arg}, function {self.function.name} expects {param}",
            )
        return self.function.result_types

    def __hash__(self) -> int:
        return id(self.function)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Call) and other.function is self.function


def call(fn: Function, *args: Any) -> tuple[Output, ...]:
    """Call ``fn`` on ``args``; returns one Output per result of ``fn``."""
    result: tuple[Output, ...] = Call(fn)(*args)
    return result


@opclass
class StopGradient(Op):
    """Identity in the forward direction; blocks gradients (its adjoint is zero)."""

    num_inputs = 1

    def infer(self, x: ValueType) -> ValueType:
        return x

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        return (None,)


def stop_gradient(x: Output) -> Output:
    """``x``, with no gradient flowing back through it."""
    return StopGradient()(x)
