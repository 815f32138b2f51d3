"""``bench/zoo_steps.py`` (its kinds: ``bench/step_kinds.py``) groups opgraph's steps and onnxruntime's and OpenVINO's nodes into
kinds that correspond: the transformer kinds (fused attention against the peers' per-head
MatMul and Softmax nodes with their NaN guards, products, layer norms with their residual add,
layout nodes) next to the convolution kinds it had."""

from __future__ import annotations

import pytest

from bench.step_kinds import node_kind, openvino_kind, step_kind


@pytest.mark.parametrize(
    ("label", "kind"),
    [
        ("6: %65 = Attention[scale=1.0, divide=False](%55, %60, %64) : f32[1,1500,6,64]",
         "attention (QK, softmax, V)"),
        ("4: %57 = MatMul(%48, %56) : f32[1,1500,384]", "matrix product (Gemm)"),
        ("9: %83 = MatMul(%81, %82) : f32[1,1500,1536]; epilogue: %92 = Erf(%91) : "
         "f32[1,1500,1536]", "matrix product (Gemm)"),
        ("2: %30 = Add(%27, %29) : f32[1,1500,384]; %31 = ReduceSum[axes=(2,)](%30) : "
         "f32[1,1500]; %45 = Sqrt(%44) : f32[1,1500]", "layer norm (+ residual add)"),
        ("1: %15 = Convolution[strides=(2,), groups=1](%13, %14) : f32[1,384,1500]",
         "conv 1500"),
        ("7: %9 = ReduceMean[axes=(2, 3)](%8) : f32[1,96,1,1]", "SE pool (+ activation)"),
    ],
)  # fmt: skip
def test_step_kinds(label: str, kind: str) -> None:
    assert step_kind(label) == kind


def _node(inputs: list[list[int]], output: list[int]) -> dict[str, object]:
    return {
        "input_type_shape": [{"float": shape} for shape in inputs],
        "output_type_shape": [{"float": output}],
    }


@pytest.mark.parametrize(
    ("op", "args", "kind"),
    [
        ("MatMul", _node([[1, 6, 1500, 64], [1, 6, 64, 1500]], [1, 6, 1500, 1500]),
         "attention (QK, softmax, V)"),
        ("Softmax", _node([[1, 6, 1500, 1500]], [1, 6, 1500, 1500]),
         "attention (QK, softmax, V)"),
        ("MatMul", _node([[1, 1500, 384], [384, 1536]], [1, 1500, 1536]),
         "matrix product (Gemm)"),
        ("SkipLayerNormalization", _node([[1, 1500, 384]], [1, 1500, 384]),
         "layer norm (+ residual add)"),
        ("Add", _node([[1, 1500, 384], [1, 1500, 384]], [1, 1500, 384]),
         "layer norm (+ residual add)"),
        ("Transpose", _node([[1, 1500, 6, 64]], [1, 6, 1500, 64]),
         "layout (Transpose, Reshape)"),
        ("Mul", _node([[1, 1500, 384], [1]], [1, 1500, 384]), "scale (own node)"),
        ("Mul", _node([[1, 96, 56, 56], [1, 96, 1, 1]], [1, 96, 56, 56]), "SE scale"),
        ("Conv", _node([[1, 96, 56, 56], [96, 1, 3, 3]], [1, 96, 56, 56]), "depthwise 56x56"),
        ("Where", _node([[1, 12, 197, 197], [], [1, 12, 197, 197]], [1, 12, 197, 197]),
         "attention (QK, softmax, V)"),
        ("Add", _node([[1, 12, 197, 197], [1, 1, 197, 197]], [1, 12, 197, 197]),
         "attention (QK, softmax, V)"),
        ("Add", _node([[1, 64, 56, 56], [1, 64, 56, 56]], [1, 64, 56, 56]), "Add"),
    ],
)  # fmt: skip
def test_node_kinds(op: str, args: dict[str, object], kind: str) -> None:
    assert node_kind(op, args) == kind


@pytest.mark.parametrize(
    ("layer", "inputs", "out", "near_softmax", "kind"),
    [
        ("FullyConnected", [[1, 197, 768], [3072, 768], [0]], [1, 197, 3072], False,
         "matrix product (Gemm)"),
        ("MatMul", [[1, 12, 197, 64], [1, 12, 64, 197]], [1, 12, 197, 197], False,
         "attention (QK, softmax, V)"),
        ("Subgraph", [[1, 12, 197, 197], [1, 12, 197, 197]], [1, 12, 197, 197], True,
         "attention (QK, softmax, V)"),
        ("MVN", [[1, 197, 768], [1]], [1, 197, 768], False, "layer norm (+ residual add)"),
        ("Subgraph", [[1, 197, 768], [1, 197, 768]], [1, 197, 768], False,
         "layer norm (+ residual add)"),
        ("Convolution", [[1, 64, 56, 56], [256, 64, 1, 1], [256]], [1, 256, 56, 56], False,
         "conv 56x56"),
        ("GroupConvolution", [[1, 96, 56, 56], [96, 1, 1, 3, 3]], [1, 96, 56, 56], False,
         "depthwise 56x56"),
        ("Reduce", [[1, 2048, 7, 7], [2]], [1, 2048, 1, 1], False, "SE pool (+ activation)"),
        ("Reorder", [[1, 3, 224, 224]], [1, 3, 224, 224], False, "layout (Transpose, Reshape)"),
        ("Eltwise", [[1, 64, 56, 56]], [1, 64, 56, 56], False, "element-wise (own node)"),
    ],
)  # fmt: skip
def test_openvino_kinds(
    layer: str, inputs: list[list[int]], out: list[int], near_softmax: bool, kind: str
) -> None:
    assert openvino_kind(layer, inputs, out, near_softmax) == kind
