"""Symbolic dimensions in files (format version 2): the symbol table and expression trees.

A file that holds symbols lists them once, at the top level, as ``"symbols": [{"name":
"batch", "min": 0, "max": null}, ...]``; a symbolic dimension anywhere (a type's shape, an
attribute) is ``{"dim": expr}`` with

==========================  ==============================================================
expr                        meaning
==========================  ==============================================================
integer                     a constant (a coefficient, or a divisor)
``{"sym": i}``              symbol ``i`` of the table
``{"+": [e, e, ...]}``      a sum (two or more terms)
``{"*": [e, e, ...]}``      a product of integers, symbols, powers and operations (never of a
                            sum, so decoding never expands a product of sums)
``{"^": [atom, p]}``        a symbol or an operation to the power ``2 <= p <= 64``
``{"//": [a, b]}``          floor division; ``{"max": [a, b]}``, ``{"min": [a, b]}``
==========================  ==============================================================

The writer emits the canonical form of :mod:`opgraph.core.dim` (a sum of coefficient times
powers of atoms, in its sorted order). The reader rebuilds an expression with the same
arithmetic that made it, so the result is canonical, equal and hash-equal to what was saved;
every integer is at most 2**63 - 1 in magnitude and an expression is nested at most
``Limits.max_depth`` deep and holds at most :data:`MAX_EXPRESSION_NODES` entries. Nothing is
evaluated from text: the tree is walked, never parsed as an expression.
"""

from __future__ import annotations

from typing import Any

from opgraph.core.dim import Dim, DimExpr, DimOp, DimOpKind, Symbol, dim_max, dim_min, floor_div
from opgraph.core.errors import OpTypeError
from opgraph.serialize.values import ValueProblem

#: The largest magnitude of any integer in an expression or a bound (an i64).
MAX_INT = (1 << 63) - 1
#: The largest power of an atom in a term.
MAX_POWER = 64
#: The most entries (integers, symbols, operations) one expression may hold.
MAX_EXPRESSION_NODES = 4096

_OPS = {DimOpKind.FLOOR_DIV: "//", DimOpKind.MAX: "max", DimOpKind.MIN: "min"}
_COMBINE = {"//": floor_div, "max": dim_max, "min": dim_min}


# ------------------------------------------------------------------------------------ write
class SymbolWriter:
    """Collects the symbols a file uses, in first-use order, and encodes expressions."""

    def __init__(self) -> None:
        self._index: dict[Symbol, int] = {}

    @property
    def table(self) -> list[dict[str, Any]]:
        return [{"name": s.name, "min": s.min, "max": s.max} for s in self._index]

    def encode(self, d: Dim) -> Any:
        """An int as itself; a ``DimExpr`` as ``{"dim": expr}``."""
        if isinstance(d, int):
            return d
        return {"dim": self._expr(d)}

    def _expr(self, d: Dim) -> Any:
        if isinstance(d, int):
            return d
        terms = [self._term(m, c) for m, c in d.terms]
        return terms[0] if len(terms) == 1 else {"+": terms}

    def _term(self, monomial: Any, coefficient: int) -> Any:
        factors: list[Any] = [] if coefficient == 1 and monomial else [coefficient]
        for atom, power in monomial:
            encoded = self._atom(atom)
            factors.append(encoded if power == 1 else {"^": [encoded, power]})
        return factors[0] if len(factors) == 1 else {"*": factors}

    def _atom(self, atom: Symbol | DimOp) -> Any:
        if isinstance(atom, Symbol):
            return {"sym": self._index.setdefault(atom, len(self._index))}
        return {_OPS[atom.kind]: [self._expr(a) for a in atom.args]}


# ------------------------------------------------------------------------------------- read
def read_symbols(raw: Any) -> tuple[Symbol, ...]:
    """The symbol table of a document (``raw`` is the ``symbols`` value, None when absent).

    Raises:
        ValueProblem: the table is not an array of ``{name, min, max}`` objects with an
            identifier name and ``0 <= min <= max <= 2**63 - 1`` (``max`` null: unbounded), or
            an entry repeats another.
    """
    if raw is None:
        return ()
    if type(raw) is not list:
        raise ValueProblem(f"must be an array of symbols, got {raw!r:.60}")
    symbols: dict[Symbol, int] = {}
    for i, entry in enumerate(raw):
        symbol = _read_symbol(entry, i)
        if symbol in symbols:
            raise ValueProblem(f"symbol {i} repeats symbol {symbols[symbol]} ({symbol.name})")
        symbols[symbol] = i
    return tuple(symbols)


def _read_symbol(entry: Any, i: int) -> Symbol:
    if type(entry) is not dict or entry.keys() != {"name", "min", "max"}:
        raise ValueProblem(f"symbol {i} must be an object {{name, min, max}}, got {entry!r:.60}")
    name, low, high = entry["name"], entry["min"], entry["max"]
    if type(name) is not str or not name.isidentifier():
        raise ValueProblem(f"symbol {i}: the name must be an identifier, got {name!r:.60}")
    if type(low) is not int or not 0 <= low <= MAX_INT:
        raise ValueProblem(f"symbol {i} ({name}): min must be an integer 0..2**63-1, got {low!r}")
    if high is not None and (type(high) is not int or not low <= high <= MAX_INT):
        raise ValueProblem(
            f"symbol {i} ({name}): max must be null or an integer {low}..2**63-1 (at least "
            f"min), got {high!r:.40}"
        )
    return Symbol(name, low, high)


