"""PassManager (verification, timings, tracing, errors) and the default pipeline ``optimize``."""

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pass_graphs import graphs
from pass_helpers import assert_same_numerics, op_names

import opgraph as og
from opgraph import ops
from opgraph.core.node import Node
from opgraph.core.tensor_type import TensorType
from opgraph.passes import (
    PassManager,
    PassTiming,
    eliminate_common_subexpressions,
    fold_constants,
    optimize,
    simplify_algebra,
    verify_function,
)
from opgraph.passes.manager import pass_name
from opgraph_examples.models import mlp


def small():
    x = og.parameter(og.f32, (2, 3), name="x")
    y = ops.exp(x + 0.0) + ops.exp(x)
    return og.Function([y], [x], name="small")


def test_runs_passes_in_order_and_times_them():
    manager = PassManager([simplify_algebra, eliminate_common_subexpressions])
    fn = small()
    out = manager.run(fn)
    assert op_names(out) == ["Exp", "Add"]
    assert [t.name for t in manager.timings] == [
        "simplify_algebra",
        "eliminate_common_subexpressions",
    ]
    first = manager.timings[0]
    assert isinstance(first, PassTiming) and first.seconds >= 0
    assert (first.nodes_before, first.nodes_after) == (len(fn.nodes), len(fn.nodes) - 3)
    name, seconds, before, after = manager.timings[1]
    assert after == len(out.nodes)


def test_trace_writes_text_and_dot_after_every_pass(tmp_path):
    manager = PassManager(
        [simplify_algebra, functools.partial(fold_constants, max_elements=4)],
        trace_dir=tmp_path / "trace",
    )
    out = manager.run(small())
    names = sorted(p.name for p in (tmp_path / "trace").iterdir())
    assert names == [
        "000_input.dot",
        "000_input.txt",
        "001_simplify_algebra.dot",
        "001_simplify_algebra.txt",
        "002_fold_constants.dot",
        "002_fold_constants.txt",
    ]
    assert (tmp_path / "trace" / "002_fold_constants.txt").read_text() == str(out) + "\n"
    assert (
        (tmp_path / "trace" / "001_simplify_algebra.dot").read_text().startswith('digraph "small"')
    )


def test_pass_name_sees_through_partial():
    assert pass_name(functools.partial(fold_constants, max_elements=3)) == "fold_constants"
    assert pass_name(lambda fn: fn) == "<lambda>"


def wrong_result_type(fn):
    (x,) = fn.parameters
    return og.Function([ops.convert(fn.results[0], og.f64)], [x])


def wrong_parameter_type(fn):
    x = og.parameter(og.f64, (2, 3))
    return og.Function([ops.convert(ops.exp(x), og.f32)], [x])


def returns_none(fn):
    return None


def raises(fn):
    raise og.GraphError("something broke")


@pytest.mark.parametrize(
    ("bad_pass", "error", "message"),
    [
        (
            wrong_result_type,
            og.GraphError,
            r"pass 1 \(wrong_result_type\) changed the result types of small from \(f32\[2,3\]\) to \(f64\[2,3\]\)",
        ),
        (
            wrong_parameter_type,
            og.GraphError,
            r"pass 1 \(wrong_parameter_type\) changed the parameter types of small",
        ),
        (
            returns_none,
            og.GraphError,
            r"pass 1 \(returns_none\) returned NoneType, expected a Function",
        ),
        (raises, og.GraphError, "something broke"),
    ],
)
def test_bad_passes_are_caught(bad_pass, error, message):
    with pytest.raises(error, match=message) as info:
        PassManager([bad_pass]).run(small())
    if bad_pass is raises:
        assert "in pass 1 (raises) of the PassManager, on small" in info.value.__notes__


def test_verification_can_be_switched_off():
    out = PassManager([wrong_result_type], verify=False).run(small())
    assert out.result_types[0].element_type == og.f64


@pytest.mark.parametrize(
    ("passes", "message"),
    [
        (
            [simplify_algebra, "fold_constants"],
            "pass 1 must be a callable Function -> Function, got str",
        )
    ],
)
def test_pass_list_errors(passes, message):
    with pytest.raises(og.GraphError, match=message):
        PassManager(passes)


def test_run_needs_a_function():
    with pytest.raises(og.GraphError, match="PassManager.run: expected a Function, got Output"):
        PassManager([]).run(small().results[0])


def forged():
    """A Function holding a node whose stored type disagrees with its op's type rule (only
    possible by building a Node by hand)."""
    x = og.parameter(og.f32, (2, 3))
    node = Node(ops.Exp(), (x,), (TensorType(og.f32, (3, 2)),), "forged.py:1")
    return og.Function([node.outputs[0]], [x], name="forged")


