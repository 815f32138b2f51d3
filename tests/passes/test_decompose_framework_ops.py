"""The decompose pass lowers every framework-level op (linalg, activation, normalization,
shaping, rnn, resize) to core ops, and the lowered graph agrees with the oracle's statement of
the original op."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.interpreter.backend import lower_for_interpreter
from opgraph.core.op import OP_REGISTRY
from opgraph.passes import decompose
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate
from opgraph.testing.records import RECORDS

FAMILIES = ("linalg", "activation", "normalization", "shaping", "rnn", "resize")
FRAMEWORK_OPS = {
    cls
    for _, cls in OP_REGISTRY.items()
    if cls.has_decomposition() and cls.__module__.rsplit(".", 1)[-1] in FAMILIES
}


def _op_classes(fn):
    return {type(n.op) for n in fn.nodes}


def _framework_records():
    for record in RECORDS:
        found = _op_classes(record.function(record.element_types[0])) & FRAMEWORK_OPS
        if found:
            yield record, found


RECORDED = list(_framework_records())
CASES = [
    pytest.param(record, t, id=f"{record.name}-{t.name}")
    for record, _ in RECORDED
    for t in record.element_types
]


def test_every_framework_op_has_a_case():
    covered = set().union(*(found for _, found in RECORDED))
    assert sorted(c.__name__ for c in FRAMEWORK_OPS - covered) == []
    assert len(FRAMEWORK_OPS) == 26


@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_decomposition_matches_the_oracle(record, element_type):
    fn = record.function(element_type)
    lowered = decompose(fn)
    remaining = [n.op.name for n in lowered.nodes if n.op.has_decomposition()]
    assert remaining == []
    assert lowered.flat_result_types == fn.flat_result_types
    args = record.arguments(element_type)
    rtol, atol = record.tolerance(element_type)
    want = evaluate(fn, args)
    got = evaluate(lowered, args)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, rtol, atol, f"decomposed {record.name}[{element_type.name}] result {i}")


@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_canonical_ops_rebuild_unchanged(record, element_type):
    """Passes rebuild nodes from their stored (canonical) op: canonicalizing again is a no-op."""
    for node in record.function(element_type).nodes:
        if type(node.op) in FRAMEWORK_OPS:
            assert node.op.canonicalize(*(i.type for i in node.inputs)) == node.op


def _matmul_function(a_shape, b_shape):
    a, b = og.parameter(og.f32, a_shape), og.parameter(og.f32, b_shape)
    return og.Function([ops.matmul(a, b)], [a, b])


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "dots"),
    [
        ((2, 3), (3, 4), 1),
        ((2, 2, 3, 4), (4, 5), 1),  # one right matrix: a's batch folds into rows
        ((3, 4), (2, 4, 5), 1),  # one left matrix: b's batch folds into columns
        ((3, 2, 4), (3, 4, 2), 3),  # both batched: one Dot per batch element
        ((2, 1, 3, 4), (5, 4, 2), 10),
    ],
)
def test_matmul_decomposition_uses_few_dots(a_shape, b_shape, dots):
    lowered = decompose(_matmul_function(a_shape, b_shape))
    assert [n.op.name for n in lowered.nodes].count("Dot") == dots


def test_broadcast_matmul_operand_is_sliced_once_per_matrix():
    lowered = decompose(_matmul_function((2, 1, 3, 4), (5, 4, 2)))
    assert [n.op.name for n in lowered.nodes].count("Slice") == 2 + 5


def test_supported_ops_are_kept():
    fn = _matmul_function((2, 3), (3, 4))
    assert decompose(fn, is_supported=lambda op: isinstance(op, ops.MatMul)) is fn


def test_interpreter_keeps_matmul_native_and_lowers_the_rest():
    x, w = og.parameter(og.f32, (2, 3)), og.parameter(og.f32, (3, 4))
    fn = og.Function([ops.gelu(ops.matmul(x, w))], [x, w])
    names = {n.op.name for n in lower_for_interpreter(fn).nodes}
    assert "MatMul" in names and "Gelu" not in names and "Erf" in names


def test_nested_decompositions_are_lowered_too():
    x = og.parameter(og.f64, (4,))
    fn = og.Function([ops.mish(x)], [x])  # Mish -> Softplus -> core ops
    lowered = decompose(fn)
    assert not {"Mish", "Softplus"} & {n.op.name for n in lowered.nodes}
    values = np.array([-30.0, -1.0, 0.5, 40.0])
    (got,) = evaluate(lowered, [values])
    np.testing.assert_allclose(got, values * np.tanh(np.logaddexp(0, values)), rtol=1e-12)


def test_resize_skips_identity_axes():
    x = og.parameter(og.f32, (2, 3, 4, 4))
    fn = og.Function([ops.resize(x, scales=(1, 1, 2, 1), mode="linear")], [x])
    gathers = [n for n in decompose(fn).nodes if n.op.name == "Gather"]
    assert {n.op.axis for n in gathers} == {2}
