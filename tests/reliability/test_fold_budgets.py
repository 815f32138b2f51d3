"""Constant folding bounds the work it does, not only the size of what it creates (repro 06).

A 701-byte graph broadcasting a scalar to 10^6 x 10^6 and summing it kept CPU ``compile()``
busy for hours: the result is one element, so the old size bound let the fold read 10^12.
The tests check the structure of the folded graph (what was skipped), never a duration; the
timeout is only a backstop against the old behaviour.
"""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.errors import GraphError
from opgraph.passes import fold_constants
from opgraph.passes.fold_constants import DEFAULT_MAX_WORK

pytestmark = pytest.mark.timeout(120)


def op_names(fn: og.Function) -> list[str]:
    return [type(n.op).__name__ for n in fn.nodes]


def huge_sum() -> og.Function:
    big = ops.broadcast(og.constant(np.float32(1.0)), (10**6, 10**6), (0, 1))
    return og.Function([ops.reduce_sum(big, (0, 1))], [], name="dos")


def test_repro_graph_is_tiny():
    assert len(og.serialize(huge_sum())) < 2048


def test_a_reduction_reading_too_much_is_left_in_the_graph():
    folded = fold_constants(huge_sum())
    assert "ReduceSum" in op_names(folded)
    assert "Broadcast" in op_names(folded)


def test_repro_graph_compiles_on_every_backend(backend):
    loaded = og.deserialize(og.serialize(huge_sum()))
    executable = backend.compile(loaded)  # folding skipped: nothing runs 10^12 additions here
    assert executable.result_types == (og.TensorType(og.f32, ()),)


@pytest.mark.parametrize(("max_work", "folds"), [(DEFAULT_MAX_WORK, True), (10**5, False)])
def test_work_bound_decides(max_work, folds):
    big = ops.broadcast(og.constant(np.float32(0.5)), (1000, 1000), (0, 1))
    fn = og.Function([ops.reduce_sum(big, (0, 1))], [], name="sum")
    folded = fold_constants(fn, max_work=max_work)
    assert ("ReduceSum" not in op_names(folded)) is folds
    if folds:
        (constant,) = (n.op for n in folded.nodes)
        assert float(constant.value) == 500_000.0


def test_products_count_their_inner_dimension():
    # [1, k] x [k, 1]: a one-element result of k multiply-adds over 2k input elements.
    k = DEFAULT_MAX_WORK
    a = ops.broadcast(og.constant(np.float32(1.0)), (1, k), (0, 1))
    b = ops.broadcast(og.constant(np.float32(1.0)), (k, 1), (0, 1))
    folded = fold_constants(og.Function([ops.dot(a, b)], [], name="dot"))
    assert "Dot" in op_names(folded)
    # A small product still folds, to the exact value.
    x = og.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = og.constant(np.ones((3, 2), np.float32))
    small = fold_constants(og.Function([ops.dot(x, y)], [], name="small"))
    (node,) = small.nodes
    expected = np.arange(6, dtype=np.float32).reshape(2, 3) @ np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(node.op.value, expected)


def test_contracting_work_is_output_times_input():
    # 32 x 32 by 32 x 32 folds by default; with a bound below 32^2 * 2 * 32^2 it does not.
    x = og.constant(np.ones((32, 32), np.float32))
    fn = og.Function([ops.dot(x, x)], [], name="square")
    assert op_names(fold_constants(fn)) == ["Constant"]
    assert "Dot" in op_names(fold_constants(fn, max_work=32**2 * 2 * 32**2 - 1))


def test_elementwise_on_broadcasts_counts_the_sources():
    s = ops.broadcast(og.constant(np.float32(2.0)), (10**6, 10**6), (0, 1))
    fn = og.Function([ops.multiply(s, s)], [], name="square")
    assert op_names(fold_constants(fn)) == ["Constant", "Broadcast"]  # folded on the scalars
    assert "Mul" in op_names(fold_constants(fn, max_work=2))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_max_work_must_be_a_non_negative_int(bad):
    with pytest.raises(GraphError, match="max_work must be a non-negative int"):
        fold_constants(huge_sum(), max_work=bad)
