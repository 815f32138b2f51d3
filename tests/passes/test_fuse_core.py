"""fuse_core: each fusion recognised in its spellings, declined where it would be wrong, and
numerics unchanged."""

import math

import numpy as np
import pytest
from pass_helpers import assert_same_numerics, op_names

import opgraph as og
from opgraph import ops
from opgraph.builders.broadcasting import broadcast_to
from opgraph.passes import decompose, fuse_core


def f32(*shape):
    return og.parameter(og.f32, shape)


def fn_of(build, *params):
    return og.Function([build(*params)], list(params))


def const(values, et=og.f32):
    return og.constant(np.asarray(values), et)


def gelu_exact(x):
    return x * 0.5 * (1.0 + ops.erf(x / math.sqrt(2)))


def gelu_tanh(x):
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))
    return (0.5 * x) * (1.0 + ops.tanh(inner))


def layer_norm_by_hand(x, keep_dims=False, reciprocal=False, axis=-1):
    axes = (axis % x.rank,)

    def expand(v):  # keep_dims values broadcast NumPy-style, others along the reduced axes
        return broadcast_to(v, x.shape) if keep_dims else ops.broadcast(v, x.shape, axes)

    mean = ops.reduce_mean(x, axes, keep_dims=keep_dims)
    centered = x - expand(mean)
    variance = ops.reduce_sum(centered * centered, axes, keep_dims=keep_dims) / float(x.shape[axis])
    root = ops.sqrt(variance + 1e-5)
    if reciprocal:
        return centered * expand(1.0 / root)
    return centered / expand(root)


FUSIONS = [
    ("gelu_exact", lambda: fn_of(gelu_exact, f32(2, 3)), ["Gelu"]),
    (
        "gelu_grouped_times_rsqrt2",
        lambda: fn_of(lambda x: 0.5 * (x * (ops.erf(x * math.sqrt(0.5)) + 1.0)), f32(2, 3)),
        ["Gelu"],
    ),
    ("gelu_tanh", lambda: fn_of(gelu_tanh, f32(2, 3)), ["Gelu"]),
    ("gelu_f16_constants", lambda: fn_of(gelu_exact, og.parameter(og.f16, (4,))), ["Gelu"]),
    (
        "gelu_wrong_constant_kept",
        lambda: fn_of(lambda x: x * 0.5 * (1.0 + ops.erf(x / 1.3)), f32(2)),
        [
            "Constant",
            "Broadcast",
            "Mul",
            "Constant",
            "Broadcast",
            "Constant",
            "Broadcast",
            "Div",
            "Erf",
            "Add",
            "Mul",
        ],
    ),
    ("layer_norm_by_hand", lambda: fn_of(layer_norm_by_hand, f32(2, 3, 4)), ["LayerNorm"]),
    (
        "layer_norm_keep_dims",
        lambda: fn_of(lambda x: layer_norm_by_hand(x, keep_dims=True), f32(3, 4)),
        ["LayerNorm"],
    ),
    (
        "layer_norm_reciprocal",
        lambda: fn_of(lambda x: layer_norm_by_hand(x, reciprocal=True), f32(3, 4)),
        ["LayerNorm"],
    ),
    (
        "layer_norm_affine",
        lambda: fn_of(
            lambda x, g, b: (
                layer_norm_by_hand(x) * broadcast_to(g, (2, 3, 4)) + broadcast_to(b, (2, 3, 4))
            ),
            f32(2, 3, 4),
            f32(4),
            f32(4),
        ),
        ["LayerNorm"],
    ),
    (
        "layer_norm_decomposition_refused",
        lambda: decompose(
            fn_of(
                lambda x, g, b: ops.layer_norm(x, g, b, axis=1), f32(2, 3, 4), f32(3, 4), f32(3, 4)
            )
        ),
        ["LayerNorm"],
    ),
    (
        "layer_norm_leading_axis_kept",
        lambda: fn_of(lambda x: layer_norm_by_hand(x, axis=0), f32(4, 3)),
        None,
    ),
    (
        "gemm_bias",
        lambda: fn_of(
            lambda x: (
                ops.dot(x, const(np.ones((3, 4)))) + broadcast_to(const(np.arange(4.0)), (2, 4))
            ),
            f32(2, 3),
        ),
        ["Constant", "Constant", "Gemm"],
    ),
    (
        "gemm_matmul_full_addend",
        lambda: fn_of(
            lambda x, w, c: ops.add(c, ops.matmul(x, w)), f32(2, 3), f32(3, 4), f32(2, 4)
        ),
        ["Gemm"],
    ),
    (
        "gemm_batched_kept",
        lambda: fn_of(
            lambda x, w, c: ops.add(c, ops.matmul(x, w)), f32(5, 2, 3), f32(3, 4), f32(5, 2, 4)
        ),
        ["MatMul", "Add"],
    ),
]


@pytest.mark.parametrize(
    ("build", "expected"), [c[1:] for c in FUSIONS], ids=[c[0] for c in FUSIONS]
)
def test_fusion(build, expected):
    fn = build()
    fused = fuse_core(fn)
    if expected is None:  # not a layer norm over trailing axes: left alone
        assert "LayerNorm" not in op_names(fused)
    else:
        assert op_names(fused) == expected, str(fused)
    f16 = fn.parameters[0].element_type == og.f16
    assert_same_numerics(fn, fused, rtol=2e-2 if f16 else 1e-4, atol=2e-2 if f16 else 1e-5)
    assert fuse_core(fused) is fused
