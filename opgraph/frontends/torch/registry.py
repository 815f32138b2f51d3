"""ATen converters, keyed by the ``torch.ops.aten.<op>.<overload>`` objects themselves.

A converter takes a :class:`~opgraph.frontends.torch.context.NodeContext` and returns an
``Output``, a sequence of ``Output``s (multi-output overloads, in schema order; ``None`` for
an output nobody reads) or ``None`` (ops without a result, such as runtime assertions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opgraph.core.errors import RegistryError

if TYPE_CHECKING:
    from opgraph.frontends.torch.context import NodeContext

#: ``converter(ctx) -> Output | sequence of Outputs | None``.
Converter = Callable[["NodeContext"], Any]

_CONVERTERS: dict[Any, Converter] = {}


def aten_op(*targets: Any) -> Callable[[Converter], Converter]:
    """Register a converter for one or more ATen overloads (or other FX call targets).

    Example::

        @aten_op(torch.ops.aten.relu.default)
        def relu(ctx: NodeContext) -> Output:
            return ops.relu(ctx.tensor("self"))

    Raises:
        RegistryError: a target already has a converter.
    """

    def register(fn: Converter) -> Converter:
        for target in targets:
            if target in _CONVERTERS:
                raise RegistryError(
                    f"an ATen converter for {name_of(target)} is already registered"
                )
            _CONVERTERS[target] = fn
        return fn

    return register


def lookup(target: Any) -> Converter | None:
    """The converter registered for ``target``, or None."""
    try:
        return _CONVERTERS.get(target)
    except TypeError:  # an unhashable call target
        return None


def registered() -> list[str]:
    """Names of the overloads that have converters, sorted (for docs and coverage)."""
    return sorted(name_of(t) for t in _CONVERTERS)


def name_of(target: Any) -> str:
    """``aten.add.Tensor`` for an overload, ``operator.getitem`` for a Python function."""
    if hasattr(target, "_schema") or hasattr(target, "_overloadname"):
        return str(target)
    module = getattr(target, "__module__", None) or "builtins"
    module = "operator" if module == "_operator" else module
    return f"{module}.{getattr(target, '__name__', repr(target))}"
