"""Symbolic cases of the type rules, one table row per op family (issue 16, item 6): output
sizes as expressions over the symbols ``n``, ``m``, and mismatches that are an ``OpTypeError``
naming both dimensions. ``tests/ops/test_symbolic_type_rules.py`` holds the narrative cases
(deferred checks, windows, counts)."""

import pkgutil

import numpy as np
import pytest

import opgraph as og
from opgraph import ops

n, m = og.dim("n"), og.dim("m")


def p(*shape, et=og.f32):
    return og.parameter(et, shape)


def i64(*shape):
    return og.parameter(og.i64, shape)


def first(values):
    return values[0] if isinstance(values, tuple) else values


#: (family, builder, expected result shape)
SHAPES = [
    ("activation", lambda: ops.gelu(p(n, m)), (n, m)),
    ("activation", lambda: ops.prelu(p(n, 3, m), p(3), axis=1), (n, 3, m)),
    ("activation", lambda: ops.squared_difference(p(n, m), p(n, m)), (n, m)),
    ("bitwise", lambda: ops.bitwise_and(p(n, 4, et=og.i32), p(n, 4, et=og.i32)), (n, 4)),
    ("bitwise", lambda: ops.shift_left(p(m, et=og.u8), p(m, et=og.u8)), (m,)),
    ("collective", lambda: ops.all_reduce(p(n, m)), (n, m)),
    ("collective", lambda: ops.broadcast_distributed(p(n, 3)), (n, 3)),
    ("convolution", lambda: ops.convolution(p(n, 3, m), p(4, 3, 2)), (n, 4, m - 1)),
    ("conversion", lambda: ops.convert(p(n, m), og.f16), (n, m)),
    ("conversion", lambda: ops.bitcast(p(n, 2, et=og.i32), og.f32), (n, 2)),
    ("dynamic", lambda: ops.shape_of(p(n, m, 3)), (3,)),
    ("shape_tensors", lambda: ops.dynamic_tile(p(n, 6), og.constant(np.array([2, 1]))), (2 * n, 6)),
    ("elementwise", lambda: ops.select(p(n, 2, et=og.boolean), p(n, 2), p(n, 2)), (n, 2)),
    ("elementwise", lambda: ops.less(p(n, m), p(n, m)), (n, m)),
    ("indexing", lambda: ops.gather(p(n, 5), i64(m, 2), 1), (n, m, 2)),
    ("indexing", lambda: ops.gather(p(n, m, 4), i64(n, 3), 1, batch_dims=1), (n, 3, 4)),
    ("indexing", lambda: ops.gather_nd(p(n, m, 4), i64(3, 2)), (3, 4)),
    (
        "indexing",
        lambda: ops.scatter_elements(p(n, m), i64(n, 2), p(n, 2), 1),
        (n, m),
    ),
    ("indexing", lambda: ops.scatter_nd(p(n, m), i64(3, 1), p(3, m)), (n, m)),
    ("indexing", lambda: ops.one_hot(i64(n, m), 5), (n, m, 5)),
    ("linalg", lambda: ops.gemm(p(n, 4), p(4, m), p(n, m)), (n, m)),
    ("linalg", lambda: ops.gemm(p(4, n), p(m, 4), trans_a=True, trans_b=True), (n, m)),
    ("linalg", lambda: ops.dot(p(n, 3, 4), p(3, 4, m), 2), (n, m)),
    ("movement", lambda: ops.reverse(p(n, m), (0,)), (n, m)),
    ("movement", lambda: ops.reverse_sequence(p(n, m, 2), i64(n)), (n, m, 2)),
    ("movement", lambda: ops.replace_slice(p(n, 6), p(n, 2), (0, 1), (n, 3)), (n, 6)),
    ("movement", lambda: ops.zeros_like(p(n, m)), (n, m)),
    ("movement", lambda: first(ops.split(p(n, 6), 1, (2, 4))), (n, 2)),
    ("nn", lambda: ops.softmax(p(n, m), 1), (n, m)),
    ("nn", lambda: ops.log_softmax(p(n, m), 0), (n, m)),
    ("nn", lambda: ops.lrn(p(n, 3, m), 1e-4, 0.75, 1.0, 3), (n, 3, m)),
    ("nn", lambda: ops.batch_norm_inference(p(n, 3, m), *(p(3) for _ in range(4))), (n, 3, m)),
    ("nn", lambda: first(ops.batch_norm_training(p(n, 3, m), p(3), p(3))), (n, 3, m)),
    ("normalization", lambda: ops.layer_norm(p(n, m, 8), axis=1), (n, m, 8)),
    ("ordering", lambda: ops.cumsum(p(n, m), 1), (n, m)),
    ("ordering", lambda: ops.arg_min(p(n, m), 0, keep_dims=True), (1, m)),
    ("pooling", lambda: first(ops.max_pool_with_indices(p(n, 2, m), (2,))), (n, 2, m - 1)),
    ("pooling", lambda: ops.avg_pool(p(n, 2, m, 6), (3, 3), (1, 3)), (n, 2, m - 2, 2)),
    ("quantization", lambda: ops.quantize_linear(p(n, m), p()), (n, m)),
    ("quantization", lambda: ops.dequantize_linear(p(n, 3, et=og.i8), p(3), axis=1), (n, 3)),
    ("rearrange", lambda: ops.pad(p(n, m), (1, 2), (0, 3)), (n + 1, m + 5)),
    ("rearrange", lambda: ops.depth_to_space(p(n, 8, m, 3), 2), (n, 2, 2 * m, 6)),
    ("rearrange", lambda: ops.space_to_depth(p(n, 2, 2 * m, 4), 2), (n, 8, m, 2)),
    ("reduction", lambda: ops.reduce_l2(p(n, m, 3), (1,)), (n, 3)),
    ("reduction", lambda: ops.reduce_log_sum_exp(p(n, m), (0, 1), keep_dims=True), (1, 1)),
    ("reduction", lambda: ops.reduce_mean(p(n, m), (0,)), (m,)),
    (
        "resize",
        lambda: ops.resize(p(1, 3, n, m), scales=(1.0, 1.0, 2.0, 3.0)),
        (1, 3, 2 * n, 3 * m),
    ),
    ("resize", lambda: ops.resize(p(n, 3, m), output_shape=(n, 3, 7)), (n, 3, 7)),
    ("rnn", lambda: first(ops.lstm_cell(p(n, 4), p(n, 3), p(n, 3), p(12, 4), p(12, 3))), (n, 3)),
    ("rnn", lambda: ops.gru_cell(p(n, 4), p(n, 3), p(9, 4), p(9, 3)), (n, 3)),
    ("rnn", lambda: ops.rnn_cell(p(n, 4), p(n, 3), p(3, 4), p(3, 3)), (n, 3)),
    ("shaping", lambda: ops.squeeze(p(n, 1, m), (1,)), (n, m)),
    ("shaping", lambda: ops.unsqueeze(p(n, m), (0, 3)), (1, n, m, 1)),
    ("shaping", lambda: ops.flatten(p(n, m, 4), 1), (n, 4 * m)),
    ("shaping", lambda: ops.stack([p(n, m), p(n, m)], 1), (n, 2, m)),
    ("shaping", lambda: ops.expand(p(n, 1), (n, m)), (n, m)),
    ("structural", lambda: ops.stop_gradient(p(n, m)), (n, m)),
    ("trigonometric", lambda: ops.atan2(p(n, m), p(n, m)), (n, m)),
    ("movement", lambda: ops.concat([p(n, 2), p(n, m)], 1), (n, m + 2)),
]


