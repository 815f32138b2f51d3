"""Data-parallel training: the graph rewrite, and the math on in-process ranks (threads).

The key property: with equal shards, the mean over ranks of the per-rank mean gradients is the
full-batch mean gradient, so data-parallel training gives the single-process parameters. f64
makes the comparison tight; random data keeps these tests free of scikit-learn.
"""

import numpy as np
import pytest
from digits_mlp import initial_values, loss_function, single_process, train

import opgraph as og
import opgraph.backends.interpreter.kernels.collective  # until wired into kernels/__init__
from opgraph import ops, optim
from opgraph.distributed import (
    CommunicatorError,
    DataParallelOptimizer,
    LocalGroup,
    average_gradients,
    broadcast_parameters,
    data_parallel,
    data_parallel_trainer,
    shard,
)
from opgraph.distributed.communicator import ReduceOp
from opgraph.ops.collective import AllReduce

N = 48  # examples in the full batch: divisible by 2, 3 and 4


def data(n=N, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, (n, 64))
    y = np.eye(10)[rng.integers(0, 10, n)]
    return x, y


def all_reduces(fn):
    return [n for n in fn.nodes if isinstance(n.op, AllReduce)]


# --------------------------------------------------------------------------- the rewrite
@pytest.mark.parametrize(
    ("fuse", "average_loss", "expected"),
    [(True, True, 2), (False, True, 5), (True, False, 1), (False, False, 4)],
)
def test_gradients_and_loss_get_one_all_reduce_mean(fuse, average_loss, expected):
    step = data_parallel(loss_function(8), 4, optim.SGD(), fuse=fuse, average_loss=average_loss)
    nodes = all_reduces(step)
    assert len(nodes) == expected
    assert all(n.op.reduction is ReduceOp.MEAN for n in nodes)
    if average_loss:
        assert step.results[0].op == AllReduce(ReduceOp.MEAN)


@pytest.mark.parametrize("optimizer", [optim.SGD(lr=0.1), optim.Adam()], ids=["sgd", "adam"])
def test_the_step_keeps_training_step_layout(optimizer):
    loss_fn = loss_function(8)
    plain = optim.training_step(loss_fn, 4, optimizer, learning_rate_input=True)
    step = data_parallel(loss_fn, 4, optimizer, learning_rate_input=True)
    assert step.parameter_types == plain.parameter_types
    assert step.flat_result_types == plain.flat_result_types
    assert [p.node.name for p in step.parameters] == [p.node.name for p in plain.parameters]
    assert step.name == "digits_mlp_loss_data_parallel_step"


def test_every_update_reads_the_averaged_gradient():
    # Without the averaging, no AllReduce would lie between the loss's inputs and new params.
    step = data_parallel(loss_function(8), 4, optim.SGD(), fuse=False, average_loss=False)
    reduced = {n.outputs[0] for n in all_reduces(step)}
    for new_param in step.results[1:]:
        inputs = {i for i in new_param.node.inputs}
        seen, stack = set(), list(new_param.node.inputs)
        while stack:
            value = stack.pop()
            if value in reduced:
                seen.add(value)
                continue
            stack.extend(value.node.inputs)
        assert len(seen) == 1, (new_param, inputs)


def test_constant_gradients_are_not_reduced():
    w = og.parameter(og.f64, (3,), name="w")
    unused = og.parameter(og.f64, (2,), name="unused")
    loss_fn = og.Function([ops.reduce_sum(ops.multiply(w, w), (0,))], [w, unused], name="loss")
    step = data_parallel(loss_fn, 2, optim.SGD(), fuse=False, average_loss=False)
    (node,) = all_reduces(step)
    assert node.output_types[0] == og.TensorType(og.f64, (3,))


def test_fusing_groups_gradients_by_element_type():
    a = og.parameter(og.f32, (2, 2), name="a")
    b = og.parameter(og.f64, (3,), name="b")
    c = og.parameter(og.f32, (), name="c")
    grads = [ops.negative(a), ops.negative(b), ops.negative(c)]
    averaged = average_gradients(grads)
    assert [g.type for g in averaged] == [g.type for g in grads]
    fn = og.Function(averaged, [a, b, c])
    assert sorted(n.output_types[0].shape for n in all_reduces(fn)) == [(3,), (5,)]
    single = og.Function(average_gradients(grads, fuse=False), [a, b, c])
    assert len(all_reduces(single)) == 3


