"""The collective ops: type rules, the family's completeness, one-rank numerics against the
oracle on every backend, serialization, and multi-rank semantics on in-process ranks."""

import inspect

import ml_dtypes
import numpy as np
import pytest

import opgraph as og
import opgraph.backends.interpreter.kernels.collective  # until wired into kernels/__init__
import opgraph.testing.oracle.collective  # until wired into oracle/__init__
from opgraph import ops
from opgraph.autodiff.grad import backprop
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.distributed import LocalGroup, ReduceOp
from opgraph.ops import collective
from opgraph.ops.collective import AllReduce, BroadcastDistributed, all_reduce
from opgraph.ops.collective import broadcast_distributed as bcast
from opgraph.serialize import deserialize, serialize
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import ORACLE, evaluate
from opgraph.testing.records import collective as collective_records

NON_BOOL = [t for t in og.element.ALL if t is not og.boolean]


def p(shape=(2, 3), t=og.f32):
    return og.parameter(t, shape)


# ---------------------------------------------------------------------------- type rules
@pytest.mark.parametrize("t", NON_BOOL, ids=lambda t: t.name)
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_all_reduce_keeps_the_type(t, op):
    assert all_reduce(p((4, 0, 2), t), op).type == og.TensorType(t, (4, 0, 2))


@pytest.mark.parametrize("t", og.element.FLOATS, ids=lambda t: t.name)
def test_all_reduce_mean_of_floats(t):
    assert all_reduce(p((), t), "mean").type == og.TensorType(t, ())


def test_all_reduce_normalises_the_reduction_name():
    x = p()
    assert all_reduce(x).op == AllReduce(ReduceOp.SUM)
    assert all_reduce(x, "max").op.reduction is ReduceOp.MAX
    assert all_reduce(x, ReduceOp.MEAN).op == all_reduce(x, "mean").op
    assert "AllReduce[reduction=mean]" in str(og.Function([all_reduce(x, "mean")], [x]))


def test_all_reduce_rejects_booleans():
    with pytest.raises(og.OpTypeError, match=r"AllReduce: input element type boolean is not"):
        all_reduce(p((2,), og.boolean), "max")


@pytest.mark.parametrize("t", [og.i32, og.u8], ids=lambda t: t.name)
def test_all_reduce_mean_rejects_integers(t):
    with pytest.raises(
        og.OpTypeError, match=rf"AllReduce: mean needs a floating-point input, got {t.name}"
    ):
        all_reduce(p((2,), t), "mean")


def test_all_reduce_rejects_an_unknown_reduction():
    with pytest.raises(og.OpTypeError, match=r"AllReduce: reduction .*'average'"):
        all_reduce(p(), "average")


@pytest.mark.parametrize("t", og.element.ALL, ids=lambda t: t.name)
def test_broadcast_distributed_keeps_the_type(t):
    assert bcast(p((3,), t), root=2).type == og.TensorType(t, (3,))
    assert bcast(p((3,), t)).op.root == 0


@pytest.mark.parametrize("root", [-1, 1.0, True, "0"])
def test_broadcast_distributed_rejects_a_bad_root(root):
    with pytest.raises(
        og.OpTypeError, match="BroadcastDistributed: root must be a non-negative int"
    ):
        bcast(p(), root)


def test_collectives_take_one_tensor():
    with pytest.raises(og.OpTypeError, match="AllReduce: expected 1 input"):
        AllReduce()(p(), p())
    with pytest.raises(og.OpTypeError, match="must be an opgraph value"):
        bcast(np.ones(3))


@pytest.mark.parametrize("build", [all_reduce, bcast])
def test_collectives_are_not_differentiable(build):
    x = og.parameter(og.f64, (3,), name="x")
    loss = ops.reduce_sum(build(ops.multiply(x, x)), (0,))
    with pytest.raises(
        og.NotDifferentiableError, match=r"(AllReduce|BroadcastDistributed) .* not differentiable"
    ):
        backprop(og.Function([loss], [x]), wrt=[x])