@pytest.mark.parametrize(
    ("build", "expected"),
    [pytest.param(b, e, id=f"{f}-{i}") for i, (f, b, e) in enumerate(SHAPES)],
)
def test_symbolic_result_shape(build, expected):
    assert first(build()).shape == expected


#: (family, builder, a substring of the message naming both dimensions)
MISMATCHES = [
    ("activation", lambda: ops.squared_difference(p(n, 2), p(m, 2)), "[n, 2], [m, 2]"),
    ("bitwise", lambda: ops.bitwise_or(p(n, et=og.i32), p(m, et=og.i32)), "[n] vs [m]"),
    ("elementwise", lambda: ops.select(p(n, et=og.boolean), p(m), p(m)), "[n] vs [m]"),
    ("linalg", lambda: ops.matmul(p(3, n), p(m, 4)), "has n columns, b f32[m,4] has m rows"),
    (
        "movement",
        lambda: ops.concat([p(n, 2), p(m, 2)], 1),
        "[m, 2] differs from input 0 shape [n, 2]",
    ),
    (
        "nn",
        lambda: ops.batch_norm_inference(p(2, n), *(p(m) for _ in range(4))),
        "shape [n] (the data's channel count), got f32[m]",
    ),
    (
        "normalization",
        lambda: ops.layer_norm(p(2, n), p(m)),
        "[m] does not match the normalized shape [n]",
    ),
    (
        "indexing",
        lambda: ops.gather(p(n, 3), i64(m, 2), 1, batch_dims=1),
        "x f32[n,3] vs indices i64[m,2]",
    ),
    (
        "shaping",
        lambda: ops.stack([p(n, 2), p(m, 2)], 0),
        "[m, 2] differs from input 0 shape [n, 2]",
    ),
    ("trigonometric", lambda: ops.atan2(p(n), p(m)), "[n] vs [m]"),
    (
        "rnn",
        lambda: ops.rnn_cell(p(n, 4), p(m, 3), p(3, 4), p(3, 3)),
        "[batch=n, hidden_size], got f32[m,3]",
    ),
]


@pytest.mark.parametrize(
    ("build", "names"),
    [pytest.param(b, s, id=f"{f}-{i}") for i, (f, b, s) in enumerate(MISMATCHES)],
)
def test_symbolic_mismatch_is_a_type_error_naming_the_dimensions(build, names):
    with pytest.raises(og.OpTypeError) as error:
        build()
    assert names in str(error.value)


def test_every_op_family_has_a_symbolic_case():
    families = {
        info.name for info in pkgutil.iter_modules(og.ops.__path__) if not info.name.startswith("_")
    }
    covered = {f for f, _, _ in SHAPES} | {f for f, _, _ in MISMATCHES}
    helpers = {"common", "broadcasting", "operators"}  # builder helpers, not op families
    assert families - covered - helpers == set()
