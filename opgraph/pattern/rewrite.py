"""Rules and the rewrite driver (nGraph's GraphRewrite as data).

A rule is ``(pattern, callback)``. When the pattern matches a value, the callback is called with
the captures as keyword arguments (plus ``ctx=`` a :class:`MatchContext` when its signature has a
``ctx`` parameter) and returns a replacement Output, or None to decline. Callbacks build with the
ordinary builders, so every replacement is type-checked; a replacement must also have exactly
the matched value's type.

:func:`rewrite` sweeps the graph in topological order, rebuilding each node on its rewritten
inputs and trying the rules at its outputs in order; the first rule that returns a replacement
wins, and the rules are tried again at the replacement. Sweeps repeat until one changes nothing;
a loop guard names the rules still firing.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from opgraph.core.errors import OpgraphError
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.literals import Parameter
from opgraph.core.node import Node, Output
from opgraph.core.op import Op
from opgraph.pattern.pattern import Pattern, PatternError

__all__ = ["MatchContext", "Rule", "Rules", "rewrite"]

#: How often the rules are re-applied at one value within a sweep before moving on.
_LOCAL_LIMIT = 16

Callback = Callable[..., Output | None]


@dataclass(frozen=True)
class Rule:
    """One ``(pattern, callback)`` entry of a :class:`Rules` table.

    Attributes:
        pattern: the pattern; its root decides at which values the rule is tried.
        callback: called with the captures by name; returns a replacement Output or None.
        wants_ctx: the callback takes a ``ctx`` argument (a :class:`MatchContext`).
        site: ``file:line`` where the entry's pattern was written.
    """

    pattern: Pattern
    callback: Callback
    wants_ctx: bool
    site: str

    @property
    def name(self) -> str:
        return str(getattr(self.callback, "__name__", type(self.callback).__name__))

    @property
    def callback_site(self) -> str:
        code = getattr(self.callback, "__code__", None)
        if code is None:
            return "<unknown>"
        return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"

    def describe(self) -> str:
        """``"name (pattern at file:line, callback at file:line)"`` for messages."""
        return f"{self.name} (pattern at {self.site}, callback at {self.callback_site})"


@dataclass(frozen=True)
class MatchContext:
    """What a callback that asks for ``ctx`` receives.

    Attributes:
        root: the matched value (the Output the replacement stands for).
        captures: every capture by name.
        rule: the rule that matched.
    """

    root: Output
    captures: Mapping[str, Output]
    rule: Rule

    @property
    def node(self) -> Node:
        return self.root.node


class Rules:
    """An ordered table of rewrite rules: ``Rules([(pattern, callback), ...])``.

    Tables compose with ``+`` (the left table's rules are tried first). Each entry is checked
    when the table is built: the pattern must be a Pattern, the callback must accept every
    capture name of the pattern, and every required parameter must be a capture (or ``ctx``).

    Raises:
        PatternError: a malformed entry (the message names its position and source line).
    """

    def __init__(self, entries: Iterable[Any] = ()) -> None:
        # entries: (Pattern, callback) pairs or Rules, checked at run time (mypy would infer
        # a list of lambdas as ``function``, not a Callable)
        frame = sys._getframe(1)
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        rules: list[Rule] = []
        for i, entry in enumerate(entries):
            rules.append(entry if isinstance(entry, Rule) else _make_rule(entry, i, where))
        self.rules: tuple[Rule, ...] = tuple(rules)
        self._by_type: dict[type[Op], tuple[Rule, ...]] = {}

    def __add__(self, other: Rules) -> Rules:
        if not isinstance(other, Rules):
            return NotImplemented
        return Rules([*self.rules, *other.rules])

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"<Rules: {len(self.rules)} rules>"

    def candidates(self, op_type: type[Op]) -> tuple[Rule, ...]:
        """The rules whose root pattern can match a value made by an op of ``op_type``."""
        found = self._by_type.get(op_type)
        if found is None:
            found = tuple(
                r
                for r in self.rules
                if (classes := r.pattern.root_classes()) is None or issubclass(op_type, classes)
            )
            self._by_type[op_type] = found
        return found

    def apply(self, value: Output) -> tuple[Output, Rule] | None:
        """The first replacement any rule offers for ``value``, with the rule; or None."""
        for rule in self.candidates(type(value.op)):
            for bindings in rule.pattern.matches(value):
                replacement = _call(rule, value, bindings)
                if replacement is not None and replacement != value:
                    return replacement, rule
        return None


def _make_rule(entry: Any, index: int, where: str) -> Rule:
    if not isinstance(entry, tuple) or len(entry) != 2:
        raise PatternError(
            f"Rules (built at {where}): entry {index} must be a (pattern, callback) pair, "
            f"got {entry!r:.80}"
        )
    pattern, callback = entry
    if not isinstance(pattern, Pattern):
        raise PatternError(
            f"Rules (built at {where}): entry {index} pattern must be a Pattern, "
            f"got {type(pattern).__name__}"
        )
    if not callable(callback):
        raise PatternError(
            f"Rules: entry {index} (pattern at {pattern.site}) callback must be callable, "
            f"got {type(callback).__name__}"
        )
    wants_ctx = _check_signature(callback, pattern, f"Rules: entry {index} (at {pattern.site})")
    return Rule(pattern, callback, wants_ctx, pattern.site)


def _check_signature(callback: Callback, pattern: Pattern, where: str) -> bool:
    """Check the callback can receive the pattern's captures; return whether it wants ctx."""
    try:
        parameters = inspect.signature(callback).parameters
    except (TypeError, ValueError):
        return False  # a builtin without a signature: trust it
    kinds = inspect.Parameter
    accepts_any = any(p.kind is kinds.VAR_KEYWORD for p in parameters.values())
    named = {
        n
        for n, p in parameters.items()
        if p.kind in (kinds.POSITIONAL_OR_KEYWORD, kinds.KEYWORD_ONLY)
    }
    captures = pattern.names()
    missing = sorted(captures - named) if not accepts_any else []
    if missing:
        raise PatternError(
            f"{where}: callback {getattr(callback, '__qualname__', callback)!r} has no "
            f"parameter for capture(s) {', '.join(missing)}"
        )
    required = sorted(
        n
        for n, p in parameters.items()
        if p.default is kinds.empty
        and p.kind not in (kinds.VAR_KEYWORD, kinds.VAR_POSITIONAL)
        and n not in captures
        and n != "ctx"
    )
    if required:
        raise PatternError(
            f"{where}: callback parameter(s) {', '.join(required)} are not captures of the "
            f"pattern (captures: {', '.join(sorted(captures)) or 'none'})"
        )
    return "ctx" in named


def _call(rule: Rule, root: Output, bindings: Mapping[str, Output]) -> Output | None:
    kwargs: dict[str, Any] = dict(bindings)
    if rule.wants_ctx:
        kwargs["ctx"] = MatchContext(root, dict(bindings), rule)
    try:
        result = rule.callback(**kwargs)
    except OpgraphError as error:
        error.add_note(f"while applying rule {rule.describe()} at {root}")
        raise
    if result is None:
        return None
    if not isinstance(result, Output):
        raise PatternError(
            f"rule {rule.describe()} returned {type(result).__name__}; a callback returns an "
            "Output or None"
        )
    if result.type != root.type:
        raise PatternError(
            f"rule {rule.describe()} replaced {root.op.name} : {root.type} (built at "
            f"{root.node.provenance}) with {result.op.name} : {result.type}; a replacement "
            "must have the matched value's type"
        )
    return result


def rewrite(fn: Function, rules: Rules, max_iterations: int = 64) -> Function:
    """Apply ``rules`` to ``fn`` until no rule fires.

    Each sweep visits the nodes in topological order, rebuilds a node whose inputs were
    rewritten, and tries the rules at each of its outputs (Parameters are never rewritten: they
    are the Function's interface; outputs nobody reads are left alone). Unchanged nodes are
    shared with ``fn``, which is not modified.

    Args:
        fn: the Function to rewrite.
        rules: the rule table.
        max_iterations: the most sweeps before giving up.

    Returns:
        The rewritten Function (``fn`` itself when no rule fired).

    Raises:
        OpgraphError: still changing after ``max_iterations`` sweeps; the message names the
            rules that fired in the last sweep and where they were written.
        PatternError: a callback returned something other than an Output of the matched type.
    """
    if not isinstance(rules, Rules):
        raise PatternError(f"rewrite: rules must be a Rules table, got {type(rules).__name__}")
    if (
        isinstance(max_iterations, bool)
        or not isinstance(max_iterations, int)
        or max_iterations < 1
    ):
        raise PatternError(
            f"rewrite: max_iterations must be a positive int, got {max_iterations!r}"
        )
    fired: list[Rule] = []
    for _ in range(max_iterations):
        fired.clear()
        used = {value for node in fn.nodes for value in node.inputs} | set(fn.results)
        mapping = rebuild_nodes(fn.nodes, functools.partial(_rewrite_node, rules, used, fired))
        if not mapping:
            return fn
        fn = fn.with_outputs(mapping)
    names = "; ".join(dict.fromkeys(r.describe() for r in fired))
    raise OpgraphError(
        f"rewrite: {fn.name} has not reached a fixed point after {max_iterations} sweeps; "
        f"rules still firing: {names}"
    )


def _rewrite_node(
    rules: Rules, used: set[Output], fired: list[Rule], node: Node, inputs: tuple[Output, ...]
) -> list[Output] | None:
    if isinstance(node.op, Parameter):
        return None
    current = node
    if inputs != node.inputs:
        current = node.op.build(*inputs, name=node.name, provenance=node.provenance)
    outputs = list(current.outputs)
    for i, value in enumerate(outputs):
        if node.outputs[i] not in used:
            continue  # rewriting a value nobody reads would never settle
        for _ in range(_LOCAL_LIMIT):
            found = rules.apply(value)
            if found is None:
                break
            value, rule = found
            fired.append(rule)
        outputs[i] = value
    if current is node and outputs == list(node.outputs):
        return None
    return outputs
