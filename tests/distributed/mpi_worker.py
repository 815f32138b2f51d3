"""What each rank runs in the 2-process tests (launched by test_mpi_launch.py with mpiexec).

    mpiexec -launcher fork -hosts localhost -iface lo -n 2 python mpi_worker.py SCENARIO [args]

Scenarios:
    collectives   every reduction and broadcast against values computed from rank and size
    train OUT OPTIMIZER MODE STEPS BACKEND
                  data-parallel training of the f64 digits MLP; each rank saves OUT/rank<r>.npz
    fail RANK     rank RANK raises after init(): the job must end, not hang
    hang          rank 1 never joins a collective (only a timeout ends the job)
    no-init       a collective without og.distributed.init(): a clear error on every rank
    no-mpi4py     og.distributed.init() with mpi4py hidden: under mpiexec it must raise, not
                  fall back to one process per rank
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np
from digits_mlp import digits, initial_values, loss_function, train

import opgraph as og
import opgraph.distributed as dist
from opgraph import optim
from opgraph.ops.collective import all_reduce, broadcast_distributed

OPTIMIZERS = {"sgd": optim.SGD(lr=0.5), "adam": optim.Adam(lr=1e-2)}


def run_graph(build, x: np.ndarray, element_type: og.ElementType) -> np.ndarray:
    p = og.parameter(element_type, x.shape)
    return og.backend("INTERPRETER").compile(og.Function([build(p)], [p]))(x)[0]


def collectives() -> None:
    comm = dist.init()
    rank, size = comm.rank, comm.size
    reductions = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max, "mean": np.mean}
    for t in (og.f16, og.bf16, og.f32, og.f64, og.i8, og.i32, og.u64):
        base = np.array([1.0, 2.0, 3.0 if t.is_integral and not t.is_signed else -3.0])
        per_rank = [base * (r + 1) for r in range(size)]  # the value on each rank
        for op, reduce in reductions.items():
            if op == "mean" and not t.is_real:
                continue
            x = per_rank[rank].astype(t.dtype)
            got = run_graph(lambda p, op=op: all_reduce(p, op), x, t)
            assert got.dtype == t.dtype, (t, op, got.dtype)
            want = reduce(per_rank, axis=0)
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2, err_msg=f"{t} {op}")
    for t in (og.boolean, og.bf16, og.f64, og.i16):
        mine = (np.arange(4) + 10 * rank).astype(t.dtype)
        got = run_graph(lambda p: broadcast_distributed(p, root=size - 1), mine, t)
        np.testing.assert_array_equal(got, (np.arange(4) + 10 * (size - 1)).astype(t.dtype))
    assert isinstance(run_graph(lambda p: all_reduce(p), np.float64(rank), og.f64), np.ndarray)
    halves = comm.all_reduce(np.full(3, 0.1, ml_dtypes.bfloat16), "sum")
    assert halves.dtype == ml_dtypes.bfloat16
    comm.barrier()
    print(f"rank {rank} of {size}: collectives OK", flush=True)


def training(out: str, optimizer: str, mode: str, steps: int, backend: str) -> None:
    comm = dist.init()
    x, y = digits(1344)
    if mode == "full":
        xs, ys = dist.shard([x, y], contiguous=True)
        batches = [[xs, ys]] * steps
    else:
        batches = [b for epoch in range(2) for b in dist.shard_batches([x, y], 32, seed=epoch)]
        batches = batches[:steps]
    trainer = dist.data_parallel_trainer(
        loss_function(len(batches[0][0])),
        4,
        OPTIMIZERS[optimizer],
        initial_values(seed=0 if comm.rank == 0 else 100 + comm.rank),  # rank 0's are kept
        backend,
    )
    losses, params = train(trainer, batches)
    global_losses = [float(comm.all_reduce(np.array(loss), "mean")) for loss in losses]
    np.savez(Path(out) / f"rank{comm.rank}.npz", *params, losses=np.array(global_losses))
    print(f"rank {comm.rank}: trained {len(batches)} steps", flush=True)


def fail(failing_rank: int) -> None:
    comm = dist.init()
    if comm.rank == failing_rank:
        raise RuntimeError(f"deliberate failure on rank {comm.rank}")
    # The other ranks wait in a collective the failing rank never joins.
    run_graph(lambda p: all_reduce(p), np.ones(3), og.f64)
    print("unreachable: the collective completed", flush=True)


def hang() -> None:
    comm = dist.init()
    if comm.rank == 1:
        time.sleep(3600)  # never joins the collective below
    run_graph(lambda p: all_reduce(p), np.ones(3), og.f64)


def no_init() -> None:
    from mpi4py import MPI  # MPI is running, but no opgraph communicator is selected

    assert MPI.COMM_WORLD.Get_size() > 1
    run_graph(lambda p: all_reduce(p), np.ones(3), og.f64)


def no_mpi4py() -> None:
    sys.modules["mpi4py"] = None  # type: ignore[assignment]  # as if it were not installed
    dist.init()
    print("unreachable: init() fell back to a single process under mpiexec")


if __name__ == "__main__":
    scenario, *rest = sys.argv[1:]
    if scenario == "collectives":
        collectives()
    elif scenario == "train":
        training(rest[0], rest[1], rest[2], int(rest[3]), rest[4])
    elif scenario == "fail":
        fail(int(rest[0]))
    elif scenario == "hang":
        hang()
    elif scenario == "no-init":
        no_init()
    elif scenario == "no-mpi4py":
        no_mpi4py()
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
