"""PyTorch's fused inference fast paths, which no decomposition breaks up.

``nn.TransformerEncoderLayer`` and ``nn.MultiheadAttention`` (batch-first, evaluation, grad
mode off) call ``aten._transformer_encoder_layer_fwd`` and ``aten._native_multi_head_attention``.
Both are composed here from opgraph ops following ATen's ``transformer.cpp`` and
``attention.cpp``: queries are scaled by ``1/sqrt(head_dim)`` before the product, boolean masks
mark positions to ignore (``mask_type`` 0: ``[T, T]``, 1: key padding ``[B, T]``, 2:
``[B, H, T, T]``) and a fully masked row gives zeros.
"""

from __future__ import annotations

import math

from opgraph import ops
from opgraph.core.node import Output
from opgraph.frontends.torch.context import NodeContext, fill
from opgraph.frontends.torch.converters.common import broadcast_like, overloads, scale
from opgraph.frontends.torch.converters.shape import reshape
from opgraph.frontends.torch.registry import aten_op


def linear(x: Output, weight: Output, bias: Output | None) -> Output:
    """``x @ weight.T + bias`` over the last axis of ``x``."""
    y = ops.matmul(x, ops.transpose(weight, [1, 0]))
    return y if bias is None else ops.add(y, broadcast_like(bias, y.shape))


def _heads(x: Output, heads: int) -> Output:
    """``[B, T, E]`` → ``[B, H, T, E/H]``."""
    batch, length, embed = x.shape
    return ops.transpose(reshape(x, [batch, length, heads, embed // heads]), [0, 2, 1, 3])


def _mask(mask: Output, mask_type: int | None, scores: Output) -> Output:
    """The boolean "ignore" mask broadcast to the ``[B, H, Tq, Tk]`` scores."""
    batch, _, queries, keys = scores.shape
    if mask_type == 1 or (mask_type is None and mask.shape == (batch, keys)):
        mask = reshape(mask, [batch, 1, 1, keys])
    elif mask.rank == 2:
        mask = reshape(mask, [1, 1, queries, keys])
    if not mask.element_type.is_boolean:
        mask = ops.not_equal(mask, fill(0, mask.element_type, mask.shape))
    return broadcast_like(mask, scores.shape)


def masked_softmax(scores: Output, mask: Output | None, mask_type: int | None) -> Output:
    """Softmax over the last axis with masked positions excluded (zeros for a fully masked
    row, as ATen's ``_masked_softmax``)."""
    if mask is None:
        return ops.softmax(scores, -1)
    ignore = _mask(mask, mask_type, scores)
    shape, et = scores.shape, scores.element_type
    masked = ops.select(ignore, fill(-math.inf, et, shape), scores)
    probabilities = ops.softmax(masked, -1)
    kept = ops.reduce_any(ops.logical_not(ignore), (3,), keep_dims=True)
    return ops.select(broadcast_like(kept, shape), probabilities, fill(0, et, shape))


def attention(
    query: Output,
    key: Output,
    value: Output,
    heads: int,
    qkv: tuple[Output, Output],
    projection: tuple[Output, Output],
    mask: tuple[Output | None, int | None],
) -> tuple[Output, Output]:
    """ATen's native multi-head attention; returns (output, per-head weights)."""
    embed = query.shape[-1]
    weights = ops.split(qkv[0], 0, [embed] * 3)
    biases = ops.split(qkv[1], 0, [embed] * 3)
    q, k, v = (
        _heads(linear(x, w, b), heads)
        for x, w, b in zip((query, key, value), weights, biases, strict=True)
    )
    q = scale(q, 1 / math.sqrt(embed // heads))
    scores = ops.matmul(q, ops.transpose(k, [0, 1, 3, 2]))
    probabilities = masked_softmax(scores, *mask)
    context = ops.transpose(ops.matmul(probabilities, v), [0, 2, 1, 3])
    merged = reshape(context, [query.shape[0], query.shape[1], embed])
    return linear(merged, *projection), probabilities


@aten_op(*overloads("_native_multi_head_attention.default"))
def _native_multi_head_attention(ctx: NodeContext) -> tuple[Output, Output | None]:
    query = ctx.tensor("query")
    if query.rank != 3:
        raise ctx.fail(f"only batched [B, T, E] input is supported, got {query.type}")
    out, probabilities = attention(
        query,
        ctx.tensor("key"),
        ctx.tensor("value"),
        ctx.integer("num_head"),
        (ctx.tensor("qkv_weight"), ctx.tensor("qkv_bias")),
        (ctx.tensor("proj_weight"), ctx.tensor("proj_bias")),
        (ctx.optional_tensor("mask"), ctx["mask_type"]),
    )
    if not ctx["need_weights"]:
        return out, None  # ATen returns an undefined tensor
    if ctx["average_attn_weights"]:
        probabilities = ops.reduce_mean(probabilities, (1,))
    return out, probabilities


def _layer_norm(x: Output, weight: Output, bias: Output, eps: float) -> Output:
    return ops.layer_norm(x, weight, bias, axis=-1, epsilon=eps)


@aten_op(*overloads("_transformer_encoder_layer_fwd.default"))
def _transformer_encoder_layer(ctx: NodeContext) -> Output:
    """Self-attention and feed-forward blocks with residuals, post- or pre-norm."""
    src, eps, norm_first = ctx.tensor("src"), float(ctx["eps"]), bool(ctx["norm_first"])
    if src.rank != 3:
        raise ctx.fail(f"only batched [B, T, E] input is supported, got {src.type}")
    norm1 = (ctx.tensor("norm_weight_1"), ctx.tensor("norm_bias_1"))
    norm2 = (ctx.tensor("norm_weight_2"), ctx.tensor("norm_bias_2"))
    x = _layer_norm(src, *norm1, eps) if norm_first else src
    attended, _ = attention(
        x,
        x,
        x,
        ctx.integer("num_heads"),
        (ctx.tensor("qkv_weight"), ctx.tensor("qkv_bias")),
        (ctx.tensor("proj_weight"), ctx.tensor("proj_bias")),
        (ctx.optional_tensor("mask"), ctx["mask_type"]),
    )
    x = ops.add(attended, src)
    if not norm_first:
        x = _layer_norm(x, *norm1, eps)
    residual = x
    if norm_first:
        x = _layer_norm(x, *norm2, eps)
    hidden = linear(x, ctx.tensor("ffn_weight_1"), ctx.tensor("ffn_bias_1"))
    hidden = ops.gelu(hidden) if ctx["use_gelu"] else ops.relu(hidden)
    x = ops.add(linear(hidden, ctx.tensor("ffn_weight_2"), ctx.tensor("ffn_bias_2")), residual)
    return x if norm_first else _layer_norm(x, *norm2, eps)
