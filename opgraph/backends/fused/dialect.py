"""What a target's language must say for the fused compiler: the :class:`Dialect` protocol,
and :class:`CStyleDialect`, the base the C (``backends/cpu``) and CUDA (``backends/gpu``)
dialects share, as tinygrad's renderers share one C-style base.

Values are computed in a *compute type* (f16 and bf16 in ``float``, booleans as ``uint8_t``
0/1) and stored in a *storage type*. A 16-bit float result is rounded back to its type after
every op (round-to-nearest-even), which is what computing op by op in that type gives.

The helpers the lowerings and window kernels ask for by name (integer division, power,
modulo, float-to-integer conversion, pooling counts: :data:`COMMON_HELPERS`) are written once
here, against the dialect, so each target gets its own text of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar, Protocol

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType


class Dialect(Protocol):
    """How a target's C-like language spells types, values, math and run-time checks."""

    def storage_type(self, t: ElementType) -> str:
        """The type of one stored element."""

    def compute_type(self, t: ElementType) -> str:
        """The type values of ``t`` are computed in."""

    def load(self, t: ElementType, expr: str) -> str:
        """A stored element (``expr``) as a compute value."""

    def store(self, t: ElementType, expr: str) -> str:
        """A compute value as a stored element."""

    def round_to(self, t: ElementType, expr: str) -> str:
        """A compute value rounded to the precision of ``t`` (16-bit floats), else unchanged."""

    def narrow(self, t: ElementType, expr: str) -> str:
        """A ``double`` rounded once to the 16-bit float ``t``, as a compute value."""

    def math_call(self, name: str, t: ElementType, *args: str) -> str:
        """``name(args)`` in the precision of ``t`` (``expf`` for f32/f16/bf16, ``exp``
        for f64)."""

    def literal(self, value: bool | int | float, t: ElementType) -> str:
        """An exact literal of ``value`` in the compute type of ``t``."""

    def flag(self, condition: str, mask: int) -> str:
        """The statement that records a failed run-time check (``mask``: its bit)."""

    def helper_code(self, name: str) -> str:
        """The definition of the helper function ``name`` (``"div_i32"``, ``"f2i_u8"``…)."""


_STORAGE = {
    et.boolean: "uint8_t",
    et.f32: "float",
    et.f64: "double",
    et.i8: "int8_t",
    et.i16: "int16_t",
    et.i32: "int32_t",
    et.i64: "int64_t",
    et.u8: "uint8_t",
    et.u16: "uint16_t",
    et.u32: "uint32_t",
    et.u64: "uint64_t",
}
NARROW_FLOATS = (et.f16, et.bf16)


