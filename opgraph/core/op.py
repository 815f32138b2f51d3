"""The Op base class: typed attributes, a type rule, and the call that builds a node.

An op is a frozen, slotted dataclass (declare it with :func:`opclass`) whose fields are its
attributes. ``op(*inputs)`` builds a :class:`~opgraph.core.node.Node` and runs the type rule at
once, so an ill-typed node can never exist. Per-op behaviour outside the op (kernels, lowerings,
converters) lives in registries keyed by the op class.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, dataclass_transform

from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.node import Node, Output
from opgraph.core.provenance import user_frame
from opgraph.core.registry import Registry
from opgraph.core.tensor_type import TupleType, ValueType

#: Every op class, by its registry name (the class name). Used by the serializer and coverage.
OP_REGISTRY: Registry[str, type[Op]] = Registry("op class")

OpT = TypeVar("OpT", bound=type)


class Op:
    """Base class of every op. Subclasses are declared with :func:`opclass`.

    Class properties:
        num_inputs: the exact number of inputs, or None for variadic ops.
        multi_output: calling the op returns a tuple of Outputs (else one Output).
        commutative: the two inputs may be swapped (used by patterns and CSE).
        accepts_tuples: inputs may be tuple-typed values.
        differentiable: False marks an op through which no gradient flows (integer outputs,
            index computations…); asking for one raises ``NotDifferentiableError``.
        version: the op's version, recorded by the serializer.
        lowered_by: the pass that removes this op before any backend runs (tuples, calls);
            such ops need no kernel.
        foldable: False for ops whose result is not a function of their inputs alone
            (collectives talk to other processes); they are never evaluated at compile time.
        contracting: each output element reads many input elements (products, windows,
            recurrences): constant folding bounds its work as outputs x inputs.
    """

    __slots__ = ()
    num_inputs: ClassVar[int | None] = None
    multi_output: ClassVar[bool] = False
    commutative: ClassVar[bool] = False
    accepts_tuples: ClassVar[bool] = False
    differentiable: ClassVar[bool] = True
    version: ClassVar[int] = 1
    lowered_by: ClassVar[str | None] = None
    foldable: ClassVar[bool] = True
    contracting: ClassVar[bool] = False

    @property
    def name(self) -> str:
        return type(self).__name__

    # ------------------------------------------------------------------ hooks for subclasses
    def canonicalize(self, *inputs: Any) -> Op:
        """Return the op with attributes in canonical form for these inputs (negative axes
        made non-negative, defaults that depend on rank filled in). Default: unchanged."""
        return self

    def check_values(self, *inputs: Any) -> None:
        """Checks that need the input values, not just their types (e.g. an integer divisor
        that is a constant zero). Raise ``OpTypeError``; the default checks nothing."""

    def infer(self, *inputs: Any) -> ValueType | tuple[ValueType, ...]:
        """The type rule: output type(s) for these input types, or raise ``OpTypeError``.

        The default, for ops that define :meth:`decompose`, builds the decomposition on
        placeholder parameters and takes its output types: the decomposition is the type rule.
        """
        if not self.has_decomposition():
            raise NotImplementedError(f"{self.name} defines neither infer() nor decompose()")
        # A real cycle inside core: literals defines Parameter as an Op.
        from opgraph.core.literals import Parameter

        placeholders = [Parameter(t.element_type, t.shape)() for t in inputs]
        result = self.decompose(*placeholders)
        if result is None:
            raise NotImplementedError(f"{self.name}: decompose() gave None; define infer()")
        if isinstance(result, Output):
            return result.type
        return tuple(o.type for o in result)

    def bound_symbols(self) -> tuple[Any, ...]:
        """The data-dependent symbols (``core.dim.Symbol``) a node of this op binds when it
        runs: output sizes only the input values decide (``non_zero``'s count). Each is a
        fresh symbol (``core.dim.fresh_dim``) held in an attribute. Default: none."""
        return ()

    def decompose(self, *inputs: Any) -> Output | tuple[Output, ...] | None:
        """Build this op from core ops (framework-level ops). Not every op has one.

        Subclasses name their inputs (``decompose(self, x, w)``), as :meth:`infer` does; the
        inputs are Outputs. An op whose type rule is :meth:`infer` may return None for inputs
        it cannot decompose (``matmul`` of two batched operands with a symbolic batch: one
        ``Dot`` per matrix needs the count); the ``decompose`` pass then keeps the op.
        """
        raise NotImplementedError(f"{self.name} has no decomposition")

    @classmethod
    def has_decomposition(cls) -> bool:
        return cls.decompose is not Op.decompose

    def vjp(
        self,
        inputs: tuple[Output, ...],
        outputs: tuple[Output, ...],
        cotangents: tuple[Output | None, ...],
    ) -> tuple[Output | None, ...]:
        """The adjoint: cotangents of the inputs, built from ordinary ops.

        Most ops define :meth:`adjoint` instead; override ``vjp`` only when cotangents of
        several outputs matter (``Split``, ``BatchNormTraining``).

        Args:
            inputs: the node's input values.
            outputs: the node's output values.
            cotangents: one per output; None where no gradient reaches that output (zero).

        Returns:
            One cotangent per input, each of that input's type, or None for zero / not
            differentiable (integer and boolean inputs always get None).
        """
        if type(self).adjoint is Op.adjoint:
            raise NotImplementedError(f"{self.name} has no vjp")
        ct = cotangents[0]
        if ct is None:
            return (None,) * len(inputs)
        return self.adjoint(inputs, outputs[0], ct)

    def adjoint(
        self, inputs: tuple[Output, ...], output: Output, ct: Output
    ) -> tuple[Output | None, ...]:
        """The adjoint of an op whose gradient flows from its first output only (the common
        case; the other outputs, if any, carry none, like ``TopK``'s indices): one cotangent
        per input (None for zero) given ``ct``, the cotangent of ``output``, never None.

        The default :meth:`vjp` calls it, after returning zeros when no gradient reaches
        ``output``.
        """
        raise NotImplementedError(f"{self.name} has no adjoint")

    @classmethod
    def has_vjp(cls) -> bool:
        """True when the class defines its own adjoint, ``vjp`` or ``adjoint`` (decomposable ops
        differentiate through their decomposition otherwise)."""
        return cls.vjp is not Op.vjp or cls.adjoint is not Op.adjoint

    # ------------------------------------------------------------------------- attributes
    def attributes(self) -> dict[str, Any]:
        """The op's attributes by name, in declaration order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def format_attributes(self) -> str:
        """The bracketed attribute text used by printing (``"perm=(1, 0)"``)."""
        return ", ".join(f"{k}={format_value(v)}" for k, v in self.attributes().items())

    def describe(self) -> str:
        attrs = self.format_attributes()
        return f"{self.name}[{attrs}]" if attrs else self.name

    # ---------------------------------------------------------------------------- building
    def build(self, *inputs: Any, name: str | None = None, provenance: str | None = None) -> Node:
        """Type-check ``inputs`` and build the node (attributes canonicalised first)."""
        where = provenance if provenance is not None else user_frame(2)
        try:
            values = self._check_inputs(inputs)
            self.check_values(*values)
            types = tuple(v.type for v in values)
            op = self.canonicalize(*types)
            result = op.infer(*types)
        except OpTypeError as error:
            raise _contextual(error, self, inputs, where) from None
        output_types = result if isinstance(result, tuple) else (result,)
        return Node(op, values, output_types, where, name)

    def __call__(self, *inputs: Any, name: str | None = None) -> Any:
        """Build the node; return its Output, or a tuple of Outputs for multi-output ops."""
        node = self.build(*inputs, name=name, provenance=user_frame(2))
        if self.multi_output:
            return node.outputs
        return node.outputs[0]

    def _check_inputs(self, inputs: tuple[Any, ...]) -> tuple[Output, ...]:
        expected = self.num_inputs
        if expected is not None and len(inputs) != expected:
            raise OpTypeError(f"expected {expected} input(s), got {len(inputs)}")
        for i, value in enumerate(inputs):
            if not isinstance(value, Output):
                hint = " (use og.constant(...) for literals)" if _is_literal(value) else ""
                raise OpTypeError(
                    f"input {i} must be an opgraph value (Output), got "
                    f"{type(value).__name__} {value!r:.60}{hint}"
                )
            if not self.accepts_tuples and isinstance(value.type, TupleType):
                raise OpTypeError(
                    f"input {i} is a tuple {value.type}; use get_tuple_element to take a tensor"
                )
        return inputs


def _is_literal(value: Any) -> bool:
    return isinstance(value, int | float | bool | list | tuple) or hasattr(value, "__array__")


def _contextual(error: OpTypeError, op: Op, inputs: tuple[Any, ...], where: str) -> OpTypeError:
    message = str(error)
    if getattr(error, "contextual", False):
        return error  # already carries an op name and a source line (nested decomposition)
    types = ", ".join(str(v.type) if isinstance(v, Output) else "?" for v in inputs)
    new = OpTypeError(f"{op.name}: {message}; inputs ({types}) (built at {where})")
    new.contextual = True  # type: ignore[attr-defined]
    new.detail = message  # type: ignore[attr-defined]
    return new


def format_value(value: Any) -> str:
    """Attribute values as printed: enums by lower-case name, element types by name."""
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, ElementType):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, float):
        return repr(value)
    describe = getattr(value, "describe_attribute", None)
    if describe is not None:
        return str(describe())
    return repr(value)


