"""Each ATen converter alone against eager ATen, on every registered opgraph backend.

One table: (overload, arguments). The harness builds a one-node FX graph, converts it (which
also checks the result types against ATen's metadata), runs it and compares with ATen.
"""

import math

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_bridge_helpers import check_op  # noqa: E402

aten = torch.ops.aten
g = torch.Generator().manual_seed(0)


def r(*shape, dtype=torch.float32, low=-2.0, high=2.0):
    return (torch.rand(*shape, generator=g) * (high - low) + low).to(dtype)


def ints(*shape, low=-5, high=6, dtype=torch.int64):
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


def case(op, *args, label, **kwargs):
    return pytest.param(op, args, kwargs, id=label)


UNARY = [
    case(getattr(aten, name).default, r(3, 4, **bounds), label=name)
    for name, bounds in [
        ("abs", {}),
        ("neg", {}),
        ("relu", {}),
        ("ceil", {}),
        ("floor", {}),
        ("round", {}),
        ("trunc", {}),
        ("frac", {}),
        ("sign", {}),
        ("square", {}),
        ("exp", {}),
        ("exp2", {}),
        ("log", {"low": 0.1}),
        ("log2", {"low": 0.1}),
        ("log10", {"low": 0.1}),
        ("sqrt", {"low": 0.0}),
        ("rsqrt", {"low": 0.1}),
        ("reciprocal", {"low": 0.5}),
        ("sigmoid", {}),
        ("tanh", {}),
        ("erf", {}),
        ("sin", {}),
        ("cos", {}),
        ("tan", {}),
        ("asin", {"low": -0.9, "high": 0.9}),
        ("acos", {"low": -0.9, "high": 0.9}),
        ("atan", {}),
        ("sinh", {}),
        ("cosh", {}),
        ("asinh", {}),
        ("acosh", {"low": 1.1}),
        ("atanh", {"low": -0.9, "high": 0.9}),
        ("silu", {}),
        ("mish", {}),
        ("hardsigmoid", {"low": -4, "high": 4}),
        ("hardswish", {"low": -4, "high": 4}),
        ("relu6", {"low": -2, "high": 8}),
        ("isnan", {}),
        ("logical_not", {}),
    ]
]

SPECIAL_UNARY = [
    case(aten.expm1.default, torch.tensor([1e-9, -1e-7, 0.5, -3.0, 20.0, -100.0]), label="expm1"),
    case(aten.log1p.default, torch.tensor([1e-9, -1e-7, 0.5, 3.0, -0.999, 1e10]), label="log1p"),
    case(aten.sqrt.default, ints(5, low=0), label="sqrt-int-to-float"),
    case(aten.isinf.default, torch.tensor([1.0, math.inf, -math.inf, math.nan]), label="isinf"),
    case(aten.isfinite.default, torch.tensor([1.0, math.inf, math.nan]), label="isfinite"),
    case(aten.isinf.default, ints(3), label="isinf-int"),
    case(aten.bitwise_not.default, ints(4), label="bitwise_not-int"),
    case(aten.bitwise_not.default, torch.tensor([True, False]), label="bitwise_not-bool"),
    case(aten.logical_not.default, ints(6, low=-1, high=2), label="logical_not-int"),
    case(aten.gelu.default, r(5), label="gelu"),
    case(aten.gelu.default, r(5), approximate="tanh", label="gelu-tanh"),
    case(aten.leaky_relu.default, r(6), 0.2, label="leaky_relu"),
    case(aten.elu.default, r(6), 1.5, 2.0, 0.5, label="elu-scaled"),
    case(aten.softplus.default, r(6, low=-30, high=30), 2.0, 20.0, label="softplus"),
    case(aten.hardtanh.default, r(6), -0.5, 0.5, label="hardtanh"),
    case(aten.round.decimals, r(6), decimals=2, label="round-decimals"),
    case(aten._prelu_kernel.default, r(2, 3, 4), r(3, 1), label="prelu"),
]

