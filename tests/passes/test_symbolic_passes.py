"""Every pass, the pattern matcher, backprop, the memory planner and the visualizer on
Functions with symbolic dimensions (issue 16, item 4): each keeps the symbols and computes what
the original computes at every binding."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.autodiff import backprop
from opgraph.core.errors import GraphError
from opgraph.core.function import Function
from opgraph.ops import Relu
from opgraph.passes import (
    decompose,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    eliminate_nops,
    eliminate_reshapes,
    fold_constants,
    fuse_core,
    inline_calls,
    optimize,
    plan_memory,
    simplify_algebra,
    sink_transposes,
    specialize_shapes,
    unbox_tuples,
)
from opgraph.pattern import P
from opgraph.visualize import to_dot

BATCH, SEQ = og.dim("batch"), og.dim("seq", max=64)
BINDINGS = ({"batch": 2, "seq": 3}, {"batch": 5, "seq": 7})


def attention() -> Function:
    x = og.parameter(og.f32, (BATCH, SEQ, 16), name="x")
    w = og.parameter(og.f32, (16, 16), name="w")
    q = ops.matmul(x, w)
    scores = ops.softmax(ops.matmul(q, ops.transpose(q, (0, 2, 1))) * 0.25, -1)
    y = ops.add(ops.matmul(scores, q), x * 1.0)  # x * 1 folds away
    return Function([ops.layer_norm(y, axis=-1)], [x, w], name="attention")


def cnn() -> Function:
    x = og.parameter(og.f32, (BATCH, 3, 8, 8), name="x")
    w = og.constant(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32))
    h = ops.relu(ops.convolution(x, w, padding_below=(1, 1), padding_above=(1, 1)))
    h = ops.max_pool(h, (2, 2), strides=(2, 2))
    flat = ops.reshape(h, (BATCH, 64))
    dense = og.constant(np.random.default_rng(1).standard_normal((64, 5)).astype(np.float32))
    return Function([ops.softmax(ops.dot(flat, dense), -1)], [x], name="cnn")


def movement() -> Function:
    x = og.parameter(og.f32, (SEQ, 4), name="x")
    both = ops.concat([x, ops.negative(x)], 0)  # f32[2*seq,4]
    tail = ops.slice(both, (1, 0), (2 * SEQ, 4))
    padded = ops.pad(tail, (1, 0), (0, 2))
    shape = ops.shape_of(padded)
    return Function([ops.tanh(padded), shape], [x], name="movement")


MODELS: dict[str, Callable[[], Function]] = {
    "attention": attention,
    "cnn": cnn,
    "movement": movement,
}
PASSES = (
    decompose,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    eliminate_nops,
    eliminate_reshapes,
    fold_constants,
    fuse_core,
    inline_calls,
    optimize,
    simplify_algebra,
    sink_transposes,
    unbox_tuples,
)


def arguments(fn: Function, binding: dict[str, int], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    static = specialize_shapes(fn, binding)
    return [rng.uniform(-1, 1, p.shape).astype(p.element_type.dtype) for p in static.parameters]


def run(fn: Function, args: list[np.ndarray]) -> list[np.ndarray]:
    return list(og.backend("INTERPRETER").compile(fn)(*args))


def binding_for(fn: Function) -> tuple[dict[str, int], ...]:
    names = {s.name for p in fn.parameters for d in p.shape for s in og.core.dim.free_symbols(d)}
    return tuple({k: v for k, v in b.items() if k in names} for b in BINDINGS)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("apply", PASSES, ids=lambda p: p.__name__)
def test_pass_keeps_symbols_and_numerics(model: str, apply: Callable[[Function], Function]):
    fn = MODELS[model]()
    after = apply(fn)
    assert after.parameter_types == fn.parameter_types  # still symbolic
    assert [t.shape for t in after.result_types] == [t.shape for t in fn.result_types]
    for binding in binding_for(fn):
        args = arguments(fn, binding)
        for got, want in zip(run(after, args), run(fn, args), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_folding_folds_static_shape_of_and_keeps_symbolic_ones():
    x = og.parameter(og.f32, (BATCH, 4), name="x")
    y = og.parameter(og.f32, (3, 4), name="y")
    fn = fold_constants(Function([ops.shape_of(x), ops.shape_of(y)], [x, y]))
    kinds = [type(r.node.op).__name__ for r in fn.results]
    assert kinds == ["ShapeOf", "Constant"]


def test_a_pattern_matches_on_a_symbolic_shape():
    x = og.parameter(og.f32, (BATCH, 4), name="x")
    z = og.parameter(og.f32, (SEQ, 4), name="z")
    by_batch = P(Relu, name="r", where=lambda o: o.shape[0] == BATCH)
    assert by_batch.match(ops.relu(x)) is not None
    assert by_batch.match(ops.relu(z)) is None


def test_algebra_rewrites_a_broadcast_constant_of_symbolic_size():
    x = og.parameter(og.f32, (BATCH, 4), name="x")
    fn = simplify_algebra(Function([ops.add(x * 1.0, x)], [x]))  # x * 1 -> x
    assert "Mul" not in {n.op.name for n in fn.nodes}


@pytest.mark.parametrize("model", ["attention", "cnn"])
def test_backprop_of_a_symbolic_function_matches_every_binding(model: str):
    fn = MODELS[model]()
    loss = Function(
        [ops.reduce_sum(fn.results[0], tuple(range(fn.results[0].rank)))], fn.parameters
    )
    grad = backprop(loss)
    for binding in binding_for(fn):
        args = arguments(loss, binding)
        want = run(backprop(specialize_shapes(loss, binding)), args)
        for got, expected in zip(run(grad, args), want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_memory_plan_is_made_per_binding():
    fn = unbox_tuples(attention())
    with pytest.raises(GraphError, match="binding="):
        plan_memory(fn)
    for binding in BINDINGS:
        plan = plan_memory(fn, binding=binding)
        static = plan_memory(unbox_tuples(specialize_shapes(fn, binding)))
        assert plan.peak == static.peak
        assert sorted(plan.sizes.values()) == sorted(static.sizes.values())


def test_visualizer_shows_symbolic_dimensions():
    dot = to_dot(attention())
    assert "batch" in dot and "seq" in dot
