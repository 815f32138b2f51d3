"""``mlp.onnx``: a tiny ONNX classifier for ``opgraph demo`` (deterministic output).

The demo builds it at run time with ``onnx.helper`` (the same bytes every time), so nothing
binary ships and the demo needs no network and no exporter. The model is
``softmax(gelu(layer_norm(x·W1 + b1))·W2 + b2)`` on ``x: f32[4, 16]`` at opset 17 (Gelu is
written as its Erf formula, as exporters do). ``python -m opgraph_examples.onnx_mlp PATH``
writes it to a file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from onnx import ModelProto, TensorProto

INPUT, HIDDEN, CLASSES, BATCH = 16, 24, 5, 4


def build() -> ModelProto:
    """The ModelProto (weights from a fixed seed)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2024)

    def weight(name: str, *shape: int, scale: float = 1.0) -> TensorProto:
        values = (rng.standard_normal(shape) * scale).astype(np.float32)
        return numpy_helper.from_array(values, name)

    initializers = [
        weight("w1", INPUT, HIDDEN, scale=INPUT**-0.5),
        weight("b1", HIDDEN, scale=0.1),
        weight("gamma", HIDDEN, scale=0.1),
        weight("w2", HIDDEN, CLASSES, scale=HIDDEN**-0.5),
        weight("b2", CLASSES, scale=0.1),
        numpy_helper.from_array(np.array(2**-0.5, np.float32), "inv_sqrt2"),
        numpy_helper.from_array(np.array(0.5, np.float32), "half"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="dense1"),
        helper.make_node("LayerNormalization", ["h", "gamma"], ["n"], axis=-1, name="norm"),
        # gelu(n) = 0.5 · n · (1 + erf(n / sqrt(2)))
        helper.make_node("Mul", ["n", "inv_sqrt2"], ["s"]),
        helper.make_node("Erf", ["s"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["n", "e1"], ["ne"]),
        helper.make_node("Mul", ["ne", "half"], ["g"], name="gelu"),
        helper.make_node("MatMul", ["g", "w2"], ["z0"], name="dense2"),
        helper.make_node("Add", ["z0", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "demo_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, INPUT])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [BATCH, CLASSES])],
        initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="opgraph"
    )
    model.ir_version = 8
    return model


def write(path: str | Path) -> Path:
    """Write the model to ``path`` (checked with ``onnx.checker`` first); returns the path."""
    import onnx

    model = build()
    onnx.checker.check_model(model, full_check=True)
    target = Path(path)
    target.write_bytes(model.SerializeToString())
    return target


def main(argv: list[str] | None = None) -> int:
    if not argv or len(argv) != 1:
        print("usage: python -m opgraph_examples.onnx_mlp PATH", file=sys.stderr)
        return 2
    target = write(argv[0])
    print(f"wrote {target} ({target.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
