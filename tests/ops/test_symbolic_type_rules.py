"""Type rules on symbolic shapes, family by family: output sizes as expressions, equal-shape
rules that unify or name both dimensions, and clear errors where an op needs static sizes."""

import pytest

import opgraph as og
from opgraph import ops

n, m = og.dim("n"), og.dim("m")


def p(*shape, et=og.f32):
    return og.parameter(et, shape)


def test_elementwise_unifies_equal_and_names_both_dims():
    assert ops.add(p(n, 3), p(n, 3)).shape == (n, 3)
    with pytest.raises(og.OpTypeError, match=r"\[n, 3\] vs \[m, 3\]"):
        ops.add(p(n, 3), p(m, 3))


def test_reduction_and_matmul():
    assert ops.reduce_sum(p(n, m, 4), (1,)).shape == (n, 4)
    assert ops.matmul(p(n, 3, 4), p(4, m)).shape == (n, 3, m)
    assert ops.dot(p(n, 4), p(4, 5)).shape == (n, 5)


def test_movement():
    assert ops.concat([p(n, 3), p(m, 3), p(2, 3)], 0).shape == (n + m + 2, 3)
    assert ops.slice(p(n, 8), [1, 0], [n, 8], [2, 1]).shape == ((n - 1 + 1) // 2, 8)
    assert ops.reshape(p(n, 12, 64), (n, 768)).shape == (n, 768)
    assert ops.reshape(p(n, 12, 64), (-1, 64)).shape == (12 * n, 64)
    assert ops.transpose(p(n, m)).shape == (m, n)
    assert ops.tile(p(n, 2), (3, 2)).shape == (3 * n, 4)
    assert ops.broadcast(p(n), (4, n)).shape == (4, n)
    assert [o.shape for o in ops.split(p(2 * n, 3), 0, 2)] == [(n, 3), (n, 3)]
    assert ops.pad(p(n, 3), (1, 0), (2, 0)).shape == (n + 3, 3)


def test_a_static_check_that_cannot_be_decided_is_deferred_but_a_certain_one_fails():
    ops.slice(p(n), [2], [5])  # n >= 5 cannot be decided now: checked at binding
    with pytest.raises(og.OpTypeError, match="0 <= lower <= upper"):
        ops.slice(p(og.dim("k", max=3)), [0], [5])  # k <= 3 < 5 for every k


def test_convolution_and_pooling_windows():
    x = p(n, 3, m, 32)
    w = p(8, 3, 3, 3)
    y = ops.convolution(x, w, strides=(2, 1), padding_below=(1, 1), padding_above=(1, 1))
    assert y.shape == (n, 8, (m - 1) // 2 + 1, 32)
    pooled = ops.max_pool(p(n, 3, m, m), (2, 2), strides=(2, 2))
    assert pooled.shape == (n, 3, m // 2, m // 2)


def test_ops_that_need_static_sizes_say_so():
    with pytest.raises(og.OpTypeError, match="needs a static size"):
        ops.reduce_mean(p(n, 3), (0,))
    with pytest.raises(og.OpTypeError, match="symbolic size"):
        ops.resize(p(1, 1, n), scales=(1.0, 1.0, 1.5))
    with pytest.raises(og.OpTypeError, match="depends on the size"):
        ops.max_pool(p(1, 1, n), (3,), strides=(2,), auto_pad="same_upper")


def test_layer_norm_over_static_axes_with_symbolic_batch():
    assert ops.layer_norm(p(n, m, 8), p(8), p(8)).shape == (n, m, 8)
