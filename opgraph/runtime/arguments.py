"""Binding ``exe(...)`` arguments to parameters: positionally, by parameter name, or from one
mapping (``exe({"input": x})``, as onnxruntime's ``run`` takes them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opgraph.core.errors import GraphError


def bind_arguments(
    names: Sequence[str | None],
    positional: Sequence[Any],
    named: Mapping[str, Any],
    fn_name: str,
) -> Sequence[Any]:
    """The arguments in parameter order.

    Args:
        names: each parameter's name (None for an unnamed parameter).
        positional: the positional arguments; a single mapping stands for named arguments.
        named: arguments by parameter name.
        fn_name: the Function's name, for messages.

    Raises:
        GraphError: an unknown, ambiguous, duplicate or missing name, or a mapping mixed with
            other arguments.
    """
    positional, named = _unpack_mapping(positional, named, fn_name)
    if not named:
        return positional
    if len(positional) > len(names):
        return positional  # the count check of the call reports it
    bound: list[Any] = list(positional) + [_MISSING] * (len(names) - len(positional))
    index = _name_index(names)
    for name, value in named.items():
        position = _position(name, index, names, fn_name)
        if position < len(positional):
            raise GraphError(
                f"{fn_name}: parameter {name!r} (#{position}) is given twice: positionally and "
                "by name"
            )
        bound[position] = value
    missing = [_label(names, i) for i, value in enumerate(bound) if value is _MISSING]
    if missing:
        raise GraphError(f"{fn_name}: missing argument(s) for parameter(s) {', '.join(missing)}")
    return bound


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _unpack_mapping(
    positional: Sequence[Any], named: Mapping[str, Any], fn_name: str
) -> tuple[Sequence[Any], Mapping[str, Any]]:
    mappings = [i for i, value in enumerate(positional) if isinstance(value, Mapping)]
    if not mappings:
        return positional, named
    if len(positional) != 1 or named:
        raise GraphError(
            f"{fn_name}: argument {mappings[0]} is a mapping; pass a mapping of arguments by "
            "name as the only argument (exe({'x': x})), or arrays positionally, or exe(x=...)"
        )
    mapping = positional[0]
    keys = [key for key in mapping if not isinstance(key, str)]
    if keys:
        raise GraphError(
            f"{fn_name}: the argument mapping's keys must be parameter names (str), got {keys[0]!r}"
        )
    return (), mapping


def _name_index(names: Sequence[str | None]) -> dict[str, list[int]]:
    index: dict[str, list[int]] = {}
    for position, name in enumerate(names):
        if name is not None:
            index.setdefault(name, []).append(position)
    return index


def _position(
    name: str, index: dict[str, list[int]], names: Sequence[str | None], fn_name: str
) -> int:
    positions = index.get(name)
    if positions is None:
        known = ", ".join(repr(n) for n in names if n is not None) or "none (pass positionally)"
        raise GraphError(f"{fn_name}: no parameter is named {name!r}; parameter names: {known}")
    if len(positions) > 1:
        raise GraphError(
            f"{fn_name}: parameters {', '.join(f'#{p}' for p in positions)} are all named "
            f"{name!r}; pass them positionally"
        )
    return positions[0]


def _label(names: Sequence[str | None], position: int) -> str:
    name = names[position]
    return f"{name!r} (#{position})" if name is not None else f"#{position} (unnamed)"
