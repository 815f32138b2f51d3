"""liveness and plan_memory: hand-checked cases, errors, and random graphs executed in the arena."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pass_graphs import graphs

import opgraph as og
from opgraph import ops
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.literals import Constant, Parameter
from opgraph.passes import IN_PLACE, in_place_pairs, liveness, plan_memory, unbox_tuples
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate


def chain():
    x = og.parameter(og.f32, (4, 4), name="x")
    a = ops.exp(x)  # temporary
    b = ops.tanh(a)  # temporary, over a in place
    c = ops.add(b, x)  # temporary, over b in place
    d = ops.transpose(c)  # temporary, no in-place declaration
    return og.Function([ops.multiply(d, d)], [x]), (a, b, c, d)


def test_liveness_chain():
    fn, (a, b, c, d) = chain()
    live = liveness(fn)
    assert live.order == fn.nodes
    assert live.temporaries == (a, b, c, d)
    assert live.dying[b.node] == (a,)
    assert live.dying[fn.results[0].node] == (d,)  # d used twice, dies once
    assert live.interval(a) == (1, 2)
    assert fn.parameters[0] in live.persistent and fn.results[0] in live.persistent
    assert live.born[fn.parameters[0].node] == ()


def test_liveness_errors_on_a_persistent_value():
    fn, _ = chain()
    with pytest.raises(KeyError, match="not a temporary"):
        liveness(fn).interval(fn.parameters[0])


def test_unused_output_dies_at_its_own_node():
    x = og.parameter(og.f32, (3,))
    unused = ops.exp(x)
    (callee_out,) = ops.call(og.Function([ops.negative(x), ops.exp(x)], [x]), x)[:1]
    fn = og.Function([ops.add(unused, x), callee_out], [x])
    live = liveness(fn)
    call_node = callee_out.node
    assert call_node.outputs[1] in live.dying[call_node]
    assert live.interval(call_node.outputs[1]) == (live.index[call_node],) * 2


def test_plan_chain_in_place_and_reuse():
    fn, (a, b, c, d) = chain()
    plan = plan_memory(fn)
    assert plan.in_place == {b: a, c: b}
    assert plan.offsets[a] == plan.offsets[b] == plan.offsets[c] == 0
    assert plan.offsets[d] == 64  # c is still being read while d is written
    assert plan.sizes[a] == 64 and plan.peak == 128
    assert set(plan.offsets) == {a, b, c, d}
    no_sharing = plan_memory(fn, in_place=False)
    assert no_sharing.in_place == {}
    assert no_sharing.peak == 128  # a's block is freed and reused by c


def test_plan_alignment_rounds_blocks():
    x = og.parameter(og.f32, (3,))
    a, b = ops.exp(x), ops.tanh(x)
    fn = og.Function([ops.add(a, b)], [x])
    plan = plan_memory(fn, alignment=16)
    assert sorted(plan.offsets.values()) == [0, 16]
    assert plan.sizes[a] == 12 and plan.peak == 32


def test_plan_coalesces_freed_neighbours():
    x = og.parameter(og.f32, (16,))  # 64 bytes
    a, b = ops.exp(x), ops.tanh(x)
    ab = ops.concat([a, b], 0)  # a and b (adjacent blocks) die here
    big = ops.concat([ab, ab], 0)  # 256 bytes: fits the coalesced 128-byte hole? no: tail grows
    fn = og.Function([ops.negative(big)], [x])
    plan = plan_memory(fn, alignment=64, in_place=False)
    assert plan.offsets[a] == 0 and plan.offsets[b] == 64 and plan.offsets[ab] == 128
    # a and b coalesce into one 128-byte hole, too small for big, so big goes after ab
    assert plan.offsets[big] == 256 and plan.peak == 512
    small = ops.concat([ops.exp(ab), ops.exp(ab)], 0)
    fn2 = og.Function([ops.negative(small)], [x])
    plan2 = plan_memory(fn2, in_place=False)
    first_exp = small.node.inputs[0]
    assert plan2.offsets[first_exp] == 0  # the coalesced 128-byte hole at 0 is reused


def test_in_place_needs_a_dying_input_of_the_same_size():
    x = og.parameter(og.f32, (4,))
    a = ops.exp(x)
    b = ops.tanh(a)  # a still used below: no in-place
    c = ops.equal(b, a)  # boolean output: 4 bytes, not 16: no in-place
    fn = og.Function([c, ops.add(a, a)], [x])
    plan = plan_memory(fn)
    assert b not in plan.in_place and c not in plan.in_place


def test_custom_in_place_rule_and_registry_lookup():
    fn, (a, b, c, d) = chain()
    plan = plan_memory(fn, in_place=lambda node: ((0, 0),) if node is d.node else ())
    assert plan.in_place == {d: c}
    assert in_place_pairs(b.node) == IN_PLACE[ops.UnaryElementwise]
    assert in_place_pairs(d.node) == ()
    x = og.parameter(og.f32, (2,))
    assert in_place_pairs(ops.gelu(x).node) == ((0, 0),)  # the Activation family
    assert in_place_pairs(ops.select(ops.less(x, x), x, x).node) == ((0, 1), (0, 2))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alignment": 0}, "alignment must be a positive int, got 0"),
        ({"alignment": 48}, "alignment must be a power of two, got 48"),
        ({"in_place": "yes"}, "in_place must be True, False or a callable"),
    ],
)
def test_plan_bad_arguments(kwargs, message):
    fn, _ = chain()
    with pytest.raises(og.GraphError, match=message):
        plan_memory(fn, **kwargs)


def test_plan_rejects_tuple_values():
    x = og.parameter(og.f32, (2,))
    t = ops.tuple_(ops.exp(x), x)
    fn = og.Function([ops.get_tuple_element(t, 0)], [x])
    with pytest.raises(og.GraphError, match="run unbox_tuples first"):
        plan_memory(fn)
    assert plan_memory(unbox_tuples(fn)).peak == 0  # the exp is now a result


def test_zero_sized_values_take_no_space():
    x = og.parameter(og.f32, (0, 3))
    fn = og.Function([ops.reduce_sum(ops.exp(x), (0,))], [x])
    plan = plan_memory(fn)
    assert plan.peak == 0 and list(plan.sizes.values()) == [0]


def run_in_arena(fn, plan, args):
    """Execute ``fn`` with every temporary stored in one arena at its planned offset."""
    arena = np.zeros(max(plan.peak, 1), np.uint8)
    env = dict(zip(fn.parameters, args, strict=True))
    for node in fn.nodes:
        if isinstance(node.op, Parameter):
            continue
        if isinstance(node.op, Constant):
            env[node.outputs[0]] = node.op.value
            continue
        with np.errstate(all="ignore"):
            result = KERNELS[type(node.op)](node.op, *[env[i] for i in node.inputs])
        results = result if isinstance(result, tuple) else (result,)
        for out, value in zip(node.outputs, results, strict=True):
            if out in plan.offsets:
                start = plan.offsets[out]
                view = arena[start : start + plan.sizes[out]].view(value.dtype)
                view = view.reshape(value.shape)
                view[...] = value
                value = view
            else:  # a kernel may return a view of its input, which may live in the arena
                value = np.array(value)
            env[out] = value
    return [env[r] for r in fn.results]


def overlaps(plan, u, v):
    a, b = plan.offsets[u], plan.offsets[v]
    return a < b + plan.sizes[v] and b < a + plan.sizes[u]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_ops=16), st.sampled_from([1, 16, 64]), st.booleans(), st.integers(0, 2**31))
def test_random_plans_are_sound(fn, alignment, in_place, seed):
    plan = plan_memory(fn, alignment=alignment, in_place=in_place)
    live = plan.liveness
    values = list(plan.offsets)
    rounded = sum(-(-s // alignment) * alignment for s in plan.sizes.values())
    assert plan.peak <= rounded
    for v in values:
        assert plan.offsets[v] % alignment == 0
        assert plan.offsets[v] + plan.sizes[v] <= plan.peak
    for i, u in enumerate(values):
        for v in values[i + 1 :]:
            (u0, u1), (v0, v1) = live.interval(u), live.interval(v)
            if u0 <= v1 and v0 <= u1 and overlaps(plan, u, v):
                assert plan.in_place.get(v) == u or plan.in_place.get(u) == v, (u, v)
    for out, source in plan.in_place.items():
        assert source in out.node.inputs and source in live.dying[out.node]
        assert in_place or not plan.in_place
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-2, 2, p.shape).astype(p.element_type.dtype) for p in fn.parameters]
    for got, want in zip(run_in_arena(fn, plan, args), evaluate(fn, args), strict=True):
        assert_close(got, want, 1e-5, 1e-6, "arena")
