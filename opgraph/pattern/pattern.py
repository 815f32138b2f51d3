"""Patterns: small trees that match values (Outputs) of a graph and capture them by name.

A pattern is built from

* ``P(OpClass | (OpClass, ...), *inputs, name=, where=, output=)``: a node whose op is an
  instance of one of the classes, its inputs matched pairwise (no input patterns: any inputs).
  Commutative ops (``Op.commutative``) also try the two inputs swapped.
  ``P(...)[i]`` (or ``output=i``) matches output ``i`` of a multi-output node; the default is
  output 0.
* ``P.var(name, where=)``: any value. ``P.any(where=)``: any value, not captured.
* ``P.const(value=None, where=)``: a Constant (seen through Broadcasts, which is how operator
  sugar like ``x * 0.5`` spells a scalar); with ``value``: every element equals it.
* ``P.skip(OpClass | (OpClass, ...), inner)``: optionally step over one such node (a Convert, a
  Broadcast…) and match ``inner`` at its first input; ``inner`` is also tried in place.

Every ``where`` predicate receives the matched **Output** (``o.op``, ``o.type``, ``o.shape`` and
``o.node`` are all reachable from it) and returns a bool. Every named pattern captures its
Output; a name used twice must capture the same Output both times — that is how "the same value
feeds both inputs" is written.

Matching is a backtracking search over generators, so a choice made for one input (a commuted
order, a skipped node) is revisited when a later input fails.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from opgraph.core.errors import OpgraphError
from opgraph.core.literals import Constant
from opgraph.core.node import Output
from opgraph.core.op import Op
from opgraph.ops.movement import Broadcast

__all__ = ["P", "Pattern", "PatternError", "constant_value", "source_constant"]

#: A predicate on the matched value.
Where = Callable[[Output], bool]
#: Captures made so far: name -> Output.
Bindings = Mapping[str, Output]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class PatternError(OpgraphError, TypeError):
    """A pattern or a rule was built with bad arguments."""


def _site() -> str:
    """``file:line`` of the first frame outside this package (where a pattern was written)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(frame.f_code.co_filename) == _PACKAGE_DIR:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "<unknown>"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def _op_classes(ops: Any, where: str) -> tuple[type[Op], ...]:
    classes = ops if isinstance(ops, tuple) else (ops,)
    if not classes or not all(isinstance(c, type) and issubclass(c, Op) for c in classes):
        raise PatternError(
            f"{where}: expected an op class or a non-empty tuple of op classes, got {ops!r:.80}"
        )
    return classes


def _check_name(name: str | None, where: str) -> None:
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise PatternError(f"{where}: name must be a Python identifier, got {name!r}")
    if name == "ctx":
        raise PatternError(f"{where}: the name 'ctx' is reserved for the match context")


def _check_where(where: Any, what: str) -> None:
    if where is not None and not callable(where):
        raise PatternError(f"{what}: where must be a callable(output) -> bool, got {where!r:.60}")


class Pattern:
    """Base class of every pattern. Use :class:`P` and its static constructors to build them.

    Attributes:
        name: the capture name, or None.
        where: an extra predicate on the matched Output, or None.
        site: ``file:line`` where the pattern was written (for error messages).
    """

    __slots__ = ("name", "site", "where")

    def __init__(self, name: str | None, where: Where | None, kind: str) -> None:
        _check_name(name, kind)
        _check_where(where, kind)
        self.name = name
        self.where = where
        self.site = _site()

    # ----------------------------------------------------------------------------- public
    def match(self, value: Output) -> dict[str, Output] | None:
        """The captures of the first match of this pattern at ``value``, or None."""
        for bindings in self.matches(value):
            return dict(bindings)
        return None

    def matches(self, value: Output, bound: Bindings | None = None) -> Iterator[Bindings]:
        """Every way this pattern matches ``value`` (given earlier captures ``bound``)."""
        if not isinstance(value, Output):
            raise PatternError(f"patterns match Outputs, got {type(value).__name__}")
        yield from self._match(value, bound or {})

    def names(self) -> set[str]:
        """Every capture name in this pattern."""
        found = {self.name} if self.name else set()
        for child in self._children():
            found |= child.names()
        return found

    def root_classes(self) -> tuple[type[Op], ...] | None:
        """The op classes a value matched by this pattern can be made by, or None for any."""
        return None

    # ------------------------------------------------------------------------- internals
    def _children(self) -> tuple[Pattern, ...]:
        return ()

    def _match(self, value: Output, bound: Bindings) -> Iterator[Bindings]:
        if not self._admits(value) or (self.where is not None and not self.where(value)):
            return
        for inner in self._match_here(value, bound):
            yield from _bind(self.name, value, inner)

    def _admits(self, value: Output) -> bool:
        """The checks on ``value`` itself that come before ``where`` (op class, output)."""
        return True

    def _match_here(self, value: Output, bound: Bindings) -> Iterator[Bindings]:
        raise NotImplementedError

    def _label(self) -> str:
        return f" {self.name!r}" if self.name else ""


