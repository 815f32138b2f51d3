"""Dimensions in generated C: an ``int`` is a ``long`` literal (``768L``, exactly what static
modules have always had), a symbolic :class:`~opgraph.core.dim.DimExpr` a C expression over
the symbol values a call passes in the pointer table ``T`` (``docs/dynamic-shapes.md``,
"Backends").

Floor division is ``og_fdiv`` (rounds toward minus infinity, as Python's ``//``, also for a
negative numerator), ``max``/``min`` are ``og_dmax``/``og_dmin``; all three are defined in
every symbolic module (:data:`DIM_HELPERS`).
"""

from __future__ import annotations

from collections.abc import Mapping

from opgraph.core.dim import Dim, DimOp, DimOpKind, Symbol

#: The helpers the rendered expressions call (only symbolic modules include them).
DIM_HELPERS = """static inline long og_fdiv(long a, long b) {
  long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline long og_dmax(long a, long b) { return a > b ? a : b; }
static inline long og_dmin(long a, long b) { return a < b ? a : b; }"""

_FUNCTIONS = {DimOpKind.FLOOR_DIV: "og_fdiv", DimOpKind.MAX: "og_dmax", DimOpKind.MIN: "og_dmin"}


def render_dim(d: Dim, slots: Mapping[str, int]) -> str:
    """``d`` as a C ``long`` expression; symbol ``s`` reads ``T[slots[s]]``.

    Raises:
        KeyError: a symbol without a slot (a compiler bug: every symbol of a Program has one).
    """
    if isinstance(d, int):
        return f"{d}L"
    terms = [_term(monomial, coefficient, slots) for monomial, coefficient in d.terms]
    return "(" + " + ".join(terms) + ")"


def _term(
    monomial: tuple[tuple[Symbol | DimOp, int], ...], c: int, slots: Mapping[str, int]
) -> str:
    factors = [_atom(a, slots) for a, power in monomial for _ in range(power)]
    if not factors:
        return f"{c}L"
    if c != 1:
        factors.insert(0, f"{c}L")
    return "*".join(factors)


def _atom(a: Symbol | DimOp, slots: Mapping[str, int]) -> str:
    if isinstance(a, Symbol):
        return f"((long)T[{slots[a.name]}])"
    args = ", ".join(render_dim(x, slots) for x in a.args)
    return f"{_FUNCTIONS[a.kind]}({args})"