BINARY = [
    case(aten.add.Tensor, r(2, 3), r(3), alpha=2, label="add-broadcast-alpha"),
    case(aten.add.Tensor, ints(2, 3), 2.5, label="add-int-tensor-float-scalar"),
    case(aten.add.Tensor, ints(2, 3, dtype=torch.int32), 7, label="add-int32-int-scalar"),
    case(aten.add.Tensor, r(2, 3), torch.tensor(1.5, dtype=torch.float64), label="add-0dim-f64"),
    case(aten.add.Tensor, ints(3, dtype=torch.int32), torch.tensor(2), label="add-int32-0dim-i64"),
    case(aten.add.Tensor, ints(3), r(3, dtype=torch.float16), label="add-int-f16"),
    case(aten.add.Tensor, torch.tensor([True, False]), 3, label="add-bool-int-scalar"),
    case(aten.sub.Tensor, r(4), r(4), alpha=0.5, label="sub-alpha"),
    case(aten.rsub.Scalar, r(4), 3.0, label="rsub"),
    case(aten.mul.Scalar, ints(4), 3, label="mul-scalar"),
    case(aten.mul.Tensor, r(2, 1), r(1, 3), label="mul-outer-broadcast"),
    case(aten.div.Tensor, ints(4), ints(4, low=1), label="div-int-true"),
    case(aten.div.Tensor_mode, r(6), r(6, low=0.5), rounding_mode="floor", label="div-floor"),
    case(aten.div.Tensor_mode, r(6), r(6, low=0.5), rounding_mode="trunc", label="div-trunc"),
    case(aten.div.Tensor_mode, ints(6), ints(6, low=1), rounding_mode="floor", label="div-ifloor"),
    case(aten.div.Tensor_mode, ints(6), ints(6, low=1), rounding_mode="trunc", label="div-itrunc"),
    case(aten.pow.Tensor_Scalar, r(4), 2, label="pow-scalar"),
    case(aten.pow.Tensor_Scalar, ints(4, low=0), 0.5, label="pow-int-float-exponent"),
    case(aten.pow.Scalar, 2.0, r(4), label="pow-scalar-base"),
    case(aten.pow.Tensor_Tensor, r(4, low=0.1), r(4), label="pow-tensors"),
    case(aten.maximum.default, r(5), r(5), label="maximum"),
    case(aten.minimum.default, ints(5), r(5), label="minimum-mixed"),
    case(aten.remainder.Tensor, r(6), r(6, low=0.5), label="remainder"),
    case(aten.remainder.Scalar, ints(6), 3, label="remainder-int"),
    case(aten.fmod.Tensor, ints(6), ints(6, low=1), label="fmod"),
    case(aten.atan2.default, r(5), r(5), label="atan2"),
    case(aten.eq.Scalar, ints(6), 0, label="eq-scalar"),
    case(aten.ne.Tensor, ints(6), r(6), label="ne-mixed"),
    case(aten.lt.Scalar, ints(6), 0.5, label="lt-float-scalar"),
    case(aten.le.Tensor, r(6), r(6), label="le"),
    case(aten.gt.Tensor, r(2, 3), r(3), label="gt-broadcast"),
    case(aten.ge.Scalar, r(6), -math.inf, label="ge-inf"),
    case(aten.logical_and.default, ints(6, low=0, high=2), r(6), label="logical_and"),
    case(
        aten.logical_or.default,
        torch.tensor([True, False]),
        torch.tensor([False, False]),
        label="logical_or",
    ),
    case(aten.logical_xor.default, ints(4, low=0, high=2), ints(4, low=0, high=2), label="xor"),
    case(aten.bitwise_and.Tensor, ints(4), ints(4), label="bitwise_and"),
    case(aten.bitwise_or.Scalar, ints(4), 6, label="bitwise_or-scalar"),
    case(
        aten.bitwise_xor.Tensor,
        torch.tensor([True, False]),
        torch.tensor([True, True]),
        label="bitwise_xor-bool",
    ),
    case(aten.where.self, r(3, 4) > 0, r(3, 4), r(4), label="where"),
    case(aten.where.self, r(3) > 0, ints(3), r(3, dtype=torch.float64), label="where-promote"),
    case(aten.clamp.default, r(6), -0.5, 0.5, label="clamp"),
    case(aten.clamp.default, ints(6), None, 2, label="clamp-max-only"),
    case(aten.clamp.Tensor, r(2, 3), r(3), None, label="clamp-tensor"),
    case(aten.clamp_min.default, r(6), 0.0, label="clamp_min"),
    case(aten.addcmul.default, r(3), r(3), r(3), value=0.5, label="addcmul"),
    case(aten.addcdiv.default, r(3), r(3), r(3, low=0.5), value=2, label="addcdiv"),
    case(aten.lerp.Scalar, r(4), r(4), 0.3, label="lerp"),
    case(aten.lerp.Tensor, r(4), r(4), r(4, low=0, high=1), label="lerp-tensor"),
]