def _bind(name: str | None, value: Output, bound: Bindings) -> Iterator[Bindings]:
    if name is None:
        yield bound
    elif name not in bound:
        yield {**bound, name: value}
    elif bound[name] == value:
        yield bound


class P(Pattern):
    """A node pattern: ``P(OpClass | (OpClass, ...), *inputs, name=, where=, output=)``.

    Args:
        ops: the op class, or a tuple of op classes; a node matches when its op is an instance
            of one of them (family bases such as ``BinaryElementwise`` work).
        *inputs: one pattern per input, matched pairwise (the node must have exactly that many
            inputs); none at all means the inputs are not looked at.
        name: capture the matched Output under this name.
        where: ``where(output) -> bool``, checked after the op class and output index, before
            the inputs (so it may rely on the op's attributes and arity).
        output: which output of the node the matched value must be (default 0).

    Example:
        >>> relu = P(Max, P.var("x"), P.const(0))  # also matches maximum(0, x)
        >>> top_indices = P(TopK, P.var("x"))[1]
    """

    __slots__ = ("classes", "inputs", "output")

    def __init__(
        self,
        ops: type[Op] | tuple[type[Op], ...],
        *inputs: Pattern,
        name: str | None = None,
        where: Where | None = None,
        output: int = 0,
    ) -> None:
        super().__init__(name, where, "P")
        self.classes = _op_classes(ops, "P")
        for i, p in enumerate(inputs):
            if not isinstance(p, Pattern):
                raise PatternError(
                    f"P({self._class_names()}): input pattern {i} must be a Pattern (P.var, "
                    f"P.const, P(...)), got {type(p).__name__} {p!r:.60}"
                )
        if isinstance(output, bool) or not isinstance(output, int) or output < 0:
            raise PatternError(f"P: output must be a non-negative int, got {output!r}")
        self.inputs = inputs
        self.output = output

    def __getitem__(self, index: int) -> P:
        """This pattern matching output ``index`` of the node."""
        return P(self.classes, *self.inputs, name=self.name, where=self.where, output=index)

    def root_classes(self) -> tuple[type[Op], ...]:
        return self.classes

    def _children(self) -> tuple[Pattern, ...]:
        return self.inputs

    def _admits(self, value: Output) -> bool:
        return value.index == self.output and isinstance(value.node.op, self.classes)

    def _match_here(self, value: Output, bound: Bindings) -> Iterator[Bindings]:
        node = value.node
        if not self.inputs:
            yield bound
            return
        if len(node.inputs) != len(self.inputs):
            return
        yield from _match_inputs(self.inputs, node.inputs, bound)
        if type(node.op).commutative and len(node.inputs) == 2 and node.inputs[0] != node.inputs[1]:
            yield from _match_inputs(self.inputs, node.inputs[::-1], bound)

    def _class_names(self) -> str:
        names = [c.__name__ for c in self.classes]
        return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"

    def __repr__(self) -> str:
        args = [self._class_names(), *(repr(p) for p in self.inputs)]
        suffix = f"[{self.output}]" if self.output else ""
        return f"P({', '.join(args)}{self._label()}){suffix}"

    # ---------------------------------------------------------------- other pattern kinds
    @staticmethod
    def var(name: str, where: Where | None = None) -> Pattern:
        """Any value, captured as ``name`` (the same name twice must be the same value)."""
        if name is None:
            raise PatternError("P.var: a name is required (use P.any() for an unnamed value)")
        return _Var(name, where)

    @staticmethod
    def any(where: Where | None = None, name: str | None = None) -> Pattern:
        """Any value (accepted by ``where`` when given)."""
        return _Var(name, where)

    @staticmethod
    def const(
        value: float | bool | None = None,
        name: str | None = None,
        where: Where | None = None,
        broadcast: bool = True,
    ) -> Pattern:
        """A Constant; with ``value``, one whose elements all equal ``value``.

        With ``broadcast`` (default) a Broadcast of such a constant matches too (``x * 0.5``
        builds ``Broadcast(Constant 0.5)``); :func:`constant_value` reads it either way.
        """
        return _Const(value, name, where, broadcast)

    @staticmethod
    def skip(
        ops: type[Op] | tuple[type[Op], ...],
        inner: Pattern,
        where: Where | None = None,
        name: str | None = None,
    ) -> Pattern:
        """Optionally step over one node of class ``ops`` (accepted by ``where``) and match
        ``inner`` at its first input; ``inner`` is also tried at the value itself."""
        return _Skip(_op_classes(ops, "P.skip"), inner, where, name)


