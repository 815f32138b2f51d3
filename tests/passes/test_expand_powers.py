"""expand_powers: float powers by the constants 2, 3 and 4 become products; other exponents,
integer powers and run-time exponents keep their Pow; numerics unchanged up to rounding."""

import numpy as np
import pytest
from pass_helpers import assert_same_numerics, op_names

import opgraph as og
from opgraph import ops
from opgraph.passes.expand_powers import expand_powers


def power_fn(exponent, et=og.f32, shape=(3, 5)):
    x = og.parameter(et, shape)
    n = ops.broadcast(og.constant(np.asarray(exponent, et.dtype)), shape, (0, 1))
    return og.Function([ops.power(x, n)], [x])


@pytest.mark.parametrize(("exponent", "muls"), [(2, 1), (3, 2), (4, 2), (2.0, 1), (3.0, 2)])
def test_small_integer_exponent_becomes_products(exponent, muls):
    fn = power_fn(exponent)
    out = expand_powers(fn)
    names = op_names(out)
    assert "Pow" not in names
    assert names.count("Mul") == muls
    assert_same_numerics(fn, out, rtol=3e-7, atol=0)


@pytest.mark.parametrize("et", [og.f16, og.bf16, og.f64])
def test_other_float_types_expand(et):
    fn = power_fn(3, et)
    out = expand_powers(fn)
    assert "Pow" not in op_names(out)
    assert_same_numerics(fn, out, rtol=2e-2 if et in (og.f16, og.bf16) else 1e-15, atol=0)


@pytest.mark.parametrize("exponent", [5, 2.5, 0.5, -2, 1.9999])
def test_other_exponents_keep_pow(exponent):
    fn = power_fn(exponent)
    assert expand_powers(fn) is fn


def test_integer_power_keeps_its_exact_helper():
    fn = power_fn(3, og.i32)
    assert expand_powers(fn) is fn


def test_mixed_exponents_keep_pow():
    x = og.parameter(og.f32, (2,))
    fn = og.Function([ops.power(x, og.constant(np.array([2.0, 3.0], np.float32)))], [x])
    assert expand_powers(fn) is fn


def test_run_time_exponent_keeps_pow():
    x, n = og.parameter(og.f32, (4,)), og.parameter(og.f32, (4,))
    fn = og.Function([ops.power(x, n)], [x, n])
    assert expand_powers(fn) is fn


def test_special_values_match_pow():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e13, -1e13, 1e-20, 3.0], np.float32)
    for exponent in (2, 3, 4):
        fn = power_fn(exponent, shape=(1, x.size))
        (got,) = og.backend("INTERPRETER").compile(expand_powers(fn))(x[None])
        with np.errstate(over="ignore"):
            want = np.power(x, np.float32(exponent))
        np.testing.assert_array_equal(np.asarray(got)[0], want)