class CStyleDialect:
    """The parts of :class:`Dialect` every C-like target shares; a target names its 16-bit
    float types and conversions, its math calls, its special float values and its check
    statement.

    Attributes:
        narrow_types: storage types of f16 and bf16.
        loads, stores, rounds: format strings (``{}``: the expression) converting f16 and bf16
            values; other types need no conversion.
        inline: how helper functions are declared (``static inline``).
    """

    narrow_types: ClassVar[dict[ElementType, str]] = {}
    loads: ClassVar[dict[ElementType, str]] = {}
    stores: ClassVar[dict[ElementType, str]] = {}
    rounds: ClassVar[dict[ElementType, str]] = {}
    inline = "static inline"

    def storage_type(self, t: ElementType) -> str:
        return self.narrow_types[t] if t in NARROW_FLOATS else _STORAGE[t]

    def compute_type(self, t: ElementType) -> str:
        return "float" if t in NARROW_FLOATS else _STORAGE[t]

    def load(self, t: ElementType, expr: str) -> str:
        return self.loads[t].format(expr) if t in self.loads else expr

    def store(self, t: ElementType, expr: str) -> str:
        return self.stores[t].format(expr) if t in self.stores else expr

    def round_to(self, t: ElementType, expr: str) -> str:
        return self.rounds[t].format(expr) if t in self.rounds else expr

    def narrow(self, t: ElementType, expr: str) -> str:
        raise NotImplementedError

    def math_call(self, name: str, t: ElementType, *args: str) -> str:
        suffix = "" if t is et.f64 else "f"
        return f"{name}{suffix}({', '.join(args)})"

    def special(self, value: float, wide: bool) -> str:
        """A NaN or an infinity (``wide``: as a double)."""
        raise NotImplementedError

    def flag(self, condition: str, mask: int) -> str:
        raise NotImplementedError

    def own_helper(self, name: str) -> str:
        """A helper only this target has."""
        raise KeyError(f"no helper {name!r}")

    def literal(self, value: bool | int | float, t: ElementType) -> str:
        if t.is_boolean:
            return "1" if value else "0"
        if t.is_integral:
            return self.int_literal(int(value), t)
        wide = t is et.f64
        v = float(value)
        if not math.isfinite(v):
            return self.special(v, wide)
        text = float.hex(v)
        return f"({text})" if wide else f"({text}f)"

    def int_literal(self, v: int, t: ElementType) -> str:
        c = self.compute_type(t)
        info = np.iinfo(t.dtype)
        if v == info.min and t.is_signed:
            return f"(({c})({v + 1}LL - 1))"
        suffix = "ULL" if not t.is_signed else "LL"
        return f"(({c}){v}{suffix})"

    def lowest(self, t: ElementType) -> str:
        """The smallest value of ``t`` (-inf for floats), as a compute-type literal."""
        return self.literal(lowest_value(t), t)

    def highest(self, t: ElementType) -> str:
        """The largest value of ``t`` (+inf for floats), as a compute-type literal."""
        return self.literal(highest_value(t), t)

    def helper_code(self, name: str) -> str:
        make = COMMON_HELPERS.get(name)
        return make(self) if make is not None else self.own_helper(name)


def lowest_value(t: ElementType) -> bool | int | float:
    """The smallest value of ``t`` (-inf for floats)."""
    if t.is_real:
        return -math.inf
    return False if t.is_boolean else int(np.iinfo(t.dtype).min)


def highest_value(t: ElementType) -> bool | int | float:
    """The largest value of ``t`` (+inf for floats)."""
    if t.is_real:
        return math.inf
    return True if t.is_boolean else int(np.iinfo(t.dtype).max)


# ----------------------------------------------------------------------- scalar helpers
#: The helpers every target's code may call, by name, as text of a dialect: those the scalar
#: renderers ask for (``ScalarContext.helper``) and the pooling windows' ``og_count``.
COMMON_HELPERS: dict[str, Callable[[CStyleDialect], str]] = {}

INTEGERS = (et.i8, et.i16, et.i32, et.i64, et.u8, et.u16, et.u32, et.u64)


def _unsigned_of(t: ElementType) -> str:
    return {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}[t.itemsize]


def _divisions(d: CStyleDialect, t: ElementType) -> str:
    c, u, n, q = d.storage_type(t), _unsigned_of(t), t.name, d.inline
    if not t.is_signed:
        return f"""{q} {c} og_floordiv_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a / b; }}
{q} {c} og_truncdiv_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a / b; }}"""
    return f"""{q} {c} og_truncdiv_{n}({c} a, {c} b) {{
  if (b == 0) return 0;
  if (b == -1) return ({c})(({u})0 - ({u})a); /* wraps at the minimum, as numpy does */
  return ({c})(a / b);
}}
{q} {c} og_floordiv_{n}({c} a, {c} b) {{
  if (b == 0) return 0;
  if (b == -1) return ({c})(({u})0 - ({u})a);
  {c} q = ({c})(a / b);
  if (({c})(a % b) != 0 && ((a < 0) != (b < 0))) q -= 1;
  return q;
}}"""


def _ipow(d: CStyleDialect, t: ElementType) -> str:
    c, u, n = d.storage_type(t), _unsigned_of(t), t.name
    return f"""{d.inline} {c} og_ipow_{n}({c} a, {c} b) {{ /* repeated squaring, wrapping */
  {u} base = ({u})a, result = 1; uint64_t e = (uint64_t)b;
  if (b < 0) return 0;
  while (e) {{ if (e & 1u) result = ({u})(result * base); base = ({u})(base * base); e >>= 1; }}
  return ({c})result;
}}"""