def test_data_parallel_optimizer_delegates_state_and_rate():
    inner = optim.Adam(lr=0.02)
    wrapped = DataParallelOptimizer(inner, fuse=False)
    params = [og.parameter(og.f32, (2,), name="w")]
    assert wrapped.state_specs(params) == inner.state_specs(params)
    assert wrapped.lr == 0.02 and "Adam" in repr(wrapped)
    with pytest.raises(og.GraphError, match="needs an opgraph.optim Optimizer, got str"):
        DataParallelOptimizer("adam")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- one process
@pytest.mark.parametrize("fuse", [True, False])
def test_alone_the_step_computes_exactly_the_plain_step(fuse):
    x, y = data()
    loss_fn = loss_function(N)
    plain = og.backend("INTERPRETER").compile(optim.training_step(loss_fn, 4, optim.Adam()))
    step = og.backend("INTERPRETER").compile(data_parallel(loss_fn, 4, optim.Adam(), fuse=fuse))
    args = [*initial_values(), *optim.Adam().initial_state(list(loss_fn.parameters[:4])), x, y]
    for got, want in zip(step(*args), plain(*args), strict=True):
        np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------- several ranks
OPTIMIZERS = [optim.SGD(lr=0.5), optim.Momentum(lr=0.1), optim.Adam(lr=1e-2)]


@pytest.mark.parametrize("backend_name", og.backends())
@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("size", [2, 3])
@pytest.mark.parametrize("optimizer", OPTIMIZERS, ids=["sgd", "momentum", "adam"])
def test_ranks_train_like_one_process_on_the_full_batch(optimizer, size, fuse, backend_name):
    x, y = data()
    steps = 4
    want_losses, want = single_process(optimizer, [[x, y]] * steps, backend=backend_name)

    def rank(comm):
        xs, ys = shard([x, y], contiguous=True)
        trainer = data_parallel_trainer(
            loss_function(len(xs)),
            4,
            optimizer,
            initial_values(seed=comm.rank),
            backend_name,
            fuse=fuse,
        )
        losses, params = train(trainer, [[xs, ys]] * steps)
        return [float(comm.all_reduce(np.array(v), "mean")) for v in losses], params

    for losses, params in LocalGroup(size).run(rank):
        np.testing.assert_allclose(losses, want_losses, rtol=1e-12)
        for got, expected in zip(params, want, strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-13)


def test_without_averaging_ranks_would_diverge():
    # The control for the test above: each rank's own gradient is not the full-batch one.
    x, y = data()
    _, want = single_process(optim.SGD(lr=0.5), [[x, y]])

    def rank(comm):
        xs, ys = shard([x, y], contiguous=True)
        trainer = optim.Trainer(loss_function(len(xs)), 4, optim.SGD(lr=0.5), initial_values())
        return train(trainer, [[xs, ys]])[1]

    for params in LocalGroup(2).run(rank):
        assert not np.allclose(params[0], want[0], rtol=1e-6)


def test_the_step_function_averages_the_loss_and_takes_a_learning_rate():
    x, y = data()
    loss_fn = loss_function(N)
    plain = og.backend("INTERPRETER").compile(
        optim.training_step(loss_fn, 4, optim.SGD(), learning_rate_input=True)
    )
    want = plain(*initial_values(), x, y, np.float64(0.3))

    def rank(comm):
        xs, ys = shard([x, y])  # strided: same full batch, other split
        step = data_parallel(loss_function(len(xs)), 4, optim.SGD(), learning_rate_input=True)
        exe = og.backend("INTERPRETER").compile(step)
        return exe(*broadcast_parameters(initial_values(seed=comm.rank)), xs, ys, np.float64(0.3))

    for got in LocalGroup(4).run(rank):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------ broadcast_parameters
def test_broadcast_parameters_gives_every_rank_the_roots_values():
    def rank(comm):
        mine = [np.full((2, 2), comm.rank, np.float32), np.array([comm.rank], np.int64)]
        return broadcast_parameters(mine, root=1)

    for values in LocalGroup(3).run(rank):
        np.testing.assert_array_equal(values[0], np.ones((2, 2), np.float32))
        assert values[0].dtype == np.float32 and values[1].tolist() == [1]


def test_broadcast_parameters_with_different_layouts_fails_on_every_rank():
    def rank(comm):
        shape = (2,) if comm.rank == 0 else (3,)
        try:
            broadcast_parameters([np.zeros(shape)])
        except CommunicatorError as error:
            return str(error)
        return "no error"

    messages = LocalGroup(2).run(rank)
    assert all("the ranks' arrays differ in number, dtype or shape" in m for m in messages)
    assert "rank 1 has <f8(3,)" in messages[1]
