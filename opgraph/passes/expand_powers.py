"""Powers by small integer constants as products: ``x ** 2 -> x * x``, ``x ** 3 -> x * (x * x)``,
``x ** 4 -> (x * x) * (x * x)``.

``pow`` is a libm call (a vector ``powf`` of about 20 instructions a lane); a product is one
instruction. Exporters write ``Pow(x, 3.0)`` for GPT-2's tanh-GELU and ``Pow(x, 2.0)`` for
variances (T5's RMS norm, Whisper's layer norms as exported by some versions).

Numerics: ``x * x`` is rounded once, as a correctly rounded ``pow`` would be; the cube and the
fourth power are rounded twice (within 1.5 ulp of the exact power, against glibc's ``powf`` which
is within 1 ulp). Overflow and underflow happen where the exact power overflows or underflows,
up to that rounding; NaN and infinities propagate as ``pow`` gives them (``inf ** 2 = inf``,
``(-inf) ** 3 = -inf``, ``nan ** n = nan``). Floating-point values only: integer powers keep
their exact helper.
"""

from __future__ import annotations

from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.ops import elementwise as ew
from opgraph.pattern import P, Rules, constant_value, rewrite

__all__ = ["POWER_RULES", "SMALL_EXPONENTS", "expand_powers"]

#: The exponents expanded into products.
SMALL_EXPONENTS = (2, 3, 4)


def _real(o: Output) -> bool:
    return o.element_type.is_real


def _small_exponent(o: Output) -> bool:
    value = constant_value(o)
    if value is None or value.size == 0:
        return False
    first = value.flat[0]
    return bool((value == first).all()) and any(first == n for n in SMALL_EXPONENTS)


def _product(x: Output, n: Output) -> Output:
    value = constant_value(n)
    assert value is not None  # the pattern checked it
    exponent = int(value.flat[0])
    square = ew.multiply(x, x)
    if exponent == 2:
        return square
    if exponent == 3:
        return ew.multiply(x, square)
    return ew.multiply(square, square)


POWER_RULES = Rules(
    [
        (
            P(ew.Pow, P.var("x", where=_real), P.const(name="n", where=_small_exponent)),
            _product,
        ),
    ]
)


def expand_powers(fn: Function) -> Function:
    """Replace each float ``pow(x, n)`` by a constant ``n`` of 2, 3 or 4 with products of ``x``
    (:data:`POWER_RULES`).

    Needs: nothing. Guarantees: no float Pow by a constant 2, 3 or 4 remains; values within the
    rounding stated in the module docstring.
    """
    return rewrite(fn, POWER_RULES)
