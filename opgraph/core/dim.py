"""Symbolic dimensions: named symbols and the integer expressions built from them.

A dimension (:data:`Dim`) is a plain ``int`` or a :class:`DimExpr`. A ``DimExpr`` is kept in one
canonical form, a *sum of products*: integer coefficients times monomials, a monomial being a
sorted product of powers of *atoms*; an atom is a :class:`Symbol` (``batch``) or an operation
that polynomials cannot express (:class:`DimOp`: floor division, max, min), whose arguments are
canonical themselves. So equal expressions compare and hash equal (``2*(n+1) == n+n+2``), and an
expression whose value is a constant is always a plain ``int``: static shapes never hold a
``DimExpr``.

Comparisons (``<``, ``>=``…) are decided from the symbols' bounds (interval arithmetic) and raise
:class:`InconclusiveDimensionError` (an ``OpTypeError``) when they cannot be decided for every
value of the symbols; ``==`` is structural (equal canonical forms), never an error. A
``DimExpr`` refuses to be used as a Python int (``__index__``), so a type rule or kernel that
needs a concrete size fails with a message naming the dimension rather than computing garbage.

This is the design of JAX's shape polymorphism (``_DimExpr``), small and without sympy.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opgraph.core.errors import OpTypeError

__all__ = [
    "Dim",
    "DimExpr",
    "DimOp",
    "InconclusiveDimensionError",
    "Symbol",
    "ceil_div",
    "dim",
    "dim_max",
    "dim_min",
    "evaluate",
    "floor_div",
    "format_dim",
    "free_symbols",
    "fresh_dim",
    "is_symbolic",
    "bounds",
]


class InconclusiveDimensionError(OpTypeError):
    """A comparison or conversion of a symbolic dimension cannot be decided at build time."""


@dataclass(frozen=True, slots=True)
class Symbol:
    """A named dimension variable with inclusive bounds ``min <= value <= max`` (None: none)."""

    name: str
    min: int = 0
    max: int | None = None

    def sort_key(self) -> tuple[Any, ...]:
        return (0, self.name, self.min, -1 if self.max is None else self.max)

    def describe(self) -> str:
        return self.name


class DimOpKind(enum.Enum):
    FLOOR_DIV = "//"
    MAX = "max"
    MIN = "min"


@dataclass(frozen=True, slots=True)
class DimOp:
    """An atom polynomials cannot express: ``a // b`` (b > 0), ``max(a, b)``, ``min(a, b)``."""

    kind: DimOpKind
    args: tuple[Dim, ...]

    def sort_key(self) -> tuple[Any, ...]:
        return (1, self.kind.value, tuple(_dim_key(a) for a in self.args))

    def describe(self) -> str:
        if self.kind is DimOpKind.FLOOR_DIV:
            num, den = (_paren(a) for a in self.args)
            return f"{num}//{den}"
        return f"{self.kind.value}({','.join(format_dim(a) for a in self.args)})"


Atom = Symbol | DimOp
Monomial = tuple[tuple[Atom, int], ...]  # sorted (atom, power >= 1) pairs; () is the constant
Terms = tuple[tuple[Monomial, int], ...]  # sorted (monomial, non-zero coefficient) pairs


def _mono_key(m: Monomial) -> tuple[Any, ...]:
    return tuple((a.sort_key(), p) for a, p in m)


def _dim_key(d: Dim) -> tuple[Any, ...]:
    if isinstance(d, int):
        return (0, d, ())
    return (1, 0, tuple((_mono_key(m), c) for m, c in d.terms))


