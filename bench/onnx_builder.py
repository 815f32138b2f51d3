"""A small helper over ``onnx.helper`` for writing the benchmark models by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class OnnxGraph:
    """Collects nodes, initializers, inputs and outputs; names values ``t0``, ``t1``…"""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"t{self.count}"

    def input(self, name: str, shape: tuple[int, ...], dtype: Any = np.float32) -> str:
        elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        self.inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
        return name

    def const(self, value: np.ndarray) -> str:
        name = f"c{len(self.initializers)}"
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        out = self.fresh()
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attributes))
        return out

    def output(self, value: str, shape: tuple[int, ...] | None = None) -> None:
        self.outputs.append(helper.make_tensor_value_info(value, TensorProto.FLOAT, shape))

    def model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, self.initializers
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model
