"""Communicators: the single-process one, the reference reduction, selecting the current one
(process-wide and per thread), the error without one (under MPI or not), init's choices and
its fall back without MPI, and the threaded LocalGroup."""

import os
import sys
import threading
import time
import types

import ml_dtypes
import numpy as np
import pytest

import opgraph as og
import opgraph.backends.interpreter.kernels.collective  # until wired into kernels/__init__
from opgraph.distributed import (
    Communicator,
    CommunicatorError,
    LocalGroup,
    ReduceOp,
    SingleProcessCommunicator,
    SingleProcessFallbackWarning,
    current_communicator,
    get_communicator,
    set_communicator,
    use_communicator,
)
from opgraph.distributed.communicator import MPICommunicator, as_reduce_op, reduce_arrays
from opgraph.distributed.config import LAUNCHER_VARIABLES, launched_by_mpi
from opgraph.ops.collective import all_reduce, broadcast_distributed


@pytest.fixture(autouse=True)
def no_process_wide_communicator():
    """Every test starts and ends with no process-wide communicator."""
    previous = set_communicator(None)
    yield
    set_communicator(previous)


# ------------------------------------------------------------------------ one process
@pytest.mark.parametrize("op", list(ReduceOp))
def test_single_process_reductions_are_copies(op):
    comm = SingleProcessCommunicator()
    x = np.array([[1.5, -2.0], [np.nan, np.inf]], np.float32)
    y = comm.all_reduce(x, op)
    np.testing.assert_array_equal(y, x)
    assert y.dtype == x.dtype and y is not x and not np.shares_memory(x, y)


def test_single_process_broadcast_is_a_copy_of_any_type():
    comm = SingleProcessCommunicator()
    for x in (np.array([True, False]), np.ones((2, 0), ml_dtypes.bfloat16), np.int64(7)):
        y = comm.broadcast(np.asarray(x), 0)
        np.testing.assert_array_equal(y, x)
        assert y.dtype == np.asarray(x).dtype and y.shape == np.asarray(x).shape
    with pytest.raises(og.GraphError, match=r"root 1 is not a rank of this group \(size 1\)"):
        comm.broadcast(np.ones(2), 1)
    assert (comm.rank, comm.size) == (0, 1)
    comm.barrier()


def test_communicators_satisfy_the_protocol():
    assert isinstance(SingleProcessCommunicator(), Communicator)
    assert isinstance(LocalGroup(2).communicators[1], Communicator)
    assert not isinstance(object(), Communicator)


# ------------------------------------------------------------------ reference reduction
def test_reduce_arrays_in_rank_order():
    arrays = [np.array([1.0, 5.0]), np.array([3.0, -1.0]), np.array([2.0, 2.0])]
    np.testing.assert_array_equal(reduce_arrays(arrays, "sum"), [6.0, 6.0])
    np.testing.assert_array_equal(reduce_arrays(arrays, "prod"), [6.0, -10.0])
    np.testing.assert_array_equal(reduce_arrays(arrays, "min"), [1.0, -1.0])
    np.testing.assert_array_equal(reduce_arrays(arrays, "max"), [3.0, 5.0])
    np.testing.assert_array_equal(reduce_arrays(arrays, "mean"), [2.0, 2.0])


def test_reduce_arrays_keeps_rank_0_shapes():
    result = reduce_arrays([np.float32(1.0), np.float32(2.0)], ReduceOp.SUM)
    assert result.shape == () and result.dtype == np.float32 and result == 3.0


def test_reduce_arrays_wraps_integers_and_rounds_16_bit_floats_once():
    assert reduce_arrays([np.array([200], np.uint8)] * 2, "sum")[0] == 144
    eps = np.finfo(np.float16).eps / 2  # 1 + eps/2 + eps/2: one rounding gives 1 + eps
    values = [np.array([1.0], np.float16), np.array([eps], np.float16), np.array([eps], np.float16)]
    assert reduce_arrays(values, "sum")[0] == np.float16(1.0 + 2 * eps)


def test_reduce_arrays_errors():
    with pytest.raises(og.GraphError, match="boolean arrays have no arithmetic reduction"):
        reduce_arrays([np.array([True])], "max")
    with pytest.raises(og.GraphError, match="mean needs floating-point arrays, got int32"):
        reduce_arrays([np.array([1], np.int32)], "mean")
    with pytest.raises(og.GraphError, match=r"rank 1 has float64\[3\], rank 0 has float64\[2\]"):
        reduce_arrays([np.ones(2), np.ones(3)], "sum")
    with pytest.raises(og.GraphError, match="no arrays"):
        reduce_arrays([], "sum")
    with pytest.raises(og.GraphError, match="reduction 'avg' is not one of sum, prod, min, max"):
        as_reduce_op("avg")


# ------------------------------------------------------------------ the current communicator
NO_COMMUNICATOR = r"no communicator set up; call og\.distributed\.init\(\) first .*init\('single'\)"


