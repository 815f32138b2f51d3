"""Type rules on symbolic shapes, family by family: output sizes as expressions, equal-shape
rules that unify or name both dimensions, and clear errors where an op needs static sizes."""

import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.dim import evaluate

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
    with pytest.raises(og.OpTypeError, match="symbolic size"):
        ops.resize(p(1, 1, n), scales=(1.0, 1.0, 1.5))


def test_counts_of_symbolic_axes_are_values():
    assert ops.reduce_mean(p(n, 3, m), (0, 2)).shape == (3,)
    assert ops.reduce_mean(p(n, 3), (0,), keep_dims=True).shape == (1, 3)
    assert ops.layer_norm(p(n, m), axis=0).shape == (n, m)
    assert ops.instance_norm(p(n, 3, m), p(3), p(3)).shape == (n, 3, m)
    assert ops.group_norm(p(n, m, 4), p(m), p(m), 2).shape == (n, m, 4)
    assert ops.group_norm(p(n, 3 * m, 2), p(3 * m), p(3 * m), 3).shape == (n, 3 * m, 2)
    with pytest.raises(og.OpTypeError, match="do not divide into num_groups 4"):
        ops.group_norm(p(n, 6, 4), p(6), p(6), 4)
    with pytest.raises(og.OpTypeError, match="channel count m of x is not a multiple of num_gro"):
        ops.group_norm(p(n, m, 4), p(m), p(m), 3)


def test_same_padding_with_stride_on_a_symbolic_axis():
    x = p(n, 3, m)
    # window >= stride: the total padding needs no max, the size is ceil(m / stride)
    y = ops.convolution(x, p(8, 3, 3), strides=(2,), auto_pad="same_upper")
    assert y.shape == (n, 8, (m + 1) // 2)
    assert ops.max_pool(x, (3,), strides=(3,), auto_pad="same_lower").shape == (n, 3, (m + 2) // 3)
    # window < stride: the padding keeps a max; the size evaluates to ceil(m / 3) per binding
    pooled = ops.avg_pool(x, (2,), strides=(3,), auto_pad="same_upper")
    for size in range(1, 12):
        assert evaluate(pooled.shape[2], {"m": size}) == -(-size // 3)


def test_ceil_mode_pooling_on_a_symbolic_axis():
    # decided by the bounds: without padding no window starts in the padding above
    assert ops.max_pool(p(n, 3, m), (3,), strides=(2,), ceil_mode=True).shape == (n, 3, m // 2)
    # with padding the drop of the last window depends on m: an expression
    y = ops.max_pool(
        p(n, 3, m), (3,), strides=(3,), padding_below=(1,), padding_above=(1,), ceil_mode=True
    )
    for size in range(2, 12):
        padded = size + 2
        out = -(-(padded - 3) // 3) + 1
        out -= (out - 1) * 3 >= size + 1
        assert evaluate(y.shape[2], {"m": size}) == out


def test_deferred_checks_of_ordering_and_element_gathers():
    assert ops.arg_max(p(n, m), 1).shape == (n,)
    assert [o.shape for o in ops.top_k(p(n, m), 3, 1)] == [(n, 3), (n, 3)]
    idx = og.parameter(og.i64, (n, 3))
    assert ops.gather_elements(p(m, 4), idx, 0).shape == (n, 3)
    with pytest.raises(og.OpTypeError, match="exceeds the size"):
        ops.top_k(p(n, og.dim("k", max=2)), 3, 1)
    with pytest.raises(og.OpTypeError, match="is empty"):
        ops.arg_max(p(n, og.dim("z", max=0)), 1)


def test_layer_norm_over_static_axes_with_symbolic_batch():
    assert ops.layer_norm(p(n, m, 8), p(8), p(8)).shape == (n, m, 8)
