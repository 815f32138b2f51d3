"""Sizes that used to need static shapes, run on symbolic ones: element counts computed at run
time (mean, normalizations, batch-norm gradient), same padding with strides and ceil-mode
pooling on symbolic axes. Each symbolic run is compared with a static build of the same sizes
(on INTERPRETER, against the oracle)."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import backprop
from opgraph.backends.interpreter.backend import lower_for_interpreter
from opgraph.passes import fold_constants, specialize_shapes
from opgraph.passes.decompose import decompose
from opgraph.serialize.api import load, save
from opgraph.testing.oracle import evaluate

RUN_TIME_COUNT_OPS = {"ShapeOf", "Gather", "ReduceProd"}


def _statistics(x, h, c):
    return [
        ops.reduce_mean(x, (0, 2)),
        ops.reduce_mean(x, (2,), keep_dims=True),
        ops.layer_norm(h, axis=1),
        ops.group_norm(h, c, c, 3),
        ops.instance_norm(h, c, c),
    ]


def _statistics_function(n, m):
    x = og.parameter(og.f16, (n, 3, m), name="x")
    h = og.parameter(og.f32, (n, 6, m), name="h")
    c = og.parameter(og.f32, (6,), name="c")
    return og.Function(_statistics(x, h, c), [x, h, c])


def _arguments(rng, n, m):
    return [
        rng.uniform(-2, 2, (n, 3, m)).astype(np.float16),
        rng.uniform(-2, 2, (n, 6, m)).astype(np.float32),
        rng.uniform(0.5, 2, (6,)).astype(np.float32),
    ]


def _op_names(fn):
    return {type(node.op).__name__ for node in fn.nodes}


def test_counts_of_symbolic_axes_are_computed_at_run_time():
    symbolic = decompose(_statistics_function(og.dim("n"), og.dim("m")))
    assert _op_names(symbolic) >= RUN_TIME_COUNT_OPS
    exe = og.backend("INTERPRETER").compile(symbolic)  # the decomposed graph: shape_of runs
    rng = np.random.default_rng(0)
    for n, m in ((2, 5), (3, 700)):  # 3·700·... counts past f16's exact integers
        args = _arguments(rng, n, m)
        want = evaluate(_statistics_function(n, m), args)
        for i, (got, expected) in enumerate(zip(exe(*args), want, strict=True)):
            tol = 2e-2 if got.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=f"result {i}")


def test_counts_fold_to_constants_once_specialised():
    symbolic = decompose(_statistics_function(og.dim("n"), og.dim("m")))
    folded = fold_constants(specialize_shapes(symbolic, {"n": 2, "m": 5}))
    assert not RUN_TIME_COUNT_OPS & _op_names(folded)


def test_static_graphs_keep_constant_counts():
    lowered = lower_for_interpreter(_statistics_function(2, 5))
    assert not RUN_TIME_COUNT_OPS & _op_names(lowered)


def test_a_large_run_time_count_does_not_overflow_f16():
    n = og.dim("n")
    x = og.parameter(og.f16, (n,), name="x")
    exe = og.backend("INTERPRETER").compile(decompose(og.Function([ops.reduce_mean(x, (0,))], [x])))
    values = np.zeros(70000, np.float16)  # 70000 > 65504, the largest f16
    values[7] = 7000
    (mean,) = exe(values)
    assert mean == np.float16(0.1)


def test_batch_norm_training_gradient_on_a_symbolic_batch():
    def loss(x, s, b):
        y, mean, var = ops.batch_norm_training(x, s, b, epsilon=1e-3)
        terms = [ops.reduce_sum(ops.multiply(v, v), tuple(range(v.rank))) for v in (y, mean, var)]
        return ops.add(ops.add(terms[0], terms[1]), terms[2])

    def function(n):
        x = og.parameter(og.f32, (n, 3, 4), name="x")
        s, b = og.parameter(og.f32, (3,), name="s"), og.parameter(og.f32, (3,), name="b")
        return og.Function([loss(x, s, b)], [x, s, b])

    exe = og.backend("INTERPRETER").compile(backprop(function(og.dim("n"))))
    rng = np.random.default_rng(1)
    for n in (2, 5):
        args = [rng.standard_normal(s).astype(np.float32) for s in ((n, 3, 4), (3,), (3,))]
        want = evaluate(backprop(function(n)), args)
        for got, expected in zip(exe(*args), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def _windows(x, w, w1):
    return [
        ops.convolution(x, w, strides=(2,), auto_pad="same_upper"),
        ops.convolution(x, w, strides=(3,), auto_pad="same_lower"),
        ops.convolution(x, w1, strides=(2,), auto_pad="same_upper"),  # window < stride
        ops.max_pool(x, (3,), strides=(2,), auto_pad="same_upper"),
        ops.avg_pool(x, (2,), strides=(3,), auto_pad="same_lower"),
        ops.max_pool(x, (3,), strides=(2,), ceil_mode=True),
        ops.avg_pool(x, (2,), strides=(3,), padding_below=(1,), padding_above=(1,), ceil_mode=True),
        ops.max_pool(x, (3,), strides=(3,), padding_below=(1,), padding_above=(1,), ceil_mode=True),
    ]


def _window_function(size):
    x = og.parameter(og.f32, (1, 2, size), name="x")
    w = og.parameter(og.f32, (3, 2, 3), name="w")
    w1 = og.parameter(og.f32, (3, 2, 1), name="w1")
    return og.Function(_windows(x, w, w1), [x, w, w1])


def test_same_padding_and_ceil_mode_on_a_symbolic_axis():
    exe = og.backend("INTERPRETER").compile(_window_function(og.dim("m")))
    rng = np.random.default_rng(2)
    for size in range(3, 14):  # every residue of the strides, both ceil-mode outcomes
        args = [rng.standard_normal(s).astype(np.float32) for s in ((1, 2, size), (3, 2, 3))]
        args.append(rng.standard_normal((3, 2, 1)).astype(np.float32))
        want = evaluate(_window_function(size), args)
        for i, (got, expected) in enumerate(zip(exe(*args), want, strict=True)):
            assert got.shape == expected.shape, f"result {i} at size {size}"
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("auto_pad", ["same_upper", "same_lower"])
def test_strided_same_convolution_gradient_on_a_symbolic_axis(auto_pad):
    def function(size):
        x = og.parameter(og.f32, (2, 2, size), name="x")
        w = og.parameter(og.f32, (3, 2, 3), name="w")
        y = ops.convolution(x, w, strides=(2,), auto_pad=auto_pad)
        return og.Function([ops.reduce_sum(ops.multiply(y, y), (0, 1, 2))], [x, w])

    exe = og.backend("INTERPRETER").compile(backprop(function(og.dim("m"))))
    rng = np.random.default_rng(3)
    for size in (5, 8):
        args = [rng.standard_normal(s).astype(np.float32) for s in ((2, 2, size), (3, 2, 3))]
        want = evaluate(backprop(function(size)), args)
        for got, expected in zip(exe(*args), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def _resized(x):
    return [
        ops.resize(x, output_shape=(1, 2, 5, 4), mode="linear"),
        ops.resize(x, output_shape=(1, 2, 3, x.shape[3]), mode="nearest"),
        ops.resize(x, scales=(1, 1, 2, 1), mode="nearest"),
    ]


def test_resize_to_given_sizes_from_symbolic_axes():
    h, w = og.dim("h"), og.dim("w")
    x = og.parameter(og.f32, (1, 2, h, w), name="x")
    fn = og.Function(_resized(x), [x])
    assert fn.results[0].node.op.scales is None  # known at a binding: output size / length
    exe = og.backend("INTERPRETER").compile(fn)
    rng = np.random.default_rng(4)
    for size in ((3, 4), (7, 2)):
        (arg,) = args = [rng.standard_normal((1, 2, *size)).astype(np.float32)]
        static = og.parameter(og.f32, arg.shape, name="x")
        want = evaluate(og.Function(_resized(static), [static]), args)
        for got, expected in zip(exe(arg), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    with pytest.raises(og.OpTypeError, match="specialise the Function to a binding first"):
        decompose(fn)


def _average_pools(x):
    return [
        ops.avg_pool(x, (2,), strides=(2,), include_padding=True),
        ops.avg_pool(x, (3,), strides=(2,), padding_below=(1,), padding_above=(1,)),
        ops.avg_pool(
            x, (3,), (2,), (1,), (2,), include_padding=True, ceil_mode=True
        ),  # windows past the padded data
        ops.avg_pool(x, (2,), strides=(3,), auto_pad="same_lower"),
        ops.avg_pool(x, (3,), (2,), (1,), (1,), ceil_mode=True),
    ]


def test_avg_pool_gradient_on_a_symbolic_axis():
    def function(size):
        x = og.parameter(og.f32, (2, 2, size), name="x")
        squares = [ops.reduce_sum(ops.multiply(y, y), (0, 1, 2)) for y in _average_pools(x)]
        total = squares[0]
        for term in squares[1:]:
            total = ops.add(total, term)
        return og.Function([total], [x])

    gradient = backprop(function(og.dim("m")))
    assert "Convolution" in _op_names(gradient)  # the divisor, computed at run time
    exe = og.backend("INTERPRETER").compile(gradient)
    rng = np.random.default_rng(5)
    for size in range(3, 10):  # both parities of the strides, windows past the data
        args = [rng.standard_normal((2, 2, size)).astype(np.float32)]
        for got, expected in zip(exe(*args), evaluate(backprop(function(size)), args), strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_size_expressions_round_trip_through_the_file_format(tmp_path):
    x = og.parameter(og.f32, (og.dim("n"), 2, og.dim("m")), name="x")
    w = og.parameter(og.f32, (3, 2, 3), name="w")
    fn = og.Function([*_windows(x, w, w), ops.resize(x, output_shape=(x.shape[0], 2, 5))], [x, w])
    save(fn, tmp_path / "sizes.json")
    loaded = load(tmp_path / "sizes.json")
    assert loaded.flat_result_types == fn.flat_result_types
    args = [np.ones((2, 2, 9), np.float32), np.ones((3, 2, 3), np.float32)]
    for a, b in zip(
        og.backend("INTERPRETER").compile(loaded)(*args),
        evaluate(specialize_shapes(fn, {"n": 2, "m": 9}), args),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6)
