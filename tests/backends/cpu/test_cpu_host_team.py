"""The runtime's jobs on a host's GNU OpenMP team, and when a caller wakes sleeping workers.

* ``og_set_team(GOMP_parallel)``: ``og_parallel`` shares its blocks out to the OpenMP team of
  the libgomp already in the process (the torch bridge declares torch's). The runtime's C
  source is compiled here with ``-DOG_TEST_HOOKS`` and a recording kernel (as in
  ``test_cpu_threadpool.py``): every element must run exactly once, on a participant index
  below the thread count, with the team's threads taking part, errors reaching the caller,
  and the blocks a stalled team thread has not started taken over by the caller.
* The backend follows ``opgraph.runtime.host_threads``: declared, compiled kernels run on the
  team (the counters say so) and stay exact; withdrawn, they run on the pool's own workers.
* A caller wakes sleeping workers only when the blocks left after its first one are worth a
  wake-up (``og_set_wake_worth``): the wake-up counter says whether it did.

Nothing is timed; the timeout turns a hang into a failure.
"""

import ctypes
import dataclasses
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from pool_sleep import wait_asleep  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters
from opgraph.backends.cpu.host_team import gomp_parallel
from opgraph.runtime import host_threads

pytestmark = pytest.mark.timeout(300, method="thread")

#: Calls before a team thread (or woken worker) must have run a block on a loaded machine.
ATTEMPTS = 200

KERNEL = r"""
#include <time.h>
/* T[0] hits, T[1] who (per element), T[2] flags: flags[0] element whose block fails with
   code 4 (-1: none); flags[1] microseconds each block sleeps. */
int og_test_kernel(void* const* T, char* A, long lo, long hi) {
  int* hits = (int*)T[0];
  int* who = (int*)T[1];
  const long* flags = (const long*)T[2];
  if (flags[1]) {
    struct timespec t = {0, flags[1] * 1000};
    nanosleep(&t, 0);
  }
  for (long i = lo; i < hi; ++i) {
    hits[i] += 1;
    who[i] = og_worker_index();
  }
  return flags[0] >= lo && flags[0] < hi ? 4 : 0;
}
"""


def _gnu_openmp() -> int:
    """GOMP_parallel of a loaded libgomp: torch's when torch is imported, else the system's
    (loaded here from the linker's search path; skipped where there is none)."""
    found = gomp_parallel("libgomp.so.1")
    if found is None:
        try:
            ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pytest.skip("no GNU OpenMP runtime (libgomp.so.1) on this machine")
        found = gomp_parallel("libgomp.so.1")
    assert found is not None
    return found


@pytest.fixture(scope="module")
def pool(hooked_runtime: Callable[[str, str], ctypes.CDLL]) -> ctypes.CDLL:
    lib = hooked_runtime("team", KERNEL)
    lib.og_set_team.argtypes = [ctypes.c_void_p]
    lib.og_set_wake_worth.argtypes = [ctypes.c_long]
    lib.og_set_rewake.argtypes = [ctypes.c_long, ctypes.c_long]
    return lib


@pytest.fixture
def team(pool: ctypes.CDLL) -> Iterator[ctypes.CDLL]:
    """The test pool running on the host's OpenMP team; back to its own workers after."""
    pool.og_set_team(_gnu_openmp())
    assert pool.og_team_set() == 1
    yield pool
    pool.og_set_team(None)
    pool.og_test_stall(0, 0)
    pool.og_test_release()


@dataclasses.dataclass
class Run:
    hits: np.ndarray
    who: np.ndarray
    code: int

    def check(self, threads: int) -> None:
        assert (self.hits == 1).all(), "a block ran twice or never"
        assert self.who.min() >= 0 and self.who.max() < threads


def call(lib: ctypes.CDLL, n: int, threads: int, grain: int = 1, fail_at: int = -1,
         block_usec: int = 0) -> Run:  # fmt: skip
    hits = np.zeros(n, np.int32)
    who = np.full(n, -1, np.int32)
    flags = np.array([fail_at, block_usec], np.int64)
    table = (ctypes.c_void_p * 3)(*(a.ctypes.data for a in (hits, who, flags)))
    kernel = ctypes.cast(lib.og_test_kernel, ctypes.c_void_p).value
    return Run(hits, who, lib.og_parallel(kernel, table, None, n, grain, threads))


@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize(("n", "grain"), [(1, 1), (15, 1), (1000, 7), (100_003, 1024)])
def test_team_runs_every_element_once_on_a_valid_participant(team, threads, n, grain):
    before = runtime_counters(team)
    for _ in range(20):
        call(team, n, threads, grain).check(threads)
    after = runtime_counters(team)
    shared = after.jobs - before.jobs
    assert shared == (20 if n > grain else 0)
    if after.team_late == before.team_late:  # no team thread was late: all on the team
        assert after.team_jobs - before.team_jobs == shared
    else:  # a late job ran on the team; the own pool runs the jobs after it (<= the last)
        assert 0 < after.team_jobs - before.team_jobs <= shared


def test_team_threads_take_part(team):
    for _ in range(ATTEMPTS):
        run = call(team, 4096, 2, grain=16, block_usec=50)
        run.check(2)
        if (run.who == 1).any():
            return
    pytest.fail(f"no block ran on the team's other thread in {ATTEMPTS} calls")


def test_team_error_of_any_block_reaches_the_caller(team):
    for fail_at in (0, 4999, 9999):
        assert call(team, 10_000, 4, grain=16, fail_at=fail_at).code == 4
    assert call(team, 10_000, 4, grain=16).code == 0


