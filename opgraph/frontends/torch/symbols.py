"""torch's symbolic sizes (``SymInt``, sympy expressions) as opgraph dimensions.

A graph traced with dynamic shapes (``torch.compile(dynamic=True)``, dynamo's automatic
dynamic shapes, ``torch.export`` with ``Dim``) records sizes such as ``s0``, ``2*s0`` or
``s0*s1``: sympy expressions over the shape environment's symbols. :func:`to_dim` turns one
into an opgraph :data:`~opgraph.core.dim.Dim`: each symbol becomes ``og.dim(name, min, max)``
named by the ``Dim`` the user gave (``torch.export.Dim("batch")``) when the shape environment
records one, else by torch's own name (``s28``), and bounded by the range torch knows (the
program's ``range_constraints`` inside :func:`symbol_ranges`, else the shape environment's);
``+ * // %``, ``max``, ``min`` and ceiling division become the same opgraph operations.

Only *backed* sizes are dimensions: an unbacked ``SymInt`` (``u0``, from ``.item()``) is a
run-time number and stays a scalar value (:func:`is_size`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import guarding_hint_or_throw
from torch.utils._sympy import functions as sym_functions

from opgraph.core.dim import Dim, ceil_div, dim, dim_max, dim_min, floor_div
from opgraph.core.errors import ConversionError

#: Symbol ranges that override the shape environment's (an ExportedProgram's promises).
_RANGES: ContextVar[Mapping[Any, Any] | None] = ContextVar("opgraph_torch_ranges", default=None)


@contextlib.contextmanager
def symbol_ranges(ranges: Mapping[Any, Any] | None) -> Iterator[None]:
    """Within the block, symbols take their bounds from ``ranges`` (sympy symbol ->
    ``ValueRanges``, as ``ExportedProgram.range_constraints``) where it has them."""
    token = _RANGES.set(ranges)
    try:
        yield
    finally:
        _RANGES.reset(token)


def is_size(value: Any) -> bool:
    """True for a ``SymInt`` whose expression has only backed symbols (a traced size)."""
    if not isinstance(value, torch.SymInt):
        return False
    node = value.node
    shape_env = getattr(node, "shape_env", None)
    if shape_env is None:
        return False
    backed = getattr(shape_env, "backed_var_to_val", None)
    if backed is None:  # pragma: no cover - torch versions before the rename
        backed = shape_env.var_to_val
    return all(s in backed for s in node.expr.free_symbols)


def to_dim(value: int | torch.SymInt, where: str) -> Dim:
    """``value`` as an opgraph dimension (an int stays an int).

    Raises:
        ConversionError: an expression with an operation opgraph dimensions lack, naming it.
    """
    if isinstance(value, int):
        return int(value)
    if not isinstance(value, torch.SymInt):
        raise ConversionError(f"{where}: expected a size, got {type(value).__name__}")
    node = value.node
    if not is_size(value):
        raise ConversionError(
            f"{where}: {node.expr} is a run-time number (an unbacked size), not a dimension"
        )
    return _Translator(node.shape_env, where).convert(node.expr)


def dims_of(meta: torch.Tensor, where: str) -> tuple[Dim, ...]:
    """The shape of a FakeTensor as opgraph dimensions."""
    return tuple(to_dim(d, where) for d in meta.shape)


def example_shape(meta: Any) -> tuple[int, ...]:
    """The concrete shape a traced value had (its sizes' example values); () for a number."""
    if not isinstance(meta, torch.Tensor):
        return ()
    return tuple(
        int(d) if isinstance(d, int) else int(guarding_hint_or_throw(d)) for d in meta.shape
    )


class _Translator:
    def __init__(self, shape_env: Any, where: str) -> None:
        self.shape_env = shape_env
        self.where = where

    def convert(self, expr: Any) -> Dim:
        if isinstance(expr, sympy.Integer | int):
            return int(expr)
        if isinstance(expr, sympy.Symbol):
            return self.symbol(expr)
        rule = _RULES.get(type(expr))
        if rule is None:
            raise ConversionError(
                f"{self.where}: the size {expr} uses {type(expr).__name__}, which opgraph "
                "dimensions cannot express"
            )
        return rule([self.convert(a) for a in expr.args])

    def symbol(self, symbol: sympy.Symbol) -> Dim:
        lower, upper = self._bounds(symbol)
        return dim(self._name(symbol), lower, upper)

    def _bounds(self, symbol: sympy.Symbol) -> tuple[int, int | None]:
        ranges = _RANGES.get()
        found = (ranges or {}).get(symbol)
        if found is None:
            found = self.shape_env.var_to_range.get(symbol)
        if found is None:
            return 0, None
        lower = max(0, int(found.lower)) if _finite(found.lower) else 0
        upper = int(found.upper) if _finite(found.upper) else None
        return lower, upper

    def _name(self, symbol: sympy.Symbol) -> str:
        """The user's ``Dim`` name for ``symbol`` when torch recorded one, else its own."""
        debug = self.shape_env.source_name_to_debug_name
        for source in self.shape_env.var_to_sources.get(symbol, ()):
            name = debug.get(source.name)
            if isinstance(name, str) and name.isidentifier():
                return name
        return str(symbol)


def _finite(value: Any) -> bool:
    """True for a finite integer bound (not ``int_oo``, ``oo`` or their negatives)."""
    return isinstance(value, int | sympy.Integer) and not isinstance(value, bool)


def _sum(args: list[Dim]) -> Dim:
    total: Dim = 0
    for a in args:
        total = total + a
    return total


def _product(args: list[Dim]) -> Dim:
    total: Dim = 1
    for a in args:
        total = total * a
    return total


def _power(args: list[Dim]) -> Dim:
    base, exponent = args
    if not isinstance(exponent, int) or exponent < 0:
        raise ConversionError(f"size exponent {exponent} is not a non-negative integer")
    return _product([base] * exponent)


def _fold(combine: Callable[[Dim, Dim], Dim]) -> Callable[[list[Dim]], Dim]:
    def rule(args: list[Dim]) -> Dim:
        result = args[0]
        for a in args[1:]:
            result = combine(result, a)
        return result

    return rule


#: sympy / torch size function -> how its converted arguments combine.
_RULES: dict[type, Callable[[list[Dim]], Dim]] = {
    sympy.Add: _sum,
    sympy.Mul: _product,
    sympy.Pow: _power,
    sym_functions.PowByNatural: _power,
    sym_functions.FloorDiv: lambda a: floor_div(a[0], a[1]),
    sym_functions.CeilDiv: lambda a: ceil_div(a[0], a[1]),
    sym_functions.CleanDiv: lambda a: floor_div(a[0], a[1]),
    sym_functions.Mod: lambda a: a[0] % a[1],
    sym_functions.PythonMod: lambda a: a[0] % a[1],
    sym_functions.Max: _fold(dim_max),
    sym_functions.Min: _fold(dim_min),
}
