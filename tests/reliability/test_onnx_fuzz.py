"""Fuzzing ONNX import: structural mutations of a valid model and mutated bytes.

Two promises are checked (docs/onnx.md, "Strict import"):

* every failure of ``import_model`` is an ``OpgraphError`` (in practice a ``ConversionError``):
  no other exception type escapes, whatever the bytes or the structure; a model that imports is
  compiled on INTERPRETER and, when its values are small, run on seeded random inputs, and
  those stages too fail only with an ``OpgraphError``;
* every structural mutation that onnxruntime rejects at session creation is rejected by
  ``import_model`` too, except the differences listed in docs/onnx.md (``_JUSTIFIED``).

The mutator is seeded: case ``i`` is always the same model. ``python tools/fuzz.py -k onnx``
runs ten times more cases; ``-s`` prints the counts.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from fuzzing import random_inputs, small  # noqa: E402
from onnx import AttributeProto, TensorProto, helper, numpy_helper  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.onnx import import_model  # noqa: E402

# Keep mutated models small: no dimension above this, so no case can ask for huge work.
MAX_DIM = 8
OP_TYPES = [
    "Relu", "Neg", "Add", "Mul", "MatMul", "Gemm", "Softmax", "Transpose", "Concat",
    "ReduceSum", "ReduceMean", "LeakyRelu", "Cast", "Identity", "Reshape", "Flatten",
    "Sigmoid", "Tanh", "Sum", "Where", "Squeeze", "Unsqueeze", "Constant", "NoSuchOp",
]  # fmt: skip
ELEM_TYPES = [
    TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT32,
    TensorProto.BOOL, TensorProto.UINT8, TensorProto.FLOAT16, TensorProto.STRING,
    TensorProto.UNDEFINED, 77,
]  # fmt: skip


def base_model() -> Any:
    """A valid model with initializers, a Constant node and int, ints and float attributes."""
    rng = np.random.default_rng(0)
    vi = helper.make_tensor_value_info
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 6)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b1"),
        numpy_helper.from_array(rng.standard_normal((6, 3)).astype(np.float32), "w2"),
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
    ]
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "scale_value")
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="gemm", transB=0, alpha=1.0),
        helper.make_node("LeakyRelu", ["h"], ["r"], name="act", alpha=0.1),
        helper.make_node("MatMul", ["r", "w2"], ["z"], name="mm"),
        helper.make_node("Constant", [], ["scale"], name="const", value=scale),
        helper.make_node("Mul", ["z", "scale"], ["zs"], name="mul"),
        helper.make_node("Softmax", ["zs"], ["y"], name="softmax", axis=-1),
        helper.make_node("ReduceSum", ["zs", "axes"], ["s"], name="sum", keepdims=0),
        helper.make_node("Transpose", ["y"], ["t"], name="transpose", perm=[1, 0]),
        helper.make_node("Cast", ["s"], ["c"], name="cast", to=TensorProto.DOUBLE),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [vi("x", TensorProto.FLOAT, [2, 4])],
        [vi("t", TensorProto.FLOAT, [3, 2]), vi("c", TensorProto.DOUBLE, [2])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


# ------------------------------------------------------------------------------- the mutator


def _names(model: Any) -> list[str]:
    g = model.graph
    values = [i.name for i in g.input] + [t.name for t in g.initializer]
    return values + [o for n in g.node for o in n.output] + ["", "nowhere"]


def _node(model: Any, rng: random.Random) -> Any:
    return rng.choice(model.graph.node) if model.graph.node else None


def _value_info(model: Any, rng: random.Random) -> Any:
    infos = list(model.graph.input) + list(model.graph.output)
    return rng.choice(infos)


def m_op_type(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    node.op_type = rng.choice(OP_TYPES)
    return f"op_type of {node.name} -> {node.op_type}"


def m_drop_node(model: Any, rng: random.Random) -> str:
    index = rng.randrange(len(model.graph.node))
    name = model.graph.node[index].name
    del model.graph.node[index]
    return f"drop node {name}"


def m_duplicate_node(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    model.graph.node.append(node)
    return f"duplicate node {node.name}"


def m_swap_nodes(model: Any, rng: random.Random) -> str:
    nodes = list(model.graph.node)
    i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
    nodes[i], nodes[j] = nodes[j], nodes[i]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return f"swap nodes {i} and {j}"


def m_add_input(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    node.input.append(rng.choice(_names(model)))
    return f"extra input {node.input[-1]!r} on {node.name}"


def m_drop_input(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    if node.input:
        del node.input[rng.randrange(len(node.input))]
    return f"drop an input of {node.name}"


def m_rewire_input(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    if not node.input:
        return m_add_input(model, rng)
    index = rng.randrange(len(node.input))
    node.input[index] = rng.choice(_names(model))
    return f"input {index} of {node.name} -> {node.input[index]!r}"


def m_outputs(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    choice = rng.randrange(3)
    if choice == 0:
        node.output.append(rng.choice(["extra", "", "x", "h"]))
    elif choice == 1 and node.output:
        node.output[0] = rng.choice(_names(model))
    elif node.output:
        del node.output[-1]
    return f"outputs of {node.name} -> {list(node.output)}"


def _random_attribute(name: str, rng: random.Random) -> Any:
    kind = rng.randrange(6)
    if kind == 0:
        return helper.make_attribute(name, rng.randint(-3, 3))
    if kind == 1:
        return helper.make_attribute(name, rng.uniform(-2, 2))
    if kind == 2:
        return helper.make_attribute(name, rng.choice(["0", "abc", ""]))
    if kind == 3:
        return helper.make_attribute(name, [rng.randint(-2, 2) for _ in range(rng.randint(1, 3))])
    if kind == 4:
        return helper.make_attribute(name, [rng.uniform(-1, 1) for _ in range(2)])
    return helper.make_attribute(name, numpy_helper.from_array(np.ones(2, np.float32)))


def m_attribute(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    choice = rng.randrange(5)
    if choice == 0 or not node.attribute:  # a new attribute: a known one's misspelling or junk
        known = ["axis", "keepdims", "perm", "alpha", "to", "transA", "value", "beta"]
        name = rng.choice(known)
        if rng.random() < 0.5:
            name = name[:-1] + name[-1].upper()
        node.attribute.append(_random_attribute(name, rng))
        return f"attribute {name} on {node.name}"
    index = rng.randrange(len(node.attribute))
    old = node.attribute[index]
    if choice == 1:
        del node.attribute[index]
        return f"drop attribute {old.name} of {node.name}"
    if choice == 2:
        node.attribute.append(old)
        return f"duplicate attribute {old.name} of {node.name}"
    if choice == 3:
        node.attribute[index].CopyFrom(_random_attribute(old.name, rng))
        return f"retype attribute {old.name} of {node.name}"
    if old.type == AttributeProto.INT:
        old.i = rng.choice([-100, -3, -2, -1, 0, 1, 2, 3, 100, 2**40])
    elif old.type == AttributeProto.INTS and old.ints:
        old.ints[rng.randrange(len(old.ints))] = rng.randint(-3, 3)
    elif old.type == AttributeProto.FLOAT:
        old.f = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e30])
    return f"value of attribute {old.name} of {node.name}"


def m_value_info(model: Any, rng: random.Random) -> str:
    info = _value_info(model, rng)
    tensor_type = info.type.tensor_type
    choice = rng.randrange(6)
    if choice == 0:
        tensor_type.elem_type = rng.choice(ELEM_TYPES)
    elif choice == 1 and tensor_type.shape.dim:
        tensor_type.shape.dim[rng.randrange(len(tensor_type.shape.dim))].dim_value = rng.randint(
            -2, MAX_DIM
        )
    elif choice == 2:
        tensor_type.shape.dim.add().dim_value = rng.randint(1, 3)
    elif choice == 3 and tensor_type.shape.dim:
        del tensor_type.shape.dim[-1]
    elif choice == 4 and tensor_type.shape.dim:
        tensor_type.shape.dim[0].dim_param = "batch"
    else:
        info.name = rng.choice(_names(model))
    return f"type of {info.name}: {rng.choice('abc')}{choice}"


def m_graph_values(model: Any, rng: random.Random) -> str:
    g = model.graph
    choice = rng.randrange(4)
    if choice == 0 and g.output:
        g.output.append(g.output[rng.randrange(len(g.output))])
        return "duplicate a graph output"
    if choice == 1 and g.output:
        del g.output[rng.randrange(len(g.output))]
        return "drop a graph output"
    if choice == 2:
        g.input.append(helper.make_tensor_value_info(rng.choice(_names(model)), 1, [2]))
        return "add a graph input"
    if g.input:
        del g.input[rng.randrange(len(g.input))]
    return "drop a graph input"


def m_initializer(model: Any, rng: random.Random) -> str:
    g = model.graph
    tensor = g.initializer[rng.randrange(len(g.initializer))]
    choice = rng.randrange(5)
    if choice == 0:
        tensor.dims.append(rng.randint(0, 3))
    elif choice == 1:
        tensor.raw_data = tensor.raw_data[: rng.randrange(len(tensor.raw_data) + 1)]
    elif choice == 2:
        tensor.data_type = rng.choice(ELEM_TYPES)
    elif choice == 3:
        g.initializer.append(tensor)
    else:
        tensor.name = rng.choice(_names(model))
    return f"initializer {tensor.name} change {choice}"


def m_opset(model: Any, rng: random.Random) -> str:
    choice = rng.randrange(4)
    if choice == 0:
        model.opset_import[0].version = rng.choice([1, 5, 7, 9, 11, 13, 18, 21, 23, 30, 99])
    elif choice == 1:
        model.opset_import[0].domain = rng.choice(["ai.onnx.ml", "com.example", "ai.onnx"])
    elif choice == 2:
        model.ir_version = rng.choice([0, 1, 3, 7, 10, 99])
    else:
        model.opset_import.append(helper.make_opsetid(rng.choice(["", "ai.onnx.ml"]), 99))
    return f"opset/ir change {choice}"


def m_domain(model: Any, rng: random.Random) -> str:
    node = _node(model, rng)
    node.domain = rng.choice(["ai.onnx.ml", "com.example", "ai.onnx", "com.microsoft"])
    return f"domain of {node.name} -> {node.domain}"


def m_no_graph(model: Any, rng: random.Random) -> str:
    if rng.random() < 0.5:
        model.ClearField("graph")
        return "no graph"
    model.graph.name = ""
    return "empty graph name"


MUTATIONS: list[tuple[Callable[[Any, random.Random], str], int]] = [
    (m_op_type, 3), (m_drop_node, 2), (m_duplicate_node, 1), (m_swap_nodes, 2),
    (m_add_input, 2), (m_drop_input, 2), (m_rewire_input, 3), (m_outputs, 2),
    (m_attribute, 6), (m_value_info, 4), (m_graph_values, 2), (m_initializer, 3),
    (m_opset, 2), (m_domain, 1), (m_no_graph, 1),
]  # fmt: skip


def mutant(seed: int) -> tuple[Any, str]:
    """Case ``seed``: the base model with one to three structural mutations."""
    rng = random.Random(seed)
    model = base_model()
    steps = []
    functions, weights = zip(*MUTATIONS, strict=True)
    for _ in range(rng.choice([1, 1, 2, 3])):
        if not model.HasField("graph") or not model.graph.node:
            break
        mutate = rng.choices(functions, weights)[0]
        steps.append(mutate(model, rng))
    return model, "; ".join(steps)


def mutated_bytes(seed: int, data: bytes) -> bytes:
    """Case ``seed``: ``data`` with bytes flipped, inserted, deleted or truncated."""
    rng = random.Random(seed)
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        choice = rng.randrange(4)
        position = rng.randrange(len(buffer)) if buffer else 0
        if choice == 0 and buffer:
            buffer[position] = rng.randrange(256)
        elif choice == 1:
            buffer[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif choice == 2 and buffer:
            del buffer[position : position + rng.randint(1, 4)]
        else:
            buffer = buffer[: position + 1]
    return bytes(buffer)


# ----------------------------------------------------------------------------------- the tests


RUN_ELEMENTS = 1 << 16  # run an imported graph only when all its values together are this small


def outcome(data: bytes, seed: int) -> str:
    """Import ``data``, compile what imports on INTERPRETER and run it on random inputs when
    small; the stage it stopped at. Any exception but an OpgraphError propagates."""
    stage = "import"
    try:
        fn = import_model(data)
        stage = "compile"
        executable = og.backend("INTERPRETER").compile(fn)
        if not small(fn, RUN_ELEMENTS):
            return "compiled"
        stage = "run"
        executable(*random_inputs(fn, np.random.default_rng(seed)))
        return "ran"
    except og.OpgraphError:
        return f"refused at {stage}"


def _onnxruntime_error(ort: Any, data: bytes) -> str | None:
    try:
        ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own exception classes
        return str(error)
    return None


def test_structural_mutations_fail_only_with_opgraph_errors(fuzz_cases):
    counts: Counter[str] = Counter()
    for seed in range(fuzz_cases(300)):
        model, what = mutant(seed)
        try:
            counts[outcome(model.SerializeToString(), seed)] += 1
        except Exception as error:
            pytest.fail(f"case {seed} ({what}) raised {type(error).__name__}: {error}")
    print(f"structural mutations: {dict(counts)}")
    assert counts["refused at import"] and counts["ran"], f"the mutator lost an outcome: {counts}"


def test_mutated_bytes_fail_only_with_opgraph_errors(fuzz_cases):
    data = base_model().SerializeToString()
    counts: Counter[str] = Counter()
    for seed in range(fuzz_cases(300)):
        mutated = mutated_bytes(seed, data)
        try:
            counts[outcome(mutated, seed)] += 1
        except Exception as error:
            pytest.fail(f"byte case {seed} raised {type(error).__name__}: {error}")
    print(f"mutated bytes: {dict(counts)}")
    assert counts["refused at import"], "no mutated model was refused"


def test_every_model_onnxruntime_rejects_is_rejected(fuzz_cases):
    """docs/onnx.md lists the differences; at present there are none in this corpus."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    ort.set_default_logger_severity(4)  # its lenient-merge warnings would flood the log
    counts: Counter[tuple[bool, bool]] = Counter()
    accepted: list[str] = []
    for seed in range(fuzz_cases(300)):
        model, what = mutant(seed)
        data = model.SerializeToString()
        ort_error = _onnxruntime_error(ort, data)
        imported = outcome(data, seed) != "refused at import"
        counts[(ort_error is None, imported)] += 1
        if ort_error is not None and imported:
            accepted.append(f"case {seed} ({what}): onnxruntime says {ort_error[:160]}")
    print(
        "onnxruntime accepts/opgraph accepts: "
        + ", ".join(f"{a}/{b}: {n}" for (a, b), n in sorted(counts.items()))
    )
    assert not accepted, f"{len(accepted)} models onnxruntime rejects import:\n" + "\n".join(
        accepted[:20]
    )