REDUCTIONS = [
    case(aten.sum.dim_IntList, r(2, 3, 4), [1, -1], True, label="sum-keepdim"),
    case(aten.sum.dim_IntList, r(2, 3), [], label="sum-all-empty-list"),
    case(aten.sum.default, ints(2, 3, dtype=torch.int32), label="sum-int32-to-i64"),
    case(aten.sum.dim_IntList, torch.tensor([True, True, False]), [0], label="sum-bool"),
    case(aten.sum.dim_IntList, r(2, 3), [0], dtype=torch.float64, label="sum-dtype"),
    case(aten.sum.dim_IntList, r(()), [], label="sum-scalar"),
    case(aten.mean.dim, r(2, 3, 4), [0, 2], label="mean"),
    case(aten.mean.default, r(2, 3), label="mean-all"),
    case(aten.amax.default, r(2, 3, 4), [1], label="amax"),
    case(aten.amin.default, r(2, 3), label="amin-all"),
    case(aten.max.default, ints(3, 4), label="max-all"),
    case(aten.max.dim, r(3, 4), 1, label="max-dim"),
    case(aten.min.dim, torch.tensor([[1.0, 0.0, 0.0], [2.0, 2.0, 1.0]]), 1, True, label="min-ties"),
    case(aten.argmax.default, r(3, 4), label="argmax-flat"),
    case(aten.argmin.default, r(3, 4), 0, True, label="argmin-keepdim"),
    case(aten.prod.dim_int, r(3, 4), 1, label="prod"),
    case(aten.prod.default, ints(5, low=1, high=3), label="prod-int"),
    case(aten.var.correction, r(3, 5), [1], correction=1, label="var"),
    case(aten.var.correction, r(3, 5), None, correction=0, keepdim=True, label="var-population"),
    case(aten.std.correction, r(4, 6), [0], label="std"),
    case(aten.var_mean.correction, r(3, 5), [1], correction=1, label="var_mean"),
    case(aten.any.dim, r(3, 4) > 1, 1, label="any"),
    case(aten.all.dims, ints(3, 4, low=0, high=2), [0, 1], label="all-int"),
    case(aten.any.default, torch.tensor([0.0, 0.5]), label="any-float"),
    case(aten.cumsum.default, ints(3, 4, dtype=torch.int32), 1, label="cumsum-int"),
    case(aten.cumsum.default, r(3, 4), -2, label="cumsum"),
    case(aten.logsumexp.default, r(3, 4), [1], label="logsumexp"),
    case(aten.linalg_vector_norm.default, r(3, 4), 2, [1], label="norm2"),
    case(aten.linalg_vector_norm.default, r(3, 4), 1, label="norm1"),
    case(aten.linalg_vector_norm.default, r(3, 4), math.inf, [0], True, label="norm-inf"),
    case(aten.linalg_vector_norm.default, r(3, 4), 3, [1], label="norm3"),
    case(aten.topk.default, r(3, 6), 2, label="topk"),
    case(aten.topk.default, r(3, 6), 3, 0, False, label="topk-smallest"),
    case(aten.sort.default, r(3, 5), label="sort"),
    case(aten.sort.default, r(3, 5), 0, True, label="sort-descending"),
]

