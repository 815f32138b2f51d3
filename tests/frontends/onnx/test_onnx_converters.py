"""Converters across op version histories, checked against onnx's ReferenceEvaluator, plus the
registry, the function-body fallback and control flow."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.core.errors import RegistryError  # noqa: E402
from opgraph.frontends.onnx import import_model, onnx_op  # noqa: E402
from opgraph.frontends.onnx.registry import lookup  # noqa: E402

F = TensorProto.FLOAT
I64 = TensorProto.INT64
RNG = np.random.default_rng(7)


def make(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(model, *arrays, atol=1e-6, expected=None):
    """opgraph (INTERPRETER) agrees with ``expected(*arrays)`` or onnx's reference."""
    names = [i.name for i in model.graph.input]
    if expected is not None:
        want = [expected(*arrays)]
    else:
        want = ReferenceEvaluator(model).run(None, dict(zip(names, arrays, strict=True)))
    fn = import_model(model)
    got = og.backend("INTERPRETER").compile(fn)(*arrays)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)
    return fn


def x(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _softmax_2d(a):
    flat = a.reshape(a.shape[0], -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).reshape(a.shape)


# Semantics onnx's ReferenceEvaluator does not implement (it runs the newest version's):
# legacy broadcasting, Softmax-11's 2-D coercion, Resize-10.
EXPECTED = {
    "add_legacy_broadcast_axis": lambda a, b: a + b[None, :, None],
    "softmax_v11_coerces_to_2d": _softmax_2d,
    "resize_v10_nearest": lambda a: a[:, :, [0, 0, 1, 1]][:, :, :, [0, 0, 1, 2]],
}

CASES = {
    # name: (nodes, inputs, opset, initializers, arrays)
    "add_legacy_broadcast_axis": (
        [helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=1)],
        [("a", F, [2, 3, 4]), ("b", F, [3])],
        6,
        (),
        (x(2, 3, 4), x(3)),
    ),
    "softmax_v11_coerces_to_2d": (
        [helper.make_node("Softmax", ["a"], ["y"], axis=1)],
        [("a", F, [2, 3, 4])],
        11,
        (),
        (x(2, 3, 4),),
    ),
    "softmax_v13_one_axis": (
        [helper.make_node("Softmax", ["a"], ["y"], axis=1)],
        [("a", F, [2, 3, 4])],
        13,
        (),
        (x(2, 3, 4),),
    ),
    "hardmax_v13": (
        [helper.make_node("Hardmax", ["a"], ["y"], axis=0)],
        [("a", F, [3, 4])],
        13,
        (),
        (x(3, 4),),
    ),
    "split_v2_attribute": (
        [helper.make_node("Split", ["a"], ["p", "q"], axis=1, split=[1, 3])],
        [("a", F, [2, 4])],
        2,
        (),
        (x(2, 4),),
    ),
    "split_v18_num_outputs_uneven": (
        [helper.make_node("Split", ["a"], ["p", "q", "r"], axis=0, num_outputs=3)],
        [("a", F, [7])],
        18,
        (),
        (x(7),),
    ),
    "squeeze_v1_attribute_and_v13_input": (
        [helper.make_node("Unsqueeze", ["a"], ["u"], axes=[0, 3])],
        [("a", F, [2, 3])],
        11,
        (),
        (x(2, 3),),
    ),
    "unsqueeze_v13_input": (
        [helper.make_node("Unsqueeze", ["a", "axes"], ["u"])],
        [("a", F, [2, 3])],
        13,
        (("axes", np.array([-1, 0], np.int64)),),
        (x(2, 3),),
    ),
    "reduce_mean_v13_attribute": (
        [helper.make_node("ReduceMean", ["a"], ["y"], axes=[-1], keepdims=0)],
        [("a", F, [2, 3])],
        13,
        (),
        (x(2, 3),),
    ),
    "reduce_l2_v18_noop_empty_axes": (
        [helper.make_node("ReduceL2", ["a"], ["y"], noop_with_empty_axes=1)],
        [("a", F, [2, 3])],
        18,
        (),
        (x(2, 3),),
    ),
    "pad_v2_attributes": (
        [helper.make_node("Pad", ["a"], ["y"], pads=[1, 0, 0, 2], mode="reflect")],
        [("a", F, [3, 4])],
        2,
        (),
        (x(3, 4),),
    ),
    "pad_v19_wrap_with_axes": (
        [helper.make_node("Pad", ["a", "pads", "", "axes"], ["y"], mode="wrap")],
        [("a", F, [3, 4])],
        19,
        (("pads", np.array([2, 1], np.int64)), ("axes", np.array([1], np.int64))),
        (x(3, 4),),
    ),
    "clip_v6_attributes": (
        [helper.make_node("Clip", ["a"], ["y"], min=-0.5, max=0.5)],
        [("a", F, [5])],
        6,
        (),
        (x(5),),
    ),
    "clip_v13_min_above_max": (
        [helper.make_node("Clip", ["a", "lo", "hi"], ["y"])],
        [("a", F, [5])],
        13,
        (("lo", np.array(1.0, np.float32)), ("hi", np.array(-1.0, np.float32))),
        (x(5),),
    ),
    "topk_v1_attribute": (
        [helper.make_node("TopK", ["a"], ["v", "i"], k=2)],
        [("a", F, [3, 5])],
        9,
        (),
        (x(3, 5),),
    ),
    "topk_v11_smallest": (
        [helper.make_node("TopK", ["a", "k"], ["v", "i"], largest=0, axis=0)],
        [("a", F, [4, 2])],
        11,
        (("k", np.array([3], np.int64)),),
        (x(4, 2),),
    ),
    "resize_v10_nearest": (
        [helper.make_node("Resize", ["a", "scales"], ["y"], mode="nearest")],
        [("a", F, [1, 1, 2, 3])],
        10,
        (("scales", np.array([1, 1, 2, 1.5], np.float32)),),
        (x(1, 1, 2, 3),),
    ),
    "resize_v19_cubic_antialias": (
        [helper.make_node("Resize", ["a", "", "", "sizes"], ["y"], mode="cubic", antialias=1)],
        [("a", F, [1, 1, 6, 6])],
        19,
        (("sizes", np.array([1, 1, 3, 4], np.int64)),),
        (x(1, 1, 6, 6),),
    ),
    "einsum_two_operands": (
        [helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bki")],
        [("a", F, [2, 3, 4]), ("b", F, [2, 4, 5])],
        12,
        (),
        (x(2, 3, 4), x(2, 4, 5)),
    ),
    "mean_variance_normalization_function_body": (
        [helper.make_node("MeanVarianceNormalization", ["a"], ["y"])],
        [("a", F, [2, 3, 2, 2])],
        18,
        (),
        (x(2, 3, 2, 2),),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_converter_matches_reference(name):
    nodes, inputs, opset, initializers, arrays = CASES[name]
    outputs = [(o, F if o != "i" else I64) for n in nodes for o in n.output]
    model = make(nodes, inputs, outputs, opset, initializers)
    check(model, *arrays, atol=1e-5, expected=EXPECTED.get(name))


def test_broadcasting_is_explicit_in_the_graph():
    model = make(
        [helper.make_node("Mul", ["a", "b"], ["y"])],
        [("a", F, [2, 3]), ("b", F, [3])],
        [("y", F)],
        17,
    )
    fn = import_model(model)
    names = [n.op.name for n in fn.nodes]
    assert "Broadcast" in names and "Mul" in names


def test_if_converts_only_the_taken_branch():
    then_graph = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", F, [3])],
    )
    else_graph = helper.make_graph(
        [helper.make_node("Reshape", ["a", "bad"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", F, [3])],
        [numpy_helper.from_array(np.array([7], np.int64), "bad")],  # would not convert
    )
    model = make(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_graph, else_branch=else_graph)],
        [("a", F, [3])],
        [("y", F)],
        17,
        (("c", np.array(True)),),
    )
    fn = import_model(model)
    assert {n.op.name for n in fn.nodes} <= {"Parameter", "Relu"}


def test_if_with_a_runtime_condition_selects():
    def branch(op, name):
        return helper.make_graph(
            [helper.make_node(op, ["a"], [name])],
            name,
            [],
            [helper.make_tensor_value_info(name, F, [3])],
        )

    model = make(
        [
            helper.make_node(
                "If", ["c"], ["y"], then_branch=branch("Relu", "t"), else_branch=branch("Neg", "e")
            )
        ],
        [("c", TensorProto.BOOL, []), ("a", F, [3])],
        [("y", F)],
        17,
    )
    values = np.array([-1.0, 2.0, -3.0], np.float32)
    for flag in (True, False):
        check(model, np.array(flag), values)


def test_scan_is_unrolled():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "v"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
        "body",
        [helper.make_tensor_value_info("s", F, [2]), helper.make_tensor_value_info("v", F, [2])],
        [helper.make_tensor_value_info("s2", F, [2]), helper.make_tensor_value_info("o", F, [2])],
    )
    model = make(
        [
            helper.make_node(
                "Scan", ["init", "seq"], ["final", "partial"], body=body, num_scan_inputs=1
            )
        ],
        [("init", F, [2]), ("seq", F, [4, 2])],
        [("final", F), ("partial", F)],
        16,
    )
    fn = check(model, x(2), x(4, 2))
    assert "Scan" not in {n.op.name for n in fn.nodes}


def test_registry_picks_the_newest_applicable_version():
    @onnx_op("OpgraphTestOp", since=3, domain="test.opgraph")
    def old(ctx):
        return ctx.input(0)

    @onnx_op("OpgraphTestOp", since=9, domain="test.opgraph")
    def new(ctx):
        return ctx.input(0)

    assert lookup("OpgraphTestOp", "test.opgraph", 2) is None
    assert lookup("OpgraphTestOp", "test.opgraph", 8) is old
    assert lookup("OpgraphTestOp", "test.opgraph", 20) is new
    with pytest.raises(RegistryError, match="already registered"):
        onnx_op("OpgraphTestOp", since=9, domain="test.opgraph")(old)