def test_verify_function_catches_a_wrong_type():
    with pytest.raises(
        og.GraphError,
        match=r"verify after pass 1 \(identity\): %1 = Exp\(%0\) : f32\[3,2\] \(built at forged.py:1\) re-infers as \(f32\[2,3\]\)",
    ):
        verify_function(forged(), "after pass 1 (identity)")


def test_verify_function_catches_a_failing_type_rule():
    x = og.parameter(og.i32, (2,))
    node = Node(ops.Exp(), (x,), (x.type,), "forged.py:2")
    with pytest.raises(
        og.GraphError,
        match=r"verify: %1 = Exp\(%0\) : i32\[2\] \(built at forged.py:2\) no longer type-checks: input element type i32 is not supported",
    ):
        verify_function(og.Function([node.outputs[0]], [x]))


def test_manager_verifies_between_passes():
    with pytest.raises(og.GraphError, match=r"verify after pass 1 \(forge\)"):
        PassManager([forge]).run(forged_source())


def forge(fn):
    return forged()


def forged_source():
    x = og.parameter(og.f32, (2, 3))
    return og.Function([ops.transpose(x)], [x], name="forged")


# ------------------------------------------------------------------------------ optimize
def redundant_mlp(layers=20, width=32, batch=4):
    """An MLP written the way exporters write it: long-hand relu, ``* 1.0``, ``+ 0.0``,
    duplicated subexpressions and constant arithmetic on the weights."""
    rng = np.random.default_rng(0)
    x = og.parameter(og.f32, (batch, width), name="x")
    h = x
    for _ in range(layers):
        w = og.constant(rng.standard_normal((width, width)).astype(np.float32) * 0.2)
        scale = og.constant(np.float32(0.5))
        scaled = ops.multiply(w, ops.broadcast(ops.add(scale, scale), w.shape))
        b = og.constant(rng.standard_normal(width).astype(np.float32) * 0.1)
        y = ops.add(ops.dot(h, scaled), ops.broadcast(b, (batch, width), (0,)))
        y = ops.transpose(ops.transpose(y * 1.0 + 0.0))
        h = (
            ops.maximum(y, ops.broadcast(og.constant(np.float32(0.0)), y.shape))
            + ops.reshape(ops.exp(-y), y.shape) * 0.0 * 0.0
        )
    return og.Function([h, ops.reduce_sum(h, ())], [x], name="redundant_mlp")


def test_optimize_the_redundant_mlp():
    fn = redundant_mlp(layers=3)
    out = optimize(fn, verify=True)
    assert len(out.nodes) < len(fn.nodes)
    names = op_names(out)
    assert "Transpose" not in names and "Reshape" not in names and "ReduceSum" not in names
    assert names.count("Dot") == 3
    assert_same_numerics(fn, out, rtol=1e-4, atol=1e-5)
    assert optimize(out) is out  # a fixed point


def test_optimize_lowers_calls_and_tuples():
    x = og.parameter(og.f32, (2,))
    callee = og.Function([ops.tuple_(ops.exp(x) * 1.0, x)], [x], name="callee")
    y = og.parameter(og.f32, (2,))
    (t,) = ops.call(callee, y)
    fn = og.Function([ops.get_tuple_element(t, 0), t], [y])
    out = optimize(fn)
    assert op_names(out) == ["Exp"]
    assert len(out.results) == 3 and out.results[1] == out.results[0]


def test_optimize_demo_mlp_keeps_numerics():
    model = mlp()
    out = optimize(model.function)
    assert len(out.nodes) <= len(model.function.nodes)
    assert_same_numerics(model.function, out, rtol=1e-4, atol=1e-6)


def test_optimize_trace(tmp_path):
    optimize(small(), trace_dir=tmp_path)
    assert (tmp_path / "lowering" / "001_inline_calls.txt").exists()
    assert (tmp_path / "round_1" / "002_simplify_algebra.dot").exists()
    assert not (tmp_path / "round_3").exists()  # round 2 changed nothing


@pytest.mark.parametrize("bad", [0, -1, 2.0])
def test_optimize_bad_rounds(bad):
    with pytest.raises(og.GraphError, match="max_rounds must be a positive int"):
        optimize(small(), max_rounds=bad)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(), st.integers(0, 2**31))
def test_optimize_random_graphs(fn, seed):
    out = optimize(fn, verify=True)
    assert len(out.nodes) <= len(fn.nodes)
    assert_same_numerics(fn, out, seed)