# -------------------------------------------------------------------- family completeness
def test_family_all_lists_every_public_name():
    defined = {
        n
        for n, v in vars(collective).items()
        if not n.startswith("_")
        and (inspect.isclass(v) or inspect.isfunction(v))
        and v.__module__ == collective.__name__
    }
    assert set(collective.__all__) == defined


@pytest.mark.parametrize("cls", [AllReduce, BroadcastDistributed], ids=lambda c: c.__name__)
def test_each_op_is_complete(cls):
    recorded = {
        type(n.op) for r in collective_records.RECORDS for n in r.function(r.element_types[0]).nodes
    }
    assert cls in KERNELS and cls in ORACLE and cls in recorded
    assert cls.__doc__ and not cls.differentiable


# ------------------------------------------------------------- one rank: records, oracle
CASES = [
    pytest.param(r, t, id=f"{r.name}-{t.name}")
    for r in collective_records.RECORDS
    for t in r.element_types
]


@pytest.mark.parametrize("backend_name", og.backends())
@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_record_on_one_rank(backend_name, record, element_type):
    fn = record.function(element_type)
    args = record.arguments(element_type)
    got = og.backend(backend_name).compile(fn)(*args)
    want = evaluate(fn, args)
    rtol, atol = record.tolerance(element_type)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_close(g, w, rtol, atol, f"{record.name}[{element_type.name}] result {i}")


@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_record_round_trips(record, element_type):
    fn = record.function(element_type)
    loaded = deserialize(serialize(fn))
    assert str(loaded) == str(fn)
    assert [n.op for n in loaded.nodes] == [n.op for n in fn.nodes]


def test_one_rank_results_equal_the_input_exactly():
    x = og.parameter(og.f32, (5,))
    outs = [all_reduce(x, op.value) for op in ReduceOp] + [bcast(x)]
    exe = og.backend("INTERPRETER").compile(og.Function(outs, [x]))
    value = np.array([1.5, -0.0, np.nan, np.inf, 3e38], np.float32)
    for result in exe(value):
        np.testing.assert_array_equal(result, value)


# ------------------------------------------------------------------ several ranks in threads
def run_on_ranks(size, build, make_input, element_type, shape):
    """Compile ``build(x)`` once and run it on ``size`` threaded ranks."""
    x = og.parameter(element_type, shape)
    exe = og.backend("INTERPRETER").compile(og.Function([build(x)], [x]))
    return LocalGroup(size).run(lambda comm: exe(make_input(comm.rank))[0])


REDUCE = {
    "sum": lambda v: np.sum(v, axis=0),
    "prod": lambda v: np.prod(v, axis=0),
    "min": lambda v: np.min(v, axis=0),
    "max": lambda v: np.max(v, axis=0),
    "mean": lambda v: np.mean(v, axis=0),
}


OVER_RANKS = [
    pytest.param(op, t, id=f"{op}-{t.name}")
    for op in REDUCE
    for t in (og.f32, og.f64, og.i32, og.u8, og.i64)
    if op != "mean" or t.is_real  # an integer mean is a type error (tested above)
]


@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize(("op", "t"), OVER_RANKS)
def test_all_reduce_over_ranks(size, op, t):
    values = [(np.array([[1, 2, 3], [4, 0, 2]]) + r).astype(t.dtype) for r in range(size)]
    results = run_on_ranks(size, lambda x: all_reduce(x, op), lambda r: values[r], t, (2, 3))
    want = REDUCE[op]([v.astype(np.float64) for v in values])
    for got in results:
        assert got.dtype == t.dtype
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6)


def test_all_reduce_like_ngraph_sum_is_value_times_size_and_prod_is_power():
    size = 3
    sums = run_on_ranks(size, all_reduce, lambda r: np.full(4, 2.0), og.f64, (4,))
    prods = run_on_ranks(
        size, lambda x: all_reduce(x, "prod"), lambda r: np.full(4, 2.0), og.f64, (4,)
    )
    assert all(
        (s == 2.0 * size).all() and (q == 2.0**size).all() for s, q in zip(sums, prods, strict=True)
    )


