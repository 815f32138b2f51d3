"""Binding a symbolic Function's dimensions from the shapes of one call's arguments.

A :class:`ShapeBinder` is made once per Executable (None for a static Function, so static
calls pay nothing). Each call binds every symbol from the argument shapes, checks that the
arguments agree and that each value is within its symbol's bounds, and gives the parameter and
result types for that binding; the call checks then run on those static types, before anything
is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from opgraph.core.dim import DimExpr, Symbol, bare_symbol, evaluate, free_symbols
from opgraph.core.errors import CallTypeError, GraphError
from opgraph.core.function import Function
from opgraph.core.shape import format_shape
from opgraph.core.tensor_type import TensorType

#: One binding: symbol name -> value.
Binding = dict[str, int]


class ShapeBinder:
    """Binds the symbols of ``parameter_types`` from argument shapes (see module doc)."""

    def __init__(
        self,
        parameter_types: Sequence[TensorType],
        result_types: Sequence[TensorType],
        fn_name: str,
        node_bound: Iterable[Symbol] = (),
    ) -> None:
        self.parameter_types = tuple(parameter_types)
        self.result_types = tuple(result_types)
        self.fn_name = fn_name
        self.symbols = _symbols(parameter_types, fn_name)
        #: Data-dependent symbols, bound when their node runs (not from the arguments).
        self.node_bound = frozenset(node_bound)
        clash = sorted(s.name for s in self.node_bound if s.name in self.symbols)
        if clash:
            raise GraphError(
                f"{fn_name}: symbol(s) {', '.join(clash)} are bound by a node at run time and "
                "also appear in parameter shapes; a data-dependent symbol is the node's own"
            )
        bare = {bare_symbol(d) for t in parameter_types for d in t.shape}
        hidden = sorted(s.name for s in self.symbols.values() if s not in bare)
        if hidden:
            raise GraphError(
                f"{fn_name}: symbol(s) {', '.join(hidden)} appear in parameter shapes only "
                "inside expressions; a call binds a symbol from a dimension that is the symbol "
                "itself"
            )
        unbound = (
            free_symbols(d for t in result_types for d in t.shape)
            - set(self.symbols.values())
            - self.node_bound
        )
        if unbound:
            names = ", ".join(sorted(s.name for s in unbound))
            raise GraphError(
                f"{fn_name}: result dimensions use {names}, which no parameter shape has; every "
                "symbol must be bound by the arguments"
            )

    @staticmethod
    def create(
        parameter_types: Sequence[TensorType],
        result_types: Sequence[TensorType],
        fn_name: str,
        node_bound: Iterable[Symbol] = (),
    ) -> ShapeBinder | None:
        """A binder, or None when every parameter and result type is static."""
        types = (*parameter_types, *result_types)
        if all(type(d) is int for t in types for d in t.shape):
            return None
        return ShapeBinder(parameter_types, result_types, fn_name, node_bound)

    @property
    def data_dependent(self) -> bool:
        """True when a result size is decided by a node's values (``types`` leaves it
        symbolic until that node has run)."""
        return bool(free_symbols(d for t in self.result_types for d in t.shape) & self.node_bound)

    def bind(self, shapes: Sequence[tuple[int, ...]], what: str = "argument") -> Binding:
        """The binding the argument ``shapes`` give.

        Raises:
            GraphError: a wrong count, rank or static dimension.
            CallTypeError: two arguments give one symbol different values, or a value is
                outside the symbol's bounds.
        """
        if len(shapes) != len(self.parameter_types):
            raise GraphError(
                f"{self.fn_name}: expected {len(self.parameter_types)} {what}(s), got {len(shapes)}"
            )
        binding: Binding = {}
        where: dict[str, tuple[int, int]] = {}
        deferred: list[tuple[int, int, DimExpr, int]] = []
        for i, (t, shape) in enumerate(zip(self.parameter_types, shapes, strict=True)):
            if len(shape) != len(t.shape):
                raise GraphError(
                    f"{self.fn_name}: {what} {i} has shape {list(shape)}, parameter {i} has "
                    f"{format_shape(t.shape)} (rank {len(t.shape)})"
                )
            for axis, (d, n) in enumerate(zip(t.shape, shape, strict=True)):
                symbol = bare_symbol(d)
                if symbol is None:
                    if type(d) is int and d != n:
                        raise GraphError(
                            f"{self.fn_name}: {what} {i} has shape {list(shape)}, parameter {i} "
                            f"has {format_shape(t.shape)}"
                        )
                    if isinstance(d, DimExpr):
                        deferred.append((i, axis, d, n))
                    continue
                self._bind_one(binding, where, symbol, n, i, axis, what)
        for i, axis, d, n in deferred:
            value = evaluate(d, binding)
            if value != n:
                raise CallTypeError(
                    f"{self.fn_name}: {what} {i} axis {axis} is {n}, but parameter {i}'s "
                    f"dimension {d} is {value} with {_describe(binding)}"
                )
        return binding

    def _bind_one(
        self,
        binding: Binding,
        where: dict[str, tuple[int, int]],
        symbol: Symbol,
        n: int,
        i: int,
        axis: int,
        what: str,
    ) -> None:
        seen = binding.setdefault(symbol.name, n)
        if seen != n:
            j, other_axis = where[symbol.name]
            raise CallTypeError(
                f"{self.fn_name}: symbol {symbol.name} is {seen} from {what} {j} axis "
                f"{other_axis} but {n} from {what} {i} axis {axis}"
            )
        where.setdefault(symbol.name, (i, axis))
        if n < symbol.min or (symbol.max is not None and n > symbol.max):
            bound = f"{symbol.min}..{'' if symbol.max is None else symbol.max}"
            raise CallTypeError(
                f"{self.fn_name}: symbol {symbol.name} is {n} from {what} {i} axis {axis}, "
                f"outside its bounds {bound}"
            )

    def types(self, binding: Binding) -> tuple[tuple[TensorType, ...], tuple[TensorType, ...]]:
        """Parameter and result types under ``binding`` (static)."""
        return (
            tuple(_static(t, binding) for t in self.parameter_types),
            tuple(_static(t, binding) for t in self.result_types),
        )


def node_symbols(fn: Function) -> dict[str, Symbol]:
    """The data-dependent symbols the nodes of ``fn`` bind when they run
    (``Op.bound_symbols``), by name.

    Raises:
        GraphError: two nodes claim one symbol name (one symbol is one node's output size).
    """
    found: dict[str, Symbol] = {}
    for node in fn.nodes:
        for symbol in node.op.bound_symbols():
            if symbol.name in found:
                raise GraphError(
                    f"{fn.name}: two nodes bind the data-dependent symbol {symbol.name}; "
                    "each node needs a fresh one (core.dim.fresh_dim)"
                )
            found[symbol.name] = symbol
    return found


def bind_node_result(
    binding: Binding, symbols: Sequence[Symbol], t: TensorType, shape: tuple[int, ...], what: str
) -> None:
    """Bind the data-dependent ``symbols`` from one node result's ``shape`` (its type ``t``).

    Raises:
        CallTypeError: a value outside its symbol's bounds, or one symbol bound twice to
            different values.
    """
    for axis, d in enumerate(t.shape):
        symbol = bare_symbol(d)
        if symbol is None or symbol not in symbols or axis >= len(shape):
            continue
        n = shape[axis]
        if n < symbol.min or (symbol.max is not None and n > symbol.max):
            raise CallTypeError(
                f"{what}: data-dependent symbol {symbol.name} is {n}, outside its bounds "
                f"{symbol.min}..{'' if symbol.max is None else symbol.max}"
            )
        seen = binding.setdefault(symbol.name, n)
        if seen != n:
            raise CallTypeError(f"{what}: symbol {symbol.name} is {seen} and {n}")


def _static(t: TensorType, binding: Binding) -> TensorType:
    if all(type(d) is int for d in t.shape):
        return t
    return TensorType(t.element_type, tuple(evaluate(d, binding) for d in t.shape))


def _symbols(types: Sequence[TensorType], fn_name: str) -> dict[str, Symbol]:
    found: dict[str, Symbol] = {}
    for t in types:
        for symbol in sorted(free_symbols(t.shape), key=lambda s: s.sort_key()):
            other = found.setdefault(symbol.name, symbol)
            if other != symbol:
                raise GraphError(
                    f"{fn_name}: two dimensions are named {symbol.name!r} with different "
                    f"bounds; one name is one dimension"
                )
    return found


def _describe(binding: Binding) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(binding.items())) or "no symbols bound"