class DimExpr:
    """A symbolic dimension in canonical form; build one with :func:`dim` and arithmetic."""

    __slots__ = ("_hash", "terms")

    terms: Terms
    _hash: int

    def __init__(self, terms: Terms) -> None:
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "_hash", hash(terms))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("DimExpr is immutable")

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_terms(raw: Mapping[Monomial, int]) -> Dim:
        """The canonical Dim of a sum of ``coefficient * monomial``: an int when constant."""
        items = [(m, c) for m, c in raw.items() if c != 0]
        if not items or (len(items) == 1 and items[0][0] == ()):
            return items[0][1] if items else 0
        items.sort(key=lambda mc: _mono_key(mc[0]))
        return DimExpr(tuple(items))

    @staticmethod
    def atom(a: Atom) -> DimExpr:
        monomial: Monomial = ((a, 1),)
        return DimExpr(((monomial, 1),))

    # ------------------------------------------------------------------- arithmetic
    def __add__(self, other: Dim) -> Dim:
        return _add(self, _checked(other, "+"))

    __radd__ = __add__

    def __sub__(self, other: Dim) -> Dim:
        return _add(self, _scale(_checked(other, "-"), -1))

    def __rsub__(self, other: Dim) -> Dim:
        return _add(_checked(other, "-"), _scale(self, -1))

    def __neg__(self) -> Dim:
        return _scale(self, -1)

    def __mul__(self, other: Dim) -> Dim:
        return _mul(self, _checked(other, "*"))

    __rmul__ = __mul__

    def __floordiv__(self, other: Dim) -> Dim:
        return floor_div(self, _checked(other, "//"))

    def __rfloordiv__(self, other: Dim) -> Dim:
        return floor_div(_checked(other, "//"), self)

    def __mod__(self, other: Dim) -> Dim:
        other = _checked(other, "%")
        return self - other * floor_div(self, other)

    def __rmod__(self, other: Dim) -> Dim:
        other = _checked(other, "%")
        return other - self * floor_div(other, self)

    # ------------------------------------------------------------------- comparisons
    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, DimExpr) and self._hash == other._hash and self.terms == other.terms
        )

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: Dim) -> bool:
        return _decide(self - _checked(other, "<"), "<", self, other)

    def __le__(self, other: Dim) -> bool:
        return _decide(self - _checked(other, "<="), "<=", self, other)

    def __gt__(self, other: Dim) -> bool:
        return _decide(_checked(other, ">") - self, "<", other, self)

    def __ge__(self, other: Dim) -> bool:
        return _decide(_checked(other, ">=") - self, "<=", other, self)

    def __index__(self) -> int:
        raise InconclusiveDimensionError(
            f"symbolic dimension {self} used where a concrete integer is needed"
        )

    __int__ = __index__

    def __bool__(self) -> bool:
        lo, hi = bounds(self)
        if lo > 0 or hi < 0:
            return True
        if lo == hi == 0:  # pragma: no cover - a zero expression is the int 0
            return False
        raise InconclusiveDimensionError(f"cannot decide whether {self} is non-zero")

    def __str__(self) -> str:
        return format_dim(self)

    def __repr__(self) -> str:  # as types print it, so messages listing shapes read well
        return format_dim(self)

    def describe_attribute(self) -> str:
        """How op attributes print it (``Reshape[output_shape=(batch, 768)]``)."""
        return format_dim(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (DimExpr, (self.terms,))


Dim = int | DimExpr


def dim(name: str, min: int = 0, max: int | None = None) -> DimExpr:  # noqa: A002
    """A symbolic dimension named ``name``, optionally bounded: ``min <= value <= max``.

    Two ``dim`` calls with the same name and bounds are the same dimension, so shapes that
    share a name agree by construction. Example: ``og.parameter(og.f32, (og.dim("batch"),
    768))``; ``og.dim("seq", max=512)``.

    Raises:
        OpTypeError: the name is not an identifier, or the bounds are not ints with
            ``0 <= min <= max``.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise OpTypeError(f"a dimension name must be an identifier string, got {name!r}")
    for what, value in (("min", min), ("max", max)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise OpTypeError(f"dim {name!r}: {what} must be an int, got {value!r}")
    if min < 0 or (max is not None and max < min):
        raise OpTypeError(f"dim {name!r}: bounds must satisfy 0 <= min <= max, got {min}..{max}")
    return DimExpr.atom(Symbol(name, min, max))


_FRESH = itertools.count(1)


def fresh_dim(prefix: str, max: int | None = None) -> DimExpr:  # noqa: A002
    """A new *data-dependent* symbol ``_{prefix}{n}`` (``n`` from a process-wide counter),
    ``0 <= value <= max``: the size of an output that only the input values decide
    (``non_zero``'s count). The op that makes it stores it as an attribute and names it in
    ``Op.bound_symbols()``; the interpreter binds it when that node runs.
    """
    return dim(f"_{prefix}{next(_FRESH)}", 0, max)


# ------------------------------------------------------------------------- polynomial core
def _checked(value: Any, operator: str) -> Dim:
    if isinstance(value, DimExpr) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if hasattr(value, "__index__") and not isinstance(value, bool):
        return int(value)  # numpy integers
    raise OpTypeError(f"dimension arithmetic {operator} needs an int or a dim, got {value!r}")


def _terms(d: Dim) -> Terms:
    if isinstance(d, int):
        return (((), d),) if d else ()
    return d.terms


def _add(a: Dim, b: Dim) -> Dim:
    acc: dict[Monomial, int] = dict(_terms(a))
    for m, c in _terms(b):
        acc[m] = acc.get(m, 0) + c
    return DimExpr.from_terms(acc)


def _scale(a: Dim, k: int) -> Dim:
    return DimExpr.from_terms({m: c * k for m, c in _terms(a)})


def _mono_mul(x: Monomial, y: Monomial) -> Monomial:
    powers: dict[Atom, int] = dict(x)
    for a, p in y:
        powers[a] = powers.get(a, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: ap[0].sort_key()))


def _mul(a: Dim, b: Dim) -> Dim:
    acc: dict[Monomial, int] = {}
    for ma, ca in _terms(a):
        for mb, cb in _terms(b):
            m = _mono_mul(ma, mb)
            acc[m] = acc.get(m, 0) + ca * cb
    return DimExpr.from_terms(acc)


def _divide_exactly(a: Dim, b: Dim) -> Dim | None:
    """``a / b`` when ``b`` is one term dividing every term of ``a`` exactly, else None."""
    tb = _terms(b)
    if len(tb) != 1:
        return None
    (mb, cb), powers_b = tb[0], dict(tb[0][0])
    acc: dict[Monomial, int] = {}
    for m, c in _terms(a):
        powers = dict(m)
        if c % cb or any(powers.get(x, 0) < p for x, p in powers_b.items()):
            return None
        rest = tuple((x, p - powers_b.get(x, 0)) for x, p in m if p - powers_b.get(x, 0) > 0)
        acc[rest] = acc.get(rest, 0) + c // cb
    del mb
    return DimExpr.from_terms(acc)


def floor_div(a: Dim, b: Dim) -> Dim:
    """``a // b`` for a positive divisor ``b``, simplified where exact (``(4n+6)//2 = 2n+3``)."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    if bounds(b)[1] <= 0:
        raise OpTypeError(f"the divisor {format_dim(b)} is never positive")
    exact = _divide_exactly(a, b)  # a symbolic divisor that is 0 at a binding fails there
    if exact is not None:
        return exact
    if isinstance(b, int):  # (q*b + r) // b = q + r // b for an integer polynomial q
        whole = {m: c - c % b for m, c in _terms(a)}
        rest = DimExpr.from_terms({m: c % b for m, c in _terms(a)})
        quotient = _divide_exactly(DimExpr.from_terms(whole), b)
        assert quotient is not None
        if isinstance(rest, int):
            return quotient + rest // b
        lo, hi = bounds(rest)
        if lo >= 0 and hi < b:
            return quotient
        return quotient + DimExpr.atom(DimOp(DimOpKind.FLOOR_DIV, (rest, b)))
    return DimExpr.atom(DimOp(DimOpKind.FLOOR_DIV, (a, b)))


def ceil_div(a: Dim, b: Dim) -> Dim:
    """``ceil(a / b)`` for a positive divisor: ``(a + b - 1) // b``."""
    return floor_div(a + b - 1, b)


def _extreme(kind: DimOpKind, a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b) if kind is DimOpKind.MAX else min(a, b)
    if a == b:
        return a
    lo, hi = bounds(_add(a, _scale(b, -1)))
    if lo >= 0:  # a >= b always
        return a if kind is DimOpKind.MAX else b
    if hi <= 0:
        return b if kind is DimOpKind.MAX else a
    args = tuple(sorted((a, b), key=_dim_key))
    return DimExpr.atom(DimOp(kind, args))


def dim_max(a: Dim, b: Dim) -> Dim:
    """``max(a, b)``, decided from the bounds where possible, else a ``max`` atom."""
    return _extreme(DimOpKind.MAX, a, b)


def dim_min(a: Dim, b: Dim) -> Dim:
    """``min(a, b)``, decided from the bounds where possible, else a ``min`` atom."""
    return _extreme(DimOpKind.MIN, a, b)


# ------------------------------------------------------------------------ bounds, decisions
Interval = tuple[float, float]  # inclusive; -inf / inf for unbounded (floats only there)


def _imul(x: Interval, y: Interval) -> Interval:
    products = [0 if p == 0 or q == 0 else p * q for p in x for q in y]
    return min(products), max(products)


def _atom_bounds(a: Atom) -> Interval:
    if isinstance(a, Symbol):
        return a.min, math.inf if a.max is None else a.max
    arg_bounds = [bounds(x) for x in a.args]
    if a.kind is DimOpKind.MAX:
        return max(b[0] for b in arg_bounds), max(b[1] for b in arg_bounds)
    if a.kind is DimOpKind.MIN:
        return min(b[0] for b in arg_bounds), min(b[1] for b in arg_bounds)
    (nlo, nhi), (dlo, dhi) = arg_bounds  # divisor >= 1
    corners = [n / d for n in (nlo, nhi) for d in (dlo, dhi) if math.isfinite(n) or d != math.inf]
    lo, hi = min(corners, default=-math.inf), max(corners, default=math.inf)
    if nlo >= 0:
        lo = max(lo, 0)
    return (math.floor(lo) if math.isfinite(lo) else lo), (
        math.floor(hi) if math.isfinite(hi) else hi
    )


def bounds(d: Dim) -> Interval:
    """Inclusive lower and upper bounds of ``d`` over every value of its symbols."""
    if isinstance(d, int):
        return d, d
    lo: float = 0
    hi: float = 0
    for m, c in d.terms:
        term: Interval = (c, c)
        for a, p in m:
            ab = _atom_bounds(a)
            for _ in range(p):
                term = _imul(term, ab)
        lo, hi = lo + term[0], hi + term[1]
    return lo, hi


def _decide(diff: Dim, relation: str, left: Dim, right: Dim) -> bool:
    """Whether ``left relation right`` holds for every value, given ``diff = left - right``."""
    lo, hi = bounds(diff)
    if relation == "<":
        if hi < 0:
            return True
        if lo >= 0:
            return False
    else:
        if hi <= 0:
            return True
        if lo > 0:
            return False
    raise InconclusiveDimensionError(
        f"cannot decide whether {format_dim(left)} {relation} {format_dim(right)} for every "
        "value of the symbols"
    )


# -------------------------------------------------------------------- inspection, evaluation
def is_symbolic(d: Any) -> bool:
    return isinstance(d, DimExpr)


def bare_symbol(d: Any) -> Symbol | None:
    """The symbol ``d`` is exactly (``batch``, not ``2*batch`` or ``batch+1``), else None."""
    if isinstance(d, DimExpr) and len(d.terms) == 1:
        monomial, coefficient = d.terms[0]
        if coefficient == 1 and len(monomial) == 1 and monomial[0][1] == 1:
            atom = monomial[0][0]
            return atom if isinstance(atom, Symbol) else None
    return None


def free_symbols(dims: Dim | Iterable[Dim]) -> frozenset[Symbol]:
    """The symbols ``dims`` (a dimension or an iterable of them) depend on."""
    items = (dims,) if isinstance(dims, int | DimExpr) else tuple(dims)
    found: set[Symbol] = set()
    for d in items:
        if isinstance(d, DimExpr):
            for m, _ in d.terms:
                for a, _ in m:
                    if isinstance(a, Symbol):
                        found.add(a)
                    else:
                        found |= free_symbols(a.args)
    return frozenset(found)


def evaluate(d: Dim, binding: Mapping[str, int]) -> Dim:
    """``d`` with the symbols named in ``binding`` replaced by their values (an int once every
    symbol is bound)."""
    if isinstance(d, int):
        return d
    total: Dim = 0
    for m, c in d.terms:
        term: Dim = c
        for a, p in m:
            value = _evaluate_atom(a, binding)
            for _ in range(p):
                term = term * value
        total = total + term
    return total


def _evaluate_atom(a: Atom, binding: Mapping[str, int]) -> Dim:
    if isinstance(a, Symbol):
        return binding[a.name] if a.name in binding else DimExpr.atom(a)
    args = [evaluate(x, binding) for x in a.args]
    if a.kind is DimOpKind.FLOOR_DIV:
        return floor_div(args[0], args[1])
    return _extreme(a.kind, args[0], args[1])


def _paren(d: Dim) -> str:
    text = format_dim(d)
    return f"({text})" if isinstance(d, DimExpr) and len(d.terms) > 1 else text


def _format_term(m: Monomial, c: int) -> str:
    factors = [a.describe() if p == 1 else f"{_atom_text(a)}^{p}" for a, p in m]
    if any(isinstance(a, DimOp) and a.kind is DimOpKind.FLOOR_DIV for a, _ in m) and (
        len(m) > 1 or c != 1
    ):
        factors = [f"({f})" if "//" in f else f for f in factors]
    body = "*".join(factors)
    if not m:
        return str(c)
    if c == 1:
        return body
    if c == -1:
        return "-" + body
    return f"{c}*{body}"


def _atom_text(a: Atom) -> str:
    text = a.describe()
    return f"({text})" if isinstance(a, DimOp) and a.kind is DimOpKind.FLOOR_DIV else text


def format_dim(d: Dim) -> str:
    """A dimension as printed in types: ``768``, ``batch``, ``2*seq+1``, ``(seq+1)//2``."""
    if isinstance(d, int):
        return str(d)
    ordered = sorted(d.terms, key=lambda mc: (not mc[0], -sum(p for _, p in mc[0])))
    text = ""
    for m, c in ordered:
        part = _format_term(m, c)
        text += part if not text or part.startswith("-") else "+" + part
    return text