@pytest.mark.parametrize("t", [og.f16, og.bf16], ids=lambda t: t.name)
def test_16_bit_floats_accumulate_in_f32(t):
    # 1 + 2^-11 + 2^-11 is not representable stepwise in f16/bf16, but the f32 sum rounds once.
    small = (
        float(np.finfo(t.dtype).eps) / 2 if t is og.f16 else float(ml_dtypes.finfo(t.dtype).eps) / 2
    )
    values = [np.array([1.0], t.dtype), np.array([small], t.dtype), np.array([small], t.dtype)]
    results = run_on_ranks(3, all_reduce, lambda r: values[r], t, (1,))
    want = np.array([1.0 + 2 * small], np.float32).astype(t.dtype)
    stepwise = (values[0] + values[1]) + values[2]
    assert want[0] != stepwise[0]
    for got in results:
        assert got.dtype == t.dtype and got[0] == want[0]


def test_integer_sum_wraps():
    values = [np.array([100], np.int8), np.array([100], np.int8)]
    (first, second) = run_on_ranks(2, all_reduce, lambda r: values[r], og.i8, (1,))
    assert first[0] == second[0] == np.int8(-56)


@pytest.mark.parametrize("t", [og.boolean, og.bf16, og.u64], ids=lambda t: t.name)
def test_broadcast_from_a_root_other_than_zero(t):
    values = [(np.arange(6).reshape(2, 3) + 7 * r).astype(t.dtype) for r in range(3)]
    results = run_on_ranks(3, lambda x: bcast(x, root=2), lambda r: values[r], t, (2, 3))
    for got in results:
        np.testing.assert_array_equal(got, values[2])


def test_a_root_outside_the_group_fails_at_run_time_naming_the_node():
    with pytest.raises(
        og.ExecutionError,
        match=r"while executing %1 = BroadcastDistributed\[root=2\].*root 2 is not a rank of this group \(size 2\)",
    ):
        run_on_ranks(2, lambda x: bcast(x, root=2), lambda r: np.ones(2, np.float32), og.f32, (2,))


def test_a_root_outside_a_lone_process_fails_at_run_time():
    x = og.parameter(og.f32, (2,))
    exe = og.backend("INTERPRETER").compile(og.Function([bcast(x, root=1)], [x]))
    with pytest.raises(og.ExecutionError, match=r"root 1 is not a rank of this group \(size 1\)"):
        exe(np.ones(2, np.float32))


def test_collectives_run_in_graph_order_on_every_rank():
    # Several collectives in one Function: each rank must match them in the same order.
    x = og.parameter(og.f64, (2,))
    a = all_reduce(x, "sum")
    b = all_reduce(ops.multiply(a, x), "max")
    c = bcast(ops.add(b, x), root=1)
    exe = og.backend("INTERPRETER").compile(og.Function([a, b, c], [x]))
    inputs = [np.array([1.0, 2.0]), np.array([3.0, -1.0])]
    results = LocalGroup(2).run(lambda comm: exe(inputs[comm.rank]))
    a_want = inputs[0] + inputs[1]
    b_want = np.maximum(a_want * inputs[0], a_want * inputs[1])
    for got in results:
        np.testing.assert_array_equal(got[0], a_want)
        np.testing.assert_array_equal(got[1], b_want)
        np.testing.assert_array_equal(got[2], b_want + inputs[1])


def test_fold_constants_never_evaluates_a_collective():
    """Its value comes from the other ranks, so compile time cannot know it."""
    import opgraph as og
    from opgraph import ops
    from opgraph.passes import fold_constants

    fn = og.Function([ops.all_reduce(og.constant([1.0, 2.0]), "sum")], [])
    assert "AllReduce" in str(fold_constants(fn))