def test_a_collective_with_no_communicator_set_up_is_an_error():
    assert get_communicator() is None
    with pytest.raises(CommunicatorError, match=NO_COMMUNICATOR):
        current_communicator()
    with pytest.raises(CommunicatorError, match=NO_COMMUNICATOR):
        og.distributed.rank()
    x = og.parameter(og.f32, (2,))
    for build in (lambda v: all_reduce(v), lambda v: broadcast_distributed(v)):
        exe = og.backend("INTERPRETER").compile(og.Function([build(x)], [x]))
        with pytest.raises(og.ExecutionError, match=NO_COMMUNICATOR) as info:
            exe(np.ones(2, np.float32))
        assert isinstance(info.value.__cause__, og.CommunicatorError)


def test_communicator_error_is_an_opgraph_error_exported_from_opgraph():
    assert og.CommunicatorError is CommunicatorError
    assert issubclass(CommunicatorError, og.OpgraphError)


def test_the_single_process_communicator_can_be_chosen_explicitly():
    comm = og.distributed.init("single")
    try:
        assert isinstance(comm, SingleProcessCommunicator)
        assert og.distributed.init("single") is comm  # idempotent
        assert current_communicator() is comm
        assert (og.distributed.rank(), og.distributed.size()) == (0, 1)
        x = og.parameter(og.f32, (2,))
        exe = og.backend("INTERPRETER").compile(og.Function([all_reduce(x, "mean")], [x]))
        np.testing.assert_array_equal(exe(np.array([1.5, 2.0], np.float32))[0], [1.5, 2.0])
    finally:
        og.distributed.shutdown()
    assert get_communicator() is None and not og.distributed.is_initialized()


def test_init_rejects_an_unknown_choice():
    with pytest.raises(CommunicatorError, match=r"comm='nccl' is not one of 'mpi', 'single'"):
        og.distributed.init("nccl")