def test_team_blocks_a_stalled_thread_has_not_started_are_taken_over(team):
    """A team thread runs one block and stops for 0.3 s: the caller does the rest of its
    home (the team's closing barrier then waits for the stalled thread, no longer)."""
    for _ in range(ATTEMPTS):
        team.og_test_stall(3, 300_000)
        run = call(team, 4096, 2, grain=16, block_usec=200)
        run.check(2)
        if team.og_test_stalled() == 0 and (run.who == 1).sum() == 32:
            # one block (4096 elements in 128 blocks of 32) by the stalled thread
            assert (run.who[2048:] == 0).sum() == 2048 - 32
            return
    pytest.fail("the stall hook never caught a team thread after its first block")


def test_after_a_late_team_thread_the_next_jobs_run_on_the_own_workers(team):
    """A team thread stalls 0.3 s after its first block: the caller waits for it at the
    team's closing barrier, so the next jobs run on the pool's own workers, exactly."""
    for _ in range(ATTEMPTS):
        team.og_test_stall(3, 300_000)
        before = runtime_counters(team)
        call(team, 4096, 2, grain=16, block_usec=200).check(2)
        late = runtime_counters(team)
        if late.team_late > before.team_late:
            break
    else:
        pytest.fail("the stall hook never caught a team thread after its first block")
    for _ in range(10):
        call(team, 4096, 2, grain=16).check(2)
    after = runtime_counters(team)
    assert after.jobs - late.jobs == 10
    assert after.team_jobs == late.team_jobs  # the next 64 jobs: the own workers
    team.og_set_team(_gnu_openmp())  # a new declaration tries the team again at once
    call(team, 4096, 2, grain=16).check(2)
    assert runtime_counters(team).team_jobs == after.team_jobs + 1


def test_pool_back_on_its_own_workers_after_the_team(pool):
    pool.og_set_team(None)
    before = runtime_counters(pool)
    for _ in range(20):
        call(pool, 10_000, 2, grain=16).check(2)
    after = runtime_counters(pool)
    assert after.jobs - before.jobs == 20
    assert after.team_jobs == before.team_jobs


def test_caller_wakes_sleeping_workers_only_for_work_worth_it(pool):
    pool.og_set_team(None)
    call(pool, 10_000, 2, grain=16).check(2)  # the worker exists
    try:
        pool.og_set_wake_worth(1 << 62)  # nothing is worth a wake-up
        pool.og_set_rewake(1 << 62, -1)  # nor re-woken (test_cpu_pool_wakes.py)
        wait_asleep(pool)
        before = runtime_counters(pool)
        run = call(pool, 4096, 2, grain=16, block_usec=20)
        run.check(2)
        assert runtime_counters(pool).wakes == before.wakes
        # ... except a job of a few large blocks (one per thread): woken when published
        wait_asleep(pool)
        before = runtime_counters(pool)
        call(pool, 4096, 2, grain=2048).check(2)
        assert runtime_counters(pool).wakes == before.wakes + 1
        pool.og_set_wake_worth(0)  # every job is
        wait_asleep(pool)
        before = runtime_counters(pool)
        call(pool, 4096, 2, grain=16).check(2)
        assert runtime_counters(pool).wakes == before.wakes + 1
    finally:
        pool.og_set_wake_worth(125_000)
        pool.og_set_rewake(-1, -1)


# ------------------------------------------------- the backend follows the declaration


@pytest.fixture
def declared() -> Iterator[None]:
    _gnu_openmp()
    host_threads.declare_host_openmp("libgomp.so.1")
    yield
    host_threads.withdraw_host_openmp()


def test_compiled_product_runs_on_the_declared_team_and_stays_exact(declared):
    backend = CpuBackend(dataclasses.replace(default_config(), num_threads=2))
    a, b = og.parameter(og.f32, (96, 200)), og.parameter(og.f32, (200, 130))
    exe = backend.compile(og.Function([ops.matmul(a, b)], [a, b]))
    rng = np.random.default_rng(3)
    u = rng.integers(-4, 4, (96, 200)).astype(np.float32)  # exact in any order
    v = rng.integers(-4, 4, (200, 130)).astype(np.float32)
    library = backend.toolchain.runtime()
    assert library.og_team_set() == 1
    # Modules resolve og_parallel against the first runtime loaded into the process (an earlier
    # test's cache directory may have loaded another one): count that one's jobs.
    pool = ctypes.CDLL(None)
    before = runtime_counters(pool)
    for _ in range(10):
        np.testing.assert_array_equal(exe(u, v)[0], u @ v)
    on_team = runtime_counters(pool)
    assert on_team.team_jobs > before.team_jobs
    host_threads.withdraw_host_openmp()
    assert library.og_team_set() == 0
    for _ in range(10):
        np.testing.assert_array_equal(exe(u, v)[0], u @ v)
    after = runtime_counters(pool)
    assert after.team_jobs == on_team.team_jobs and after.jobs > on_team.jobs


def test_a_library_not_loaded_is_never_loaded_and_leaves_the_own_pool(cpu):
    name = "libopgraph-no-such-openmp.so.1"
    assert gomp_parallel(name) is None
    library = cpu.toolchain.runtime()
    try:
        host_threads.declare_host_openmp(name)
        assert library.og_team_set() == 0
    finally:
        host_threads.withdraw_host_openmp()
    assert name not in Path(f"/proc/{os.getpid()}/maps").read_text()