@dataclass_transform(frozen_default=True)
def opclass(cls: OpT) -> OpT:
    """Declare an op: make ``cls`` a frozen slotted dataclass and register it by name.

    Errors raised while constructing the op (bad attribute values found by ``__post_init__``)
    are re-raised as ``OpTypeError`` naming the op and the user's source line.
    """
    data_cls: Any = dataclasses.dataclass(frozen=True, slots=True)(cls)
    init: Callable[..., None] = data_cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except OpTypeError as error:
            if getattr(error, "contextual", False):
                raise
            new = OpTypeError(f"{data_cls.__name__}: {error} (built at {user_frame(2)})")
            new.contextual = True  # type: ignore[attr-defined]
            new.detail = str(error)  # type: ignore[attr-defined]
            raise new from None

    data_cls.__init__ = __init__
    OP_REGISTRY.add(data_cls.__name__, data_cls)
    return data_cls  # type: ignore[no-any-return]


def set_attr(op: Op, name: str, value: Any) -> None:
    """Assign a field while normalising it in ``__post_init__`` (ops are frozen otherwise)."""
    object.__setattr__(op, name, value)


def require(condition: bool, message: str) -> None:
    """Raise ``OpTypeError(message)`` when ``condition`` is false (type rules use this)."""
    if not condition:
        raise OpTypeError(message)
