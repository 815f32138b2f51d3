"""The kinds ``bench/zoo_steps.py`` puts opgraph's steps and the peers' nodes in, so that they
correspond across the runtimes: convolutions by output plane (depthwise apart), the
squeeze-excite parts, attention, products, layer norms with their residual add, activations and
layout nodes the peers run on their own. Pure functions of labels and shapes, apart from the
profiling (which needs onnxruntime and OpenVINO): their tests run wherever the package does."""

from __future__ import annotations

import re
from typing import Any

ACTIVATIONS = ("QuickGelu", "Sigmoid", "HardSigmoid", "HardSwish", "Relu", "Gelu", "Clip")


def _plane(shape: list[int] | tuple[str, ...]) -> str:
    return "x".join(str(d) for d in shape[2:]) or "1"


def step_kind(label: str) -> str:
    """The kind of an opgraph step, from its label (``"<index>: %y = Op[...](...) : f32[...]"``)."""
    body = label.split(": ", 1)[1]
    first = body.split(";")[0]
    shape = re.search(r": \w+\[([\d,]*)\]", first)
    out = tuple(shape.group(1).split(",")) if shape else ()
    ops = re.findall(r"= (\w+)[\[(]", body)
    if ops and ops[0] == "Convolution":
        groups = re.search(r"groups=(\d+)", first)
        if groups and int(groups.group(1)) > 1:
            return f"depthwise {_plane(out)}"
        return "SE small conv" if out[2:] == ("1", "1") else f"conv {_plane(out)}"
    if "Attention" in ops:
        return "attention (QK, softmax, V)"
    if "Dot" in ops or ops[:1] == ["MatMul"]:
        return "matrix product (Gemm)"
    if "Sqrt" in ops and "ReduceSum" in ops:
        return "layer norm (+ residual add)"
    if any(op in ("ReduceSum", "ReduceMean") for op in ops):
        return "SE pool (+ activation)"
    if ops == ["Mul"] or ops == ["Multiply"]:
        return "SE scale"
    return "+".join(sorted(set(ops)))[:40] or "other"


def _scores(op: str, args: dict[str, Any], out: list[int]) -> bool:
    """Whether an onnxruntime node works on attention scores ``[batch, heads, tokens,
    tokens]`` of its own: the NaN guard (``IsNaN``, ``Where``) or a mask added over every
    head (an ``Add`` of a ``[batch, 1, tokens, tokens]`` input)."""
    if len(out) != 4 or out[2] != out[3] or out[1] == 1:
        return False
    if op in ("IsNaN", "Where"):
        return True
    shapes = [next(iter(shape.values())) for shape in args["input_type_shape"]]
    return op == "Add" and any(len(s) == 4 and s[1] == 1 for s in shapes)


def node_kind(op: str, args: dict[str, Any]) -> str:
    """The kind of an onnxruntime node, from its profile record."""
    out = next(iter(args["output_type_shape"][0].values()))
    if op == "Conv":
        weight = next(iter(args["input_type_shape"][1].values()))
        if len(weight) == 4 and weight[1] == 1 and weight[0] > 1 and weight[2] > 1:
            return f"depthwise {_plane(out)}"
        return "SE small conv" if out[2:] == [1, 1] else f"conv {_plane(out)}"
    if op in ACTIVATIONS:
        return "SE small conv" if out[2:] == [1, 1] else "activation (own node)"
    if op in ("ReduceMean", "GlobalAveragePool"):
        return "SE pool (+ activation)"
    if op in ("LayerNormalization", "SkipLayerNormalization") or (op == "Add" and len(out) == 3):
        return "layer norm (+ residual add)"
    if op == "Softmax" or (op in ("MatMul", "FusedMatMul") and len(out) == 4):
        return "attention (QK, softmax, V)"  # per-head products over [batch, heads, ...]
    if _scores(op, args, out):
        return "attention (QK, softmax, V)"
    if op == "Mul":
        return "SE scale" if len(out) == 4 else "scale (own node)"
    if op in ("Gemm", "MatMul", "FusedMatMul"):
        return "matrix product (Gemm)"
    if op in ("Transpose", "Reshape"):
        return "layout (Transpose, Reshape)"
    return op


def openvino_kind(layer: str, inputs: list[list[int]], out: list[int], attention: bool) -> str:
    """The kind of an OpenVINO runtime node from its ``layerType``, input and output shapes;
    ``attention``: an element-wise node on a softmax's output shape (its NaN guard)."""
    if layer in ("Convolution", "GroupConvolution"):
        weight = inputs[1] if len(inputs) > 1 else []
        if layer == "GroupConvolution" or len(weight) == 5:
            return f"depthwise {_plane(out)}"
        return "SE small conv" if out[2:] == [1, 1] else f"conv {_plane(out)}"
    if layer == "Softmax" or attention or (layer == "MatMul" and len(out) == 4):
        return "attention (QK, softmax, V)"
    if layer in ("FullyConnected", "MatMul"):
        return "matrix product (Gemm)"
    if layer == "MVN" or (layer in ("Subgraph", "Eltwise") and len(out) == 3):
        return "layer norm (+ residual add)"
    if layer in ("Reduce", "Pooling") and out[2:] == [1, 1]:
        return "SE pool (+ activation)"
    if layer in ("Transpose", "Reshape", "Reorder", "Concatenation", "Gather"):
        return "layout (Transpose, Reshape)"
    if layer in ("Subgraph", "Eltwise"):
        return "element-wise (own node)"
    return layer
