"""Generated code matches the reference exactly where the reference is exact: integer
wrap-around, floor and truncating division, saturating conversions, NaN propagation, IEEE
specials through libmvec, and 16-bit floats rounded to nearest even after every op."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops

NAN, INF = float("nan"), float("inf")


def run_both(backend, build, *arrays):
    params = [og.parameter(og.element.from_dtype(a.dtype), a.shape) for a in arrays]
    fn = og.Function([build(*params)], params)
    got = backend.compile(fn)(*arrays)[0]
    want = og.backend("INTERPRETER").compile(fn)(*arrays)[0]
    return got, want


def assert_same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f" or got.dtype.name == "bfloat16":
        nan = np.isnan(want.astype(np.float64))
        assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
        got, want = got[~nan], want[~nan]
    assert np.array_equal(got.view(f"u{got.dtype.itemsize}"), want.view(f"u{want.dtype.itemsize}"))


CASES = [
    ("i8 add wraps", ops.add, [np.array([100, -128, 127], np.int8)] * 2),
    ("u8 subtract wraps", ops.subtract, [np.array([0, 1], np.uint8), np.array([1, 2], np.uint8)]),
    ("i32 multiply wraps", ops.multiply, [np.array([2**30, -(2**31)], np.int32)] * 2),
    (
        "floor division",
        ops.divide,
        [np.array([-7, 7, -7, -(2**31)], np.int32), np.array([2, -2, -2, -1], np.int32)],
    ),
    (
        "truncating division",
        lambda a, b: ops.divide(a, b, floor_division=False),
        [np.array([-7, 7, -(2**63)], np.int64), np.array([2, -2, -1], np.int64)],
    ),
    ("i64 floor mod", ops.mod, [np.array([-7, 7, -7], np.int64), np.array([3, -3, -3], np.int64)]),
    (
        "float to int saturates, NaN gives 0",
        lambda x: ops.convert(x, og.i32),
        [np.array([NAN, INF, -INF, 1e10, -1e10, -2.7, 2.7, 2147483520.0], np.float32)],
    ),
    (
        "float to u8",
        lambda x: ops.convert(x, og.u8),
        [np.array([-5.0, 300.0, 254.9, NAN], np.float64)],
    ),
    ("int to int saturates", lambda x: ops.convert(x, og.i8), [np.array([300, -300, 5], np.int32)]),
    ("u64 to i64 saturates", lambda x: ops.convert(x, og.i64), [np.array([2**64 - 1, 7], np.uint64)]),
    ("to boolean", lambda x: ops.convert(x, og.boolean), [np.array([0.0, -0.0, NAN, 2.0], np.float32)]),
    ("maximum propagates NaN", ops.maximum, [np.array([NAN, 1.0, 2.0], np.float32), np.array([1.0, NAN, 3.0], np.float32)]),
    ("minimum propagates NaN", ops.minimum, [np.array([NAN, 1.0, 2.0], np.float64), np.array([1.0, NAN, 3.0], np.float64)]),
    ("relu keeps NaN", ops.relu, [np.array([NAN, -1.0, 2.0], np.float32)]),
    ("reduce_max propagates NaN", lambda x: ops.reduce_max(x, (1,)), [np.array([[1.0, NAN, 3.0], [1.0, 2.0, 3.0]], np.float32)]),
    ("reduce_min propagates NaN", lambda x: ops.reduce_min(x, (0,)), [np.array([[1.0, 2.0], [NAN, 0.5]], np.float32)]),
    ("empty reduction is the identity", lambda x: ops.reduce_max(x, (1,)), [np.zeros((3, 0), np.float32)]),
    ("IEEE specials", lambda x: ops.add(ops.exp(x), ops.log(x)), [np.array([INF, 0.0, -1.0, NAN], np.float32)]),
    ("sqrt of a negative", ops.sqrt, [np.array([-1.0, 4.0, -0.0], np.float32)]),
    ("float division by zero", ops.divide, [np.array([1.0, -1.0, 0.0], np.float32), np.zeros(3, np.float32)]),
    (
        "bf16 rounds to nearest even after each op",
        lambda a, b: ops.multiply(ops.add(a, b), a),
        [np.array([1.0, 1.0, 3.0], dtype=og.bf16.dtype), np.array([2**-8, 3 * 2**-8, 2**-7], dtype=og.bf16.dtype)],
    ),
    (
        "f16 rounds after each op",
        lambda a, b: ops.subtract(ops.add(a, b), a),
        [np.array([2048.0, 1.0, 65504.0], np.float16), np.array([1.0, 2**-11, 16.0], np.float16)],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "build", "arrays"), CASES, ids=[c[0] for c in CASES])
def test_exact_semantics(cpu, name, build, arrays):
    assert_same_bits(*run_both(cpu, build, *arrays))


def test_semantics_hold_in_parallel_code(parallel_cpu):
    """The same rules inside kernels split between threads (large shapes)."""
    rng = np.random.default_rng(4)
    a = rng.integers(-(2**31), 2**31 - 1, 4096, dtype=np.int64).astype(np.int32)
    b = rng.integers(-5, 6, 4096).astype(np.int32)
    b[b == 0] = -1
    assert_same_bits(*run_both(parallel_cpu, ops.divide, a, b))
    x = rng.standard_normal(5000).astype(np.float32) * 1e10
    x[::7] = NAN
    assert_same_bits(*run_both(parallel_cpu, lambda v: ops.convert(v, og.i16), x))