SHAPES = [
    case(aten.view.default, r(2, 6), [3, -1], label="view"),
    case(aten._unsafe_view.default, r(2, 3, 2), [6, 2], label="unsafe_view"),
    case(aten.reshape.default, r(4), [2, 2], label="reshape"),
    case(aten.permute.default, r(2, 3, 4), [2, 0, -2], label="permute"),
    case(aten.expand.default, r(3, 1), [2, -1, 4], label="expand"),
    case(aten.slice.Tensor, r(5, 6), 1, -4, 2**62, 2, label="slice"),
    case(aten.slice.Tensor, r(5, 6), 0, 4, 2, label="slice-empty"),
    case(aten.select.int, r(3, 4), 1, -1, label="select"),
    case(aten.squeeze.dims, r(1, 3, 1), [0, 1, 2], label="squeeze-dims"),
    case(aten.squeeze.default, r(1, 3, 1), label="squeeze-all"),
    case(aten.unsqueeze.default, r(2, 3), -1, label="unsqueeze"),
    case(aten.t.default, r(2, 3), label="t"),
    case(aten.transpose.int, r(2, 3, 4), 0, 2, label="transpose"),
    case(aten.clone.default, r(3), label="clone"),
    case(aten._to_copy.default, r(4) * 5, dtype=torch.int32, label="to-int-truncates"),
    case(aten._to_copy.default, ints(4), dtype=torch.bool, label="to-bool"),
    case(aten._to_copy.default, r(4), dtype=torch.bfloat16, label="to-bf16"),
    case(aten.copy.default, r(2, 3), ints(3), label="copy-broadcast-cast"),
    case(aten.cat.default, [r(2, 3), ints(1, 3)], label="cat-promote"),
    case(aten.cat.default, [r(2, 3), r(0), r(2, 2)], 1, label="cat-legacy-empty"),
    case(aten.stack.default, [r(2, 3), r(2, 3)], -1, label="stack"),
    case(aten.split_with_sizes.default, r(7, 2), [2, 5], label="split_with_sizes"),
    case(aten.split.Tensor, r(2, 7), 3, 1, label="split"),
    case(aten.unbind.int, r(3, 2), 1, label="unbind"),
    case(aten.flip.default, r(3, 4), [0, -1], label="flip"),
    case(aten.roll.default, r(3, 4), [1, -5], [0, 1], label="roll"),
    case(aten.roll.default, r(3, 4), [5], label="roll-flat"),
    case(aten.constant_pad_nd.default, r(2, 3, 4), [1, 2, -1, 1], 0.5, label="pad"),
    case(aten.repeat.default, r(2, 3), [2, 1, 2], label="repeat"),
    case(aten.pixel_shuffle.default, r(1, 8, 2, 3), 2, label="pixel_shuffle"),
    case(aten.tril.default, r(2, 4, 5), 1, label="tril"),
    case(aten.triu.default, r(4, 3), -1, label="triu"),
    case(aten.narrow.default, r(5, 3), 0, -3, 2, label="narrow"),
    case(aten.flatten.using_ints, r(2, 3, 4, 5), 1, 2, label="flatten"),
    case(aten.alias.default, r(3), label="alias"),
]