@pytest.fixture
def no_mpi4py(monkeypatch):
    """mpi4py looks not installed, and no MPI launcher variable is set."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `import mpi4py` fail
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    for name in list(os.environ):
        if name in LAUNCHER_VARIABLES or name.startswith("HYDRA_"):
            monkeypatch.delenv(name)
    yield
    og.distributed.shutdown()


def test_init_without_mpi_falls_back_to_one_process_with_a_warning(no_mpi4py):
    with pytest.warns(SingleProcessFallbackWarning, match="mpi4py is not installed, running as"):
        comm = og.distributed.init()
    assert isinstance(comm, SingleProcessCommunicator)
    assert current_communicator() is comm


@pytest.mark.parametrize(
    "variables",
    [
        {"PMI_RANK": "1", "PMI_SIZE": "2"},  # MPICH's Hydra, Intel MPI
        {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"},  # Open MPI
        {"HYDRA_CONTROL_FD": "5"},
    ],
)
def test_init_without_mpi_under_an_mpi_launcher_raises(no_mpi4py, monkeypatch, variables):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    shown = ", ".join(f"{k}={v}" for k, v in sorted(variables.items()))
    with pytest.raises(CommunicatorError, match=rf"started by an MPI launcher \({shown}\)"):
        og.distributed.init()
    assert get_communicator() is None


def test_asking_for_mpi_without_mpi4py_raises(no_mpi4py):
    with pytest.raises(CommunicatorError, match=r"needs mpi4py .*pip install 'opgraph\[dist\]'"):
        og.distributed.init("mpi")


def test_launcher_detection_reads_the_launchers_variables(monkeypatch):
    for name in list(os.environ):
        if name in LAUNCHER_VARIABLES or name.startswith("HYDRA_"):
            monkeypatch.delenv(name)
    assert launched_by_mpi() == ""
    monkeypatch.setenv("SLURM_PROCID", "0")  # srun starts plain programs too: not counted
    assert launched_by_mpi() == ""
    monkeypatch.setenv("PMI_SIZE", "2")
    assert launched_by_mpi() == "PMI_SIZE=2"


def test_set_communicator_is_process_wide_and_returns_the_previous():
    group = LocalGroup(1)
    assert set_communicator(group.communicators[0]) is None
    seen = []
    thread = threading.Thread(target=lambda: seen.append(current_communicator()))
    thread.start()
    thread.join()
    assert seen == [group.communicators[0]]
    assert set_communicator(None) is group.communicators[0]


def test_use_communicator_overrides_for_this_thread_only_and_nests():
    outer, inner = LocalGroup(1).communicators[0], SingleProcessCommunicator()
    seen = []
    with use_communicator(outer):
        with use_communicator(inner):
            assert current_communicator() is inner
            thread = threading.Thread(target=lambda: seen.append(get_communicator()))
            thread.start()
            thread.join()
        assert current_communicator() is outer
    assert get_communicator() is None
    assert seen == [None]


def test_selecting_something_that_is_not_a_communicator_fails():
    with pytest.raises(og.GraphError, match="int is not a Communicator"):
        set_communicator(3)  # type: ignore[arg-type]
    with (
        pytest.raises(og.GraphError, match="str is not a Communicator"),
        use_communicator("mpi"),  # type: ignore[arg-type]
    ):
        pass


def fake_mpi(size: int, initialized: bool = True) -> types.ModuleType:
    """A stand-in for ``mpi4py.MPI`` as the library sees it in ``sys.modules``."""
    world = types.SimpleNamespace(Get_rank=lambda: 1, Get_size=lambda: size)
    module = types.ModuleType("mpi4py.MPI")
    module.Is_initialized = lambda: initialized  # type: ignore[attr-defined]
    module.Is_finalized = lambda: False  # type: ignore[attr-defined]
    module.COMM_WORLD = world  # type: ignore[attr-defined]
    return module


def test_a_collective_on_one_of_several_mpi_ranks_needs_init(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", fake_mpi(size=4))
    with pytest.raises(
        CommunicatorError,
        match=r"on MPI rank 1 of 4 without an opgraph communicator; call og\.distributed\.init\(\)",
    ):
        current_communicator()
    x = og.parameter(og.f32, (2,))
    exe = og.backend("INTERPRETER").compile(og.Function([all_reduce(x)], [x]))
    with pytest.raises(
        og.ExecutionError, match=r"while executing %1 = AllReduce.*og\.distributed\.init"
    ):
        exe(np.ones(2, np.float32))
    with use_communicator(SingleProcessCommunicator()):  # selecting one is enough
        exe(np.ones(2, np.float32))


@pytest.mark.parametrize(("size", "initialized"), [(1, True), (4, False)])
def test_a_one_rank_or_stopped_mpi_still_needs_a_communicator(monkeypatch, size, initialized):
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", fake_mpi(size, initialized))
    with pytest.raises(CommunicatorError, match=NO_COMMUNICATOR):
        current_communicator()


def test_mpi_communicator_without_mpi4py_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` fail
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)
    with pytest.raises(CommunicatorError, match=r"needs mpi4py .*pip install 'opgraph\[dist\]'"):
        MPICommunicator()


# ------------------------------------------------------------------------- LocalGroup
def test_local_group_runs_each_rank_in_its_own_thread_with_its_communicator():
    group = LocalGroup(3)
    results = group.run(
        lambda comm: (comm.rank, current_communicator() is comm, threading.current_thread().name)
    )
    assert results == [(r, True, f"opgraph-rank-{r}") for r in range(3)]
    assert get_communicator() is None


def test_local_group_collectives():
    group = LocalGroup(3)

    def body(comm):
        total = comm.all_reduce(np.array([comm.rank + 1.0]), "sum")
        comm.barrier()
        shared = comm.broadcast(np.array([10 * comm.rank]), root=1)
        return float(total[0]), int(shared[0])

    assert group.run(body) == [(6.0, 10)] * 3
    assert group.run(body) == [(6.0, 10)] * 3  # a group can run again


def test_a_failing_rank_releases_the_others_and_is_reported():
    group = LocalGroup(3, timeout=30)

    def body(comm):
        if comm.rank == 1:
            raise ValueError("rank 1 broke")
        return comm.all_reduce(np.ones(2))  # never completes: rank 1 does not join

    with pytest.raises(ValueError, match="rank 1 broke") as info:
        group.run(body)
    assert "raised on rank 1 of a LocalGroup of 3" in info.value.__notes__
    assert group.run(lambda comm: comm.all_reduce(np.ones(1))[0]) == [3.0] * 3


def test_a_rank_may_reuse_its_buffer_as_soon_as_a_collective_returns(monkeypatch):
    # A backend hands a kernel a view of its arena and reuses the memory after the kernel
    # returns; a slower rank must still reduce the values that were sent.
    from opgraph.distributed import local

    def slow_on_rank_1(arrays, op):
        if threading.current_thread().name == "opgraph-rank-1":
            time.sleep(0.2)
        return reduce_arrays(arrays, op)

    monkeypatch.setattr(local, "reduce_arrays", slow_on_rank_1)

    def body(comm):
        buffer = np.full(3, comm.rank + 1.0)
        total = comm.all_reduce(buffer, "sum")
        buffer[:] = -100.0  # reuse at once
        shared = comm.broadcast(buffer if comm.rank else np.full(3, 7.0), root=0)
        return total.tolist(), shared.tolist()

    assert LocalGroup(2).run(body) == [([3.0] * 3, [7.0] * 3)] * 2


def test_a_rank_that_never_joins_times_out():
    group = LocalGroup(2, timeout=0.2)
    with pytest.raises(
        CommunicatorError, match="another rank failed or did not reach the collective within 0.2 s"
    ):
        group.run(lambda comm: comm.barrier() if comm.rank == 0 else None)


def test_mismatched_arrays_fail_on_every_rank():
    group = LocalGroup(2)
    with pytest.raises(og.GraphError, match="every rank must run the same Function"):
        group.run(lambda comm: comm.all_reduce(np.ones(comm.rank + 1)))


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_local_group_size_must_be_positive(size):
    with pytest.raises(og.GraphError, match="size must be a positive int"):
        LocalGroup(size)
