"""Two real MPI processes on this machine (``mpiexec -n 2``, loopback only).

The ranks run ``mpi_worker.py``. Data-parallel training of the f64 digits MLP must give the
parameters of single-process training on the whole batch; a rank that fails must end the job
(non-zero exit, the error in the output) instead of leaving the other rank waiting.

Network: the tests never open a listener beyond the loopback. MPICH is launched with
``-launcher fork -hosts localhost -iface lo`` and ``UCX_NET_DEVICES=lo``, but Hydra's own
control port listens on every interface whatever the options, so every job runs in a private
network namespace whose only interface is the loopback (``unshare -rn``). Where that is not
possible the tests skip, unless ``OPGRAPH_TEST_MPI_ALLOW_NETWORK=1`` says that listening on
the machine's interfaces is acceptable here.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from digits_mlp import digits, single_process

import opgraph as og
from opgraph import optim

HERE = Path(__file__).resolve().parent
WORKER = HERE / "mpi_worker.py"
TIMEOUT = 180  # seconds for one job: far above the few seconds a job takes

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py not installed"),
    pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec not on PATH"),
    pytest.mark.skipif(
        importlib.util.find_spec("sklearn") is None, reason="scikit-learn not installed"
    ),
]


ISOLATE = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
ALLOW_NETWORK = os.environ.get("OPGRAPH_TEST_MPI_ALLOW_NETWORK") == "1"


@functools.cache
def _can_isolate() -> bool:
    """Whether ``unshare -rn`` gives this user a network namespace with the loopback up."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    try:
        probe = subprocess.run([*ISOLATE, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _isolation() -> list[str]:
    """The command prefix that keeps a job off the network, or a skip when there is none."""
    if _can_isolate():
        return ISOLATE
    if ALLOW_NETWORK:
        return []
    pytest.skip(
        "no private network namespace (unshare -rn failed) and MPICH's Hydra listens on every "
        "interface; set OPGRAPH_TEST_MPI_ALLOW_NETWORK=1 to run the MPI jobs anyway"
    )


def mpiexec(
    *args: str, ranks: int = 2, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run the worker on ``ranks`` local processes, loopback only, one thread each."""
    env = {
        **os.environ,
        "UCX_NET_DEVICES": "lo",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    command = [
        *_isolation(),
        "mpiexec",
        "-launcher",
        "fork",
        "-hosts",
        "localhost",
        "-iface",
        "lo",
        "-n",
        str(ranks),
        sys.executable,
        str(WORKER),
        *args,
    ]
    # A session of its own, so that a hung job can be ended with all its ranks.
    with subprocess.Popen(
        command,
        cwd=HERE,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as job:
        try:
            out, err = job.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            out, err = job.communicate()
            pytest.fail(f"the MPI job did not end within {timeout} s (a hang):\n{out}{err}")
    return subprocess.CompletedProcess(command, job.returncode, out, err)


def test_jobs_run_where_the_loopback_is_the_only_interface():
    if not _can_isolate():
        pytest.skip("no private network namespace here (unshare -rn failed)")
    links = subprocess.run(
        [*ISOLATE, "ip", "-o", "link"], capture_output=True, text=True, timeout=30, check=True
    ).stdout.splitlines()
    assert [line.split(":")[1].strip() for line in links] == ["lo"], links


def test_collectives_on_two_ranks():
    job = mpiexec("collectives")
    assert job.returncode == 0, job.stdout + job.stderr
    assert "rank 0 of 2: collectives OK" in job.stdout
    assert "rank 1 of 2: collectives OK" in job.stdout


CPU = pytest.mark.skipif("CPU" not in og.backends(), reason="the CPU backend is not registered")


@pytest.mark.parametrize(
    ("optimizer", "mode", "steps", "backend"),
    [
        ("sgd", "full", 5, "INTERPRETER"),
        ("adam", "full", 5, "INTERPRETER"),
        ("adam", "minibatch", 30, "INTERPRETER"),
        pytest.param("adam", "minibatch", 30, "CPU", marks=CPU),
    ],
)
def test_two_rank_training_matches_one_process(tmp_path, optimizer, mode, steps, backend):
    job = mpiexec("train", str(tmp_path), optimizer, mode, str(steps), backend)
    assert job.returncode == 0, job.stdout + job.stderr
    x, y = digits(1344)
    if mode == "full":
        batches = [[x, y]] * steps  # the whole batch in one process
    else:  # global batches of 64 = 2 ranks x 32, in shard_batches' permutation of each epoch
        order = [np.random.default_rng(epoch).permutation(len(x)) for epoch in range(2)]
        batches = [[x[o[i : i + 64]], y[o[i : i + 64]]] for o in order for i in range(0, 1344, 64)][
            :steps
        ]
    rule = {"sgd": optim.SGD(lr=0.5), "adam": optim.Adam(lr=1e-2)}[optimizer]
    losses, params = single_process(rule, batches, backend=backend)
    for rank in (0, 1):
        saved = np.load(tmp_path / f"rank{rank}.npz")
        for i, want in enumerate(params):
            np.testing.assert_allclose(saved[f"arr_{i}"], want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(saved["losses"], losses, rtol=1e-10)


def test_a_failing_rank_ends_the_job():
    job = mpiexec("fail", "1")
    assert job.returncode != 0
    output = job.stdout + job.stderr
    assert "RuntimeError: deliberate failure on rank 1" in output
    assert "aborting all ranks (MPI_Abort)" in output
    assert "unreachable" not in output


def test_a_collective_without_init_fails_clearly():
    job = mpiexec("no-init")
    assert job.returncode != 0
    assert "without an opgraph communicator; call og.distributed.init()" in job.stderr


def test_init_without_mpi4py_under_mpiexec_raises_instead_of_running_alone():
    job = mpiexec("no-mpi4py")
    assert job.returncode != 0
    assert "CommunicatorError: og.distributed.init: this process was started by an MPI " in (
        job.stderr
    )
    assert "PMI_RANK=" in job.stderr
    assert "unreachable" not in job.stdout


def test_a_hung_job_is_ended_with_all_its_ranks():
    # A rank that never joins the collective (no exception, so no abort): only the timeout
    # ends the job, and it must take every process of the job with it.
    with pytest.raises(pytest.fail.Exception, match="did not end within 10 s"):
        mpiexec("hang", timeout=10)
    assert _live_workers("hang", settle=10.0) == []


def _live_workers(mode: str, settle: float) -> list[str]:
    """The worker processes of ``mode`` still alive (not zombies), waiting up to ``settle`` s
    for killed ones to be gone: a SIGKILLed rank whose parent died too is reaped by init
    some moments later, and until then pgrep still lists it."""
    deadline = time.monotonic() + settle
    while True:
        found = subprocess.run(
            ["pgrep", "-f", f"{WORKER} {mode}"], capture_output=True, text=True
        ).stdout.split()
        alive = [pid for pid in found if _state(pid) not in ("Z", "X", "")]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _state(pid: str) -> str:
    """The process state letter of ``pid`` ('' when it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]
