"""W5: one BERT-base encoder layer (hidden 768, 12 heads, FFN 3072, erf-GELU, post-LN) at
batch 1 x 128 tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.special
import torch
import torch.nn.functional as F

import opgraph as og
from bench.models import Case, _bias, _const
from bench.onnx_builder import OnnxGraph
from opgraph import ops
from opgraph.core.dim import Dim

HIDDEN, HEADS, FFN, TOKENS = 768, 12, 3072, 128
HEAD = HIDDEN // HEADS
EPS = 1e-12


@dataclass
class Weights:
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    bq: np.ndarray
    bk: np.ndarray
    bv: np.ndarray
    bo: np.ndarray
    g1: np.ndarray
    b1: np.ndarray
    w1: np.ndarray
    c1: np.ndarray
    w2: np.ndarray
    c2: np.ndarray
    g2: np.ndarray
    b2: np.ndarray


def _weights() -> Weights:
    rng = np.random.default_rng(5)

    def mat(i: int, o: int) -> np.ndarray:
        return (rng.standard_normal((i, o)) * 0.02).astype(np.float32)

    def vec(n: int, scale: float = 0.02, base: float = 0.0) -> np.ndarray:
        return (base + rng.standard_normal(n) * scale).astype(np.float32)

    return Weights(
        mat(HIDDEN, HIDDEN), mat(HIDDEN, HIDDEN), mat(HIDDEN, HIDDEN), mat(HIDDEN, HIDDEN),
        vec(HIDDEN), vec(HIDDEN), vec(HIDDEN), vec(HIDDEN),
        vec(HIDDEN, 0.1, 1.0), vec(HIDDEN),
        mat(HIDDEN, FFN), vec(FFN), mat(FFN, HIDDEN), vec(HIDDEN),
        vec(HIDDEN, 0.1, 1.0), vec(HIDDEN),
    )  # fmt: skip


def _opgraph(w: Weights, tokens: Dim = TOKENS) -> og.Function:
    """The layer over ``tokens`` tokens (an int, or a symbolic dimension: bench/dynamic.py)."""
    x = og.parameter(og.f32, (1, tokens, HIDDEN), "hidden")
    shape = (1, tokens, HIDDEN)

    def linear(v: og.Output, weight: np.ndarray, bias: np.ndarray) -> og.Output:
        out = (*v.shape[:-1], weight.shape[1])
        return ops.add(ops.matmul(v, _const(weight)), _bias(bias, out))

    def heads(v: og.Output, perm: tuple[int, ...]) -> og.Output:
        return ops.transpose(ops.reshape(v, (1, tokens, HEADS, HEAD)), perm)

    q = heads(linear(x, w.wq, w.bq), (0, 2, 1, 3))
    k = heads(linear(x, w.wk, w.bk), (0, 2, 3, 1))
    v = heads(linear(x, w.wv, w.bv), (0, 2, 1, 3))
    scores = ops.matmul(q, k) * (1.0 / math.sqrt(HEAD))
    context = ops.matmul(ops.softmax(scores, -1), v)
    merged = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), shape)
    attention = linear(merged, w.wo, w.bo)
    h1 = ops.layer_norm(ops.add(attention, x), _const(w.g1), _const(w.b1), -1, EPS)
    inner = ops.gelu(linear(h1, w.w1, w.c1))
    out = ops.layer_norm(
        ops.add(linear(inner, w.w2, w.c2), h1), _const(w.g2), _const(w.b2), -1, EPS
    )
    return og.Function([out], [x], name="bert_layer")


def _onnx(w: Weights, tokens: int = TOKENS) -> OnnxGraph:
    g = OnnxGraph("bert_layer")
    x = g.input("hidden", (1, tokens, HIDDEN))

    def linear(v: str, weight: np.ndarray, bias: np.ndarray) -> str:
        return g.op("Add", g.op("MatMul", v, g.const(weight)), g.const(bias))

    split = g.const(np.array([1, tokens, HEADS, HEAD], np.int64))

    def heads(v: str, perm: list[int]) -> str:
        return g.op("Transpose", g.op("Reshape", v, split), perm=perm)

    q = heads(linear(x, w.wq, w.bq), [0, 2, 1, 3])
    k = heads(linear(x, w.wk, w.bk), [0, 2, 3, 1])
    v = heads(linear(x, w.wv, w.bv), [0, 2, 1, 3])
    scale = g.const(np.array(1.0 / math.sqrt(HEAD), np.float32))
    probs = g.op("Softmax", g.op("Mul", g.op("MatMul", q, k), scale), axis=-1)
    context = g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3])
    merged = g.op("Reshape", context, g.const(np.array([1, tokens, HIDDEN], np.int64)))
    attention = linear(merged, w.wo, w.bo)

    def norm(v: str, gamma: np.ndarray, beta: np.ndarray) -> str:
        return g.op("LayerNormalization", v, g.const(gamma), g.const(beta), axis=-1, epsilon=EPS)

    h1 = norm(g.op("Add", attention, x), w.g1, w.b1)
    f = linear(h1, w.w1, w.c1)
    root2, one, half = (g.const(np.array(c, np.float32)) for c in (math.sqrt(2), 1.0, 0.5))
    gelu = g.op("Mul", g.op("Mul", f, g.op("Add", g.op("Erf", g.op("Div", f, root2)), one)), half)
    out = norm(g.op("Add", linear(gelu, w.w2, w.c2), h1), w.g2, w.b2)
    g.output(out, (1, tokens, HIDDEN))
    return g


def _torch(w: Weights) -> object:
    t = {k: torch.from_numpy(v) for k, v in vars(w).items()}

    def layer(x: torch.Tensor) -> torch.Tensor:
        def heads(v: torch.Tensor) -> torch.Tensor:
            return v.reshape(1, TOKENS, HEADS, HEAD).transpose(1, 2)

        q = heads(x @ t["wq"] + t["bq"])
        k = heads(x @ t["wk"] + t["bk"])
        v = heads(x @ t["wv"] + t["bv"])
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HEAD), -1)
        merged = (probs @ v).transpose(1, 2).reshape(1, TOKENS, HIDDEN)
        h1 = F.layer_norm(merged @ t["wo"] + t["bo"] + x, (HIDDEN,), t["g1"], t["b1"], EPS)
        inner = F.gelu(h1 @ t["w1"] + t["c1"])
        return F.layer_norm(inner @ t["w2"] + t["c2"] + h1, (HIDDEN,), t["g2"], t["b2"], EPS)

    return layer


def _numpy(w: Weights) -> object:
    def norm(v: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
        mean = v.mean(-1, keepdims=True)
        var = ((v - mean) ** 2).mean(-1, keepdims=True)
        return (v - mean) / np.sqrt(var + EPS) * gamma + beta

    def layer(x: np.ndarray) -> np.ndarray:
        def heads(v: np.ndarray) -> np.ndarray:
            return v.reshape(1, TOKENS, HEADS, HEAD).transpose(0, 2, 1, 3)

        q, k, v = (heads(x @ m + b) for m, b in ((w.wq, w.bq), (w.wk, w.bk), (w.wv, w.bv)))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD)
        e = np.exp(s - s.max(-1, keepdims=True))
        merged = ((e / e.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        h1 = norm(merged @ w.wo + w.bo + x, w.g1, w.b1)
        f = h1 @ w.w1 + w.c1
        inner = 0.5 * f * (1 + scipy.special.erf(f / math.sqrt(2)))
        return norm(inner @ w.w2 + w.c2 + h1, w.g2, w.b2)

    return layer


def w5() -> Case:
    w = _weights()
    data = np.random.default_rng(6).standard_normal((1, TOKENS, HIDDEN)).astype(np.float32)
    matmuls = (
        4 * TOKENS * HIDDEN * HIDDEN + 2 * TOKENS * HIDDEN * FFN + 2 * TOKENS * TOKENS * HIDDEN
    )
    return Case(
        "W5 BERT-base layer 1x128",
        "w5",
        _opgraph(w),
        _onnx(w).model(),
        [data],
        _torch(w),  # type: ignore[arg-type]
        _numpy(w),  # type: ignore[arg-type]
        flops=2.0 * matmuls,
        tolerance=2e-3,
    )
