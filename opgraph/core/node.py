"""Nodes and Output handles: the immutable graph.

A :class:`Node` is an op applied to input values; it has a fixed tuple of output types computed
by the op's type rule when it was built. Values are :class:`Output` handles ``(node, index)``.
Inputs must already exist when a node is built, so graphs are acyclic by construction.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpgraphError, OpTypeError
from opgraph.core.registry import Registry
from opgraph.core.shape import DimShape, Shape, format_shape, is_static
from opgraph.core.tensor_type import TensorType, TupleType, ValueType

if TYPE_CHECKING:
    from opgraph.core.op import Op

_ids = itertools.count()


class Node:
    """One op applied to inputs. Immutable; compared and hashed by identity."""

    __slots__ = ("id", "inputs", "name", "op", "output_types", "outputs", "provenance")

    op: Op
    inputs: tuple[Output, ...]
    output_types: tuple[ValueType, ...]
    provenance: str
    name: str | None
    id: int
    outputs: tuple[Output, ...]

    def __init__(
        self,
        op: Op,
        inputs: tuple[Output, ...],
        output_types: tuple[ValueType, ...],
        provenance: str,
        name: str | None = None,
    ) -> None:
        setter = object.__setattr__
        setter(self, "op", op)
        setter(self, "inputs", inputs)
        setter(self, "output_types", output_types)
        setter(self, "provenance", provenance)
        setter(self, "name", name)
        setter(self, "id", next(_ids))
        setter(self, "outputs", tuple(Output(self, i) for i in range(len(output_types))))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Node is immutable (tried to set {key!r}); passes rebuild nodes")

    def __delattr__(self, key: str) -> None:
        raise AttributeError("Node is immutable")

    @property
    def op_name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        types = ", ".join(str(t) for t in self.output_types)
        label = f" {self.name!r}" if self.name else ""
        return f"<Node {self.op.describe()}{label} -> {types} at {self.provenance}>"


@dataclass(frozen=True, slots=True)
class Output:
    """A value: output ``index`` of ``node``. This is what builders take and return."""

    node: Node
    index: int

    @property
    def type(self) -> ValueType:
        return self.node.output_types[self.index]

    @property
    def tensor_type(self) -> TensorType:
        t = self.type
        if isinstance(t, TupleType):
            raise OpTypeError(f"value {self} is a tuple {t}, not a tensor")
        return t

    @property
    def element_type(self) -> ElementType:
        return self.tensor_type.element_type

    @property
    def shape(self) -> DimShape:
        """The shape: ints, or symbolic ``DimExpr`` dimensions (docs/design.md §10). Code that
        needs ints narrows with :meth:`static_shape` (or ``core.shape.static_dim``)."""
        return self.tensor_type.shape

    @property
    def dims(self) -> DimShape:
        """The same as :attr:`shape` (kept from when ``shape`` was annotated static)."""
        return self.tensor_type.shape

    def static_shape(self, needs: str, error: builtins.type[OpgraphError] = OpTypeError) -> Shape:
        """The shape as ints, for code that needs static sizes (``needs`` says what: numpy
        constants, Python loops over elements, attributes that must be static).

        Raises:
            OpTypeError: (or ``error``, as the layer's own, e.g. a bridge's
                ``ConversionError``) a dimension is symbolic; the message names this value,
                its shape and ``needs``.
        """
        shape = self.tensor_type.shape
        if is_static(shape):
            return tuple(shape)
        raise error(
            f"{needs} needs static sizes, but {self} has the symbolic shape "
            f"{format_shape(shape)}; specialise the Function to a binding first "
            "(og.passes.specialize_shapes)"
        )

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def op(self) -> Op:
        return self.node.op

    def __repr__(self) -> str:
        suffix = f"[{self.index}]" if len(self.node.outputs) > 1 else ""
        return f"<Output {self.node.op.name}{suffix} : {self.type}>"

    # Operator sugar follows the strict rules: equal types and shapes, no promotion. A Python
    # scalar becomes a Constant of the other operand's element type, explicitly broadcast. The
    # builders live in ``opgraph.ops``, above core: it fills ``OPERATORS`` when imported.
    def __add__(self, other: Any) -> Output:
        return OPERATORS["add"](self, other)

    def __radd__(self, other: Any) -> Output:
        return OPERATORS["add"](other, self)

    def __sub__(self, other: Any) -> Output:
        return OPERATORS["subtract"](self, other)

    def __rsub__(self, other: Any) -> Output:
        return OPERATORS["subtract"](other, self)

    def __mul__(self, other: Any) -> Output:
        return OPERATORS["multiply"](self, other)

    def __rmul__(self, other: Any) -> Output:
        return OPERATORS["multiply"](other, self)

    def __truediv__(self, other: Any) -> Output:
        return OPERATORS["divide"](self, other)

    def __rtruediv__(self, other: Any) -> Output:
        return OPERATORS["divide"](other, self)

    def __neg__(self) -> Output:
        return OPERATORS["negative"](self)

    # Comparisons are deliberately not overloaded: ``==`` keeps identity semantics so Outputs
    # work as dict keys.


#: The builders behind operator sugar, by name: ``"add"``, ``"subtract"``, ``"multiply"`` and
#: ``"divide"`` take two operands (one may be a Python scalar), ``"negative"`` one. Core cannot
#: import the ops (they are built on it), so ``opgraph.ops`` registers them when it is imported
#: (``opgraph.ops.operators``); a missing one raises ``RegistryError`` listing those present.
OPERATORS: Registry[str, Callable[..., Output]] = Registry("operator-sugar builder")