INDEXING = [
    case(aten.index_select.default, r(4, 5), 1, torch.tensor([4, 0, 0]), label="index_select"),
    case(aten.embedding.default, r(10, 4), torch.tensor([[1, 9], [0, 0]]), label="embedding"),
    case(aten.gather.default, r(3, 4), 1, torch.tensor([[0, 3], [1, 1]]), label="gather-smaller"),
    case(aten.index.Tensor, r(4, 5), [torch.tensor([3, 0, -1])], label="index-one"),
    case(
        aten.index.Tensor,
        r(2, 4, 5),
        [None, torch.tensor([[0, 1]]), torch.tensor([2, 4])],
        label="index-adjacent-later",
    ),
    case(
        aten.index.Tensor,
        r(4, 3, 5),
        [torch.tensor([1, 2]), None, torch.tensor([0, 4])],
        label="index-separated",
    ),
    case(
        aten.index_put.default,
        r(4, 3),
        [torch.tensor([0, 2, 0])],
        r(3, 3),
        True,
        label="index_put-accumulate",
    ),
    case(aten.index_put.default, r(3, 4, 5), [None, torch.tensor([1, 3])], r(5), label="index_put"),
    case(
        aten.scatter.src,
        r(3, 4),
        1,
        torch.tensor([[0, 2], [1, 3], [3, 0]]),
        r(3, 3),
        label="scatter",
    ),
    case(aten.scatter.value, r(3, 4), 0, torch.tensor([[0, 2, 1, 0]]), 9.0, label="scatter-value"),
    case(
        aten.scatter_add.default,
        r(3, 4),
        1,
        torch.tensor([[0, 0], [1, 1], [3, 3]]),
        r(3, 2),
        label="scatter_add",
    ),
    case(
        aten.scatter_reduce.two,
        r(3, 4),
        1,
        torch.tensor([[0, 0], [1, 2], [3, 3]]),
        r(3, 2),
        "amax",
        label="scatter_reduce-amax",
    ),
    case(aten.masked_fill.Scalar, r(3, 4), r(4) > 0, -1.0, label="masked_fill"),
    case(aten.slice_scatter.default, r(4, 6), r(4, 2), 1, 1, 5, 2, label="slice_scatter"),
    case(aten.select_scatter.default, r(3, 4), r(3), 1, -1, label="select_scatter"),
]

CREATION = [
    case(aten.full.default, [2, 3], 1.5, label="full"),
    case(aten.full.default, [2], 7, dtype=torch.int32, label="full-int32"),
    case(aten.zeros.default, [3], dtype=torch.bool, label="zeros-bool"),
    case(aten.ones.default, [2, 2], label="ones"),
    case(aten.full_like.default, r(2, 3), -2, label="full_like"),
    case(aten.zeros_like.default, ints(4), label="zeros_like"),
    case(aten.ones_like.default, r(3), dtype=torch.float64, label="ones_like"),
    case(aten.new_zeros.default, r(2), [3, 1], label="new_zeros"),
    case(aten.scalar_tensor.default, 3.5, label="scalar_tensor"),
    case(aten.arange.start_step, 0, 1, 0.1, label="arange-float-step"),
    case(aten.arange.default, 5, label="arange"),
    case(aten.linspace.default, -1, 1, 7, label="linspace"),
    case(aten.eye.default, 3, label="eye"),
]

LINALG = [
    case(aten.mm.default, r(3, 4), r(4, 5), label="mm"),
    case(aten.bmm.default, r(2, 3, 4), r(2, 4, 5), label="bmm"),
    case(aten.addmm.default, r(5), r(3, 4), r(4, 5), label="addmm"),
    case(aten.addmm.default, r(3, 5), r(3, 4), r(4, 5), beta=0.5, alpha=2, label="addmm-scaled"),
    case(aten.baddbmm.default, r(2, 3, 5), r(2, 3, 4), r(2, 4, 5), beta=2, label="baddbmm"),
    case(aten.matmul.default, r(2, 1, 3, 4), r(5, 4, 2), label="matmul-broadcast"),
    case(aten.linear.default, r(2, 3, 4), r(5, 4), r(5), label="linear"),
    case(aten.linear.default, r(3, 4), r(5, 4), label="linear-no-bias"),
    case(aten.dot.default, r(4), r(4), label="dot"),
    case(aten.mv.default, r(3, 4), r(4), label="mv"),
    case(aten.addmv.default, r(3), r(3, 4), r(4), label="addmv"),
]