def _match_inputs(
    patterns: tuple[Pattern, ...], values: tuple[Output, ...], bound: Bindings
) -> Iterator[Bindings]:
    if not patterns:
        yield bound
        return
    for first in patterns[0]._match(values[0], bound):
        yield from _match_inputs(patterns[1:], values[1:], first)


class _Var(Pattern):
    __slots__ = ()

    def __init__(self, name: str | None, where: Where | None) -> None:
        super().__init__(name, where, "P.var" if name else "P.any")

    def _match_here(self, value: Output, bound: Bindings) -> Iterator[Bindings]:
        yield bound

    def __repr__(self) -> str:
        return f"P.var({self.name!r})" if self.name else "P.any()"


class _Const(Pattern):
    __slots__ = ("broadcast", "value")

    def __init__(
        self, value: float | bool | None, name: str | None, where: Where | None, broadcast: bool
    ) -> None:
        super().__init__(name, where, "P.const")
        if value is not None and not isinstance(value, int | float | bool | np.generic):
            raise PatternError(f"P.const: value must be a Python scalar, got {value!r:.60}")
        self.value = value
        self.broadcast = broadcast

    def root_classes(self) -> tuple[type[Op], ...]:
        return (Constant, Broadcast) if self.broadcast else (Constant,)

    def _admits(self, value: Output) -> bool:
        if not self.broadcast and not isinstance(value.op, Constant):
            return False
        source = source_constant(value)
        if source is None:
            return False
        if self.value is None:
            return True
        size = value.tensor_type.size  # symbolic: every element is the source's, if any
        nonempty = type(size) is not int or size > 0
        return nonempty and source.value.size > 0 and bool(np.all(source.value == self.value))

    def _match_here(self, value: Output, bound: Bindings) -> Iterator[Bindings]:
        yield bound

    def __repr__(self) -> str:
        shown = "" if self.value is None else repr(self.value)
        return f"P.const({shown}{self._label()})"


class _Skip(Pattern):
    __slots__ = ("classes", "inner", "skip_where")

    def __init__(
        self, classes: tuple[type[Op], ...], inner: Pattern, where: Where | None, name: str | None
    ) -> None:
        # ``where`` selects which nodes may be skipped; it is not a predicate on the match.
        super().__init__(name, None, "P.skip")
        _check_where(where, "P.skip")
        if not isinstance(inner, Pattern):
            raise PatternError(f"P.skip: inner must be a Pattern, got {type(inner).__name__}")
        self.classes = classes
        self.inner = inner
        self.skip_where = where

    def _children(self) -> tuple[Pattern, ...]:
        return (self.inner,)

    def root_classes(self) -> tuple[type[Op], ...] | None:
        inner = self.inner.root_classes()
        return None if inner is None else self.classes + inner

    def _match_here(self, value: Output, bound: Bindings) -> Iterator[Bindings]:
        node = value.node
        skippable = isinstance(node.op, self.classes) and node.inputs
        if skippable and (self.skip_where is None or self.skip_where(value)):
            yield from self.inner._match(node.inputs[0], bound)
        yield from self.inner._match(value, bound)

    def __repr__(self) -> str:
        names = ", ".join(c.__name__ for c in self.classes)
        return f"P.skip({names}, {self.inner!r})"


def source_constant(value: Output) -> Constant | None:
    """The Constant ``value`` is, or is a Broadcast (chain) of; else None."""
    op = value.op
    while isinstance(op, Broadcast):
        value = value.node.inputs[0]
        op = value.op
    return op if isinstance(op, Constant) else None


def constant_value(value: Output) -> np.ndarray | None:
    """The elements of ``value`` when it is a Constant or a Broadcast (chain) of one, else None.

    A broadcast is returned as a read-only zero-copy numpy view, so this is cheap even for a
    huge broadcast of a scalar.
    """
    op = value.op
    if isinstance(op, Constant):
        return op.value
    if isinstance(op, Broadcast):
        source = constant_value(value.node.inputs[0])
        if source is None or any(type(d) is not int for d in op.shape):
            return None  # a symbolic shape has no elements before a call binds it
        expanded = source.reshape(
            tuple(1 if axis in op.broadcast_axes else d for axis, d in enumerate(op.shape))
        )
        return np.broadcast_to(expanded, op.shape)
    return None