class DimReader:
    """Decodes ``{"dim": expr}`` payloads against a file's symbol table."""

    def __init__(self, symbols: tuple[Symbol, ...], max_depth: int) -> None:
        self.symbols = symbols
        self.max_depth = max_depth
        self._budget = 0

    def decode(self, raw: Any) -> Dim:
        """A dimension in a shape: an int >= 0, or ``{"dim": expr}``."""
        if type(raw) is int:
            if raw < 0:
                raise ValueProblem(f"a dimension must be >= 0, got {raw}")
            return raw
        if type(raw) is dict and raw.keys() == {"dim"}:
            return self.expression(raw["dim"])
        raise ValueProblem(
            f'a dimension is a non-negative integer or {{"dim": expression}}, got {raw!r:.60}'
        )

    def expression(self, raw: Any) -> Dim:
        """The payload of a ``{"dim": ...}`` tag, rebuilt in canonical form."""
        self._budget = MAX_EXPRESSION_NODES
        try:
            value = self._expr(raw, 0, factor=False)
        except OpTypeError as error:  # e.g. a divisor that is never positive
            raise ValueProblem(f"invalid dimension expression: {error}") from None
        _check_magnitude(value)
        return value

    def _expr(self, raw: Any, depth: int, factor: bool) -> Dim:
        if depth > self.max_depth:
            raise ValueProblem(f"a dimension expression is nested deeper than {self.max_depth}")
        self._budget -= 1
        if self._budget < 0:
            raise ValueProblem(
                f"a dimension expression holds more than {MAX_EXPRESSION_NODES} entries"
            )
        if type(raw) is int:
            if abs(raw) > MAX_INT:
                raise ValueProblem(f"integer {raw!s:.40} in a dimension is beyond 2**63-1")
            return raw
        if type(raw) is not dict or len(raw) != 1:
            raise ValueProblem(
                f"a dimension expression is an integer or a one-key object, got {raw!r:.60}"
            )
        ((op, args),) = raw.items()
        if op == "sym":
            return self._symbol(args)
        if type(args) is not list:
            raise ValueProblem(f"the operands of {op!r:.20} must be an array, got {args!r:.60}")
        return self._operation(op, args, depth, factor)

    def _symbol(self, index: Any) -> Dim:
        if type(index) is not int or not 0 <= index < len(self.symbols):
            raise ValueProblem(
                f"unknown symbol {index!r:.40}: the file's symbol table has "
                f"{len(self.symbols)} entr{'y' if len(self.symbols) == 1 else 'ies'}"
            )
        return DimExpr.atom(self.symbols[index])

    def _operation(self, op: Any, args: list[Any], depth: int, factor: bool) -> Dim:
        if op == "+":
            if factor:
                raise ValueProblem("a sum inside a product: expand it (the canonical form does)")
            return sum((self._expr(a, depth + 1, False) for a in self._count(args, 2)), 0)
        if op == "*":
            result: Dim = 1
            for a in self._count(args, 2):
                result = result * self._factor(a, depth)
            return result
        if op == "^":
            base, power = self._count(args, 2, 2)
            if type(power) is not int or not 2 <= power <= MAX_POWER:
                raise ValueProblem(f"a power must be an integer 2..{MAX_POWER}, got {power!r:.40}")
            return _power(self._factor(base, depth), power)
        combine = _COMBINE.get(op) if isinstance(op, str) else None
        if combine is None:
            raise ValueProblem(
                f"unknown dimension operation {op!r:.20}; expected one of sym, +, *, ^, //, max, "
                "min"
            )
        left, right = (self._expr(a, depth + 1, False) for a in self._count(args, 2, 2))
        return combine(left, right)

    def _factor(self, raw: Any, depth: int) -> Dim:
        """A factor of a product or the base of a power: one term, so that no product of
        sums is ever expanded (its size would be exponential in the file's size)."""
        value = self._expr(raw, depth + 1, True)
        if isinstance(value, DimExpr) and len(value.terms) > 1:
            raise ValueProblem(
                f"a factor of a product is the sum {value}; the canonical form expands products"
            )
        return value

    @staticmethod
    def _count(args: list[Any], least: int, most: int | None = None) -> list[Any]:
        if len(args) < least or (most is not None and len(args) > most):
            wanted = f"{least}" if most == least else f"at least {least}"
            raise ValueProblem(f"an operation takes {wanted} operands, got {len(args)}")
        return args


def _check_magnitude(value: Dim) -> None:
    """Every coefficient of the rebuilt expression (and of its operations) fits an i64."""
    pending = [value]
    while pending:
        d = pending.pop()
        if isinstance(d, int):
            if abs(d) > MAX_INT:
                bits = d.bit_length()
                raise ValueProblem(f"a dimension coefficient is beyond 2**63-1 ({bits} bits)")
            continue
        for monomial, coefficient in d.terms:
            pending.append(coefficient)
            pending.extend(a for atom, _ in monomial if isinstance(atom, DimOp) for a in atom.args)


def _power(value: Dim, power: int) -> Dim:
    result: Dim = 1
    for _ in range(power):
        result = result * value
    return result