NN = [
    case(
        aten.convolution.default,
        r(2, 3, 7, 6),
        r(4, 3, 3, 3),
        r(4),
        [2, 1],
        [1, 0],
        [1, 2],
        False,
        [0, 0],
        1,
        label="conv2d",
    ),
    case(
        aten.convolution.default,
        r(1, 4, 9),
        r(4, 2, 3),
        None,
        [1],
        [2],
        [1],
        False,
        [0],
        2,
        label="conv1d-groups",
    ),
    case(
        aten.convolution.default,
        r(1, 4, 5, 5),
        r(4, 3, 3, 3),
        r(3),
        [2, 2],
        [1, 1],
        [1, 1],
        True,
        [1, 1],
        1,
        label="conv-transposed",
    ),
    case(
        aten.max_pool2d_with_indices.default,
        r(2, 3, 7, 7),
        [3, 3],
        [2, 2],
        [1, 1],
        label="max_pool-indices",
    ),
    case(
        aten.max_pool2d_with_indices.default,
        r(1, 2, 6, 6),
        [2, 2],
        [],
        [0, 0],
        [1, 1],
        True,
        label="max_pool-ceil",
    ),
    case(aten.avg_pool2d.default, r(2, 3, 7, 7), [3, 3], [2, 2], [1, 1], label="avg_pool"),
    case(
        aten.avg_pool2d.default,
        r(1, 2, 7, 7),
        [3, 3],
        [2, 2],
        [1, 1],
        True,
        False,
        label="avg_pool-ceil-exclude-pad",
    ),
    case(aten._adaptive_avg_pool2d.default, r(2, 3, 7, 5), [3, 2], label="adaptive_avg_pool"),
    case(
        aten._native_batch_norm_legit_no_training.default,
        r(2, 3, 4, 4),
        r(3),
        r(3),
        r(3),
        r(3, low=0.5),
        0.1,
        1e-5,
        label="batch_norm",
    ),
    case(aten.native_layer_norm.default, r(2, 3, 8), [8], r(8), r(8), 1e-5, label="layer_norm"),
    case(
        aten.native_layer_norm.default,
        r(2, 3, 4),
        [3, 4],
        None,
        None,
        1e-6,
        label="layer_norm-no-affine",
    ),
    case(
        aten.native_group_norm.default,
        r(2, 6, 3, 3),
        r(6),
        r(6),
        2,
        6,
        9,
        3,
        1e-5,
        label="group_norm",
    ),
    case(aten._softmax.default, r(3, 5), 1, False, label="softmax"),
    case(aten._log_softmax.default, r(3, 5), 0, False, label="log_softmax"),
    case(aten.upsample_nearest2d.vec, r(1, 2, 3, 4), [6, 8], None, label="upsample_nearest"),
    case(aten.upsample_nearest2d.vec, r(1, 2, 3, 4), None, [2.0, 1.5], label="upsample_scale"),
    case(aten.upsample_bilinear2d.vec, r(1, 2, 3, 4), [5, 7], False, None, label="bilinear"),
    case(aten.upsample_bilinear2d.vec, r(1, 2, 3, 4), [5, 7], True, None, label="bilinear-ac"),
]


@pytest.mark.parametrize(
    ("op", "args", "kwargs"),
    UNARY + SPECIAL_UNARY + BINARY + REDUCTIONS + SHAPES + INDEXING + CREATION + LINALG + NN,
)
def test_converter_matches_aten(backend, op, args, kwargs):
    check_op(backend, op, *args, **kwargs)


def _attention_weights(embed, heads):
    return dict(
        qkv_weight=r(3 * embed, embed, low=-0.5, high=0.5),
        qkv_bias=r(3 * embed),
        proj_weight=r(embed, embed, low=-0.5, high=0.5),
        proj_bias=r(embed),
    )


@pytest.mark.parametrize("need_weights", [False, True])
def test_native_multi_head_attention(backend, need_weights):
    x, w = r(2, 5, 8), _attention_weights(8, 2)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    args = (x, x, x, 8, 2, w["qkv_weight"], w["qkv_bias"], w["proj_weight"], w["proj_bias"])
    check_op(
        backend, aten._native_multi_head_attention.default, *args, padding, need_weights, True, 1
    )


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer_fast_path(backend, norm_first):
    x, w = r(2, 4, 8), _attention_weights(8, 2)
    args = (
        x,
        8,
        2,
        w["qkv_weight"],
        w["qkv_bias"],
        w["proj_weight"],
        w["proj_bias"],
        True,
        norm_first,
        1e-5,
        r(8),
        r(8),
        r(8),
        r(8),
        r(16, 8),
        r(16),
        r(8, 16),
        r(8),
    )
    check_op(backend, aten._transformer_encoder_layer_fwd.default, *args, rtol=1e-4, atol=1e-5)
