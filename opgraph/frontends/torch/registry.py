"""ATen converters, keyed by the ``torch.ops.aten.<op>.<overload>`` objects themselves.

A converter takes a :class:`~opgraph.frontends.torch.context.NodeContext` and returns an
``Output``, a sequence of ``Output``s (multi-output overloads, in schema order; ``None`` for
an output nobody reads) or ``None`` (ops without a result, such as runtime assertions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opgraph.core.registry import VersionedRegistry

if TYPE_CHECKING:
    from opgraph.frontends.torch.context import NodeContext

#: ``converter(ctx) -> Output | sequence of Outputs | None``.
Converter = Callable[["NodeContext"], Any]


def name_of(target: Any) -> str:
    """``aten.add.Tensor`` for an overload, ``operator.getitem`` for a Python function."""
    if hasattr(target, "_schema") or hasattr(target, "_overloadname"):
        return str(target)
    module = getattr(target, "__module__", None) or "builtins"
    module = "operator" if module == "_operator" else module
    return f"{module}.{getattr(target, '__name__', repr(target))}"


#: ATen overloads do not change meaning between releases, so every entry is unversioned.
CONVERTERS: VersionedRegistry[Any, Converter] = VersionedRegistry("ATen converter", None, name_of)


def aten_op(*targets: Any) -> Callable[[Converter], Converter]:
    """Register a converter for one or more ATen overloads (or other FX call targets).

    Example::

        @aten_op(torch.ops.aten.relu.default)
        def relu(ctx: NodeContext) -> Output:
            return ops.relu(ctx.tensor("self"))

    Raises:
        RegistryError: a target already has a converter.
    """
    return CONVERTERS.register(*targets)


def lookup(target: Any) -> Converter | None:
    """The converter registered for ``target``, or None (also for an unhashable target)."""
    return CONVERTERS.lookup(target)


def registered() -> list[str]:
    """Names of the overloads that have converters, sorted (for docs and coverage)."""
    return sorted(name_of(t) for t in CONVERTERS)