def _int_mod(d: CStyleDialect, t: ElementType) -> str:
    c, n, q = d.storage_type(t), t.name, d.inline
    if not t.is_signed:
        return f"""{q} {c} og_fmod_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a % b; }}
{q} {c} og_floormod_{n}({c} a, {c} b) {{ return b == 0 ? 0 : a % b; }}"""
    return f"""{q} {c} og_fmod_{n}({c} a, {c} b) {{ /* sign of a; no trap at -1 */
  return (b == 0 || b == -1) ? 0 : ({c})(a % b);
}}
{q} {c} og_floormod_{n}({c} a, {c} b) {{ /* sign of b, as Python's % */
  if (b == 0 || b == -1) return 0;
  {c} r = ({c})(a % b);
  return (r != 0 && ((r < 0) != (b < 0))) ? ({c})(r + b) : r;
}}"""


def _float_mod(d: CStyleDialect, t: ElementType) -> str:
    c, n, q = d.storage_type(t), t.name, d.inline
    return f"""{q} {c} og_fmod_{n}({c} a, {c} b) {{ return {d.math_call("fmod", t, "a", "b")}; }}
{q} {c} og_floormod_{n}({c} a, {c} b) {{ /* numpy.remainder: the sign of b */
  {c} r = {d.math_call("fmod", t, "a", "b")};
  if (r != 0) {{ if ((r < 0) != (b < 0)) r += b; }}
  else r = {d.math_call("copysign", t, "0", "b")};
  return r;
}}"""


def _float_to_int(d: CStyleDialect, t: ElementType) -> str:
    c, n = d.storage_type(t), t.name
    info = np.iinfo(t.dtype)
    high, low = d.literal(int(info.max), t), d.literal(int(info.min), t)
    return f"""{d.inline} {c} og_f2i_{n}(double x) {{ /* truncate, saturate, NaN -> 0 */
  if (x != x) return 0;
  double t = {d.math_call("trunc", et.f64, "x")};
  if (t >= (double){high}) return {high};
  if (t <= (double){low}) return {low};
  return ({c})t;
}}"""


def _float_to_short_int(d: CStyleDialect, t: ElementType) -> str:
    """``og_f2i_<t>`` for a ``float`` and an 8- or 16-bit ``t``: the bounds are exact floats,
    so saturating before the truncating cast gives the same value, and the selects (no early
    returns, no ``trunc``) let GCC vectorize the loop (quantized models convert every
    activation)."""
    c, n = d.storage_type(t), t.name
    info = np.iinfo(t.dtype)
    high, low = f"{float(info.max)!r}f", f"{float(info.min)!r}f"
    return f"""{d.inline} {c} og_f2if_{n}(float x) {{ /* truncate, saturate, NaN -> 0 */
  float t = x >= {high} ? {high} : x;
  t = t <= {low} ? {low} : t;
  t = x != x ? 0.0f : t;
  return ({c})(int32_t)t;
}}"""


def _bind(
    make: Callable[[CStyleDialect, ElementType], str], t: ElementType
) -> Callable[[CStyleDialect], str]:
    return lambda d: make(d, t)


for _t in INTEGERS:
    COMMON_HELPERS[f"div_{_t.name}"] = _bind(_divisions, _t)
    COMMON_HELPERS[f"ipow_{_t.name}"] = _bind(_ipow, _t)
    COMMON_HELPERS[f"f2i_{_t.name}"] = _bind(_float_to_int, _t)
    COMMON_HELPERS[f"mod_{_t.name}"] = _bind(_int_mod, _t)
    if _t.itemsize <= 2:
        COMMON_HELPERS[f"f2if_{_t.name}"] = _bind(_float_to_short_int, _t)
COMMON_HELPERS["pool_count"] = lambda d: (
    f"{d.inline} long og_count(long start, long taps, long low, long high) {{\n"
    "  /* taps start, start+1, ... (padded coordinates) inside [low, high) */\n"
    "  long a = start > low ? start : low, b = start + taps < high ? start + taps : high;\n"
    "  return b > a ? b - a : 0;\n"
    "}"
)
COMMON_HELPERS["mod_f32"] = _bind(_float_mod, et.f32)
COMMON_HELPERS["mod_f64"] = _bind(_float_mod, et.f64)
