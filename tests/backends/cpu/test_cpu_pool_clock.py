"""The pool's block clock (``og_set_block_clock``, ``block_times``): CPU time inside range
functions, callers' and the other participants' apart.

Off by default: jobs then add nothing. On, every block a participant runs is one timed run on
its side, a serial ``og_parallel`` one caller run, and a range run inside a timed one (a nested
``og_parallel``, run serially because the pool is busy) is not timed again. The kernel burns
thread CPU time (a loop over ``clock_gettime``) so that every timed run has a positive time.
Nothing here is timed against a bound; the timeout turns a hang into a failure.
"""

import ctypes
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from opgraph.backends.cpu.codegen.runtime_counters import BlockTimes, block_times, runtime_counters

pytestmark = pytest.mark.timeout(300, method="thread")

KERNEL = r"""
/* T[0] hits per element; each block spins until it has used 20 µs of its thread's CPU. */
static void og_clock_burn(void) {
  long t0 = og_thread_ns();
  while (og_thread_ns() - t0 < 20000) og_relax();
}
int og_clock_kernel(void* const* T, char* A, long lo, long hi) {
  int* hits = (int*)T[0];
  for (long i = lo; i < hi; ++i) hits[i] += 1;
  og_clock_burn();
  return 0;
}
/* One block that runs og_clock_kernel over its range through og_parallel (nested: serial). */
int og_clock_nested(void* const* T, char* A, long lo, long hi) {
  return og_parallel(og_clock_kernel, T, A, hi - lo, 1, 2);
}
"""

N, GRAIN = 64, 1  # 64 blocks for two threads


@pytest.fixture(scope="module")
def pool(hooked_runtime: Callable[[str, str], ctypes.CDLL]) -> ctypes.CDLL:
    lib = hooked_runtime("clock", KERNEL)
    lib.og_set_block_clock.argtypes = [ctypes.c_long]
    return lib


@pytest.fixture
def clock(pool: ctypes.CDLL) -> Iterator[ctypes.CDLL]:
    pool.og_set_block_clock(1)
    yield pool
    pool.og_set_block_clock(0)


def _run(pool: ctypes.CDLL, kernel: str, total: int, threads: int) -> BlockTimes:
    """The block clock's change over one ``og_parallel`` of ``kernel``."""
    hits = np.zeros(N, np.int32)
    table = (ctypes.c_void_p * 1)(hits.ctypes.data)
    fn = ctypes.cast(getattr(pool, kernel), ctypes.c_void_p).value
    before = block_times(pool)
    assert pool.og_parallel(fn, table, None, total, GRAIN, threads) == 0
    after = block_times(pool)
    assert (hits[:total] == 1).all(), "a block ran twice or never"
    return BlockTimes(*(a - b for a, b in zip(after, before, strict=True)))


def test_the_clock_is_off_by_default(pool):
    assert _run(pool, "og_clock_kernel", N, 2) == BlockTimes(0, 0, 0, 0)


def test_every_block_is_one_timed_run_on_its_side(clock):
    before = runtime_counters(clock)
    change = _run(clock, "og_clock_kernel", N, 2)
    after = runtime_counters(clock)
    caller = after.caller_blocks - before.caller_blocks
    other = after.worker_blocks - before.worker_blocks
    assert (change.caller_runs, change.other_runs) == (caller, other)
    assert caller + other == N
    assert change.caller_ns >= 20_000 * caller
    assert change.other_ns >= 20_000 * other


def test_a_serial_call_is_one_caller_run(clock):
    change = _run(clock, "og_clock_kernel", N, 1)
    assert (change.caller_runs, change.other_runs, change.other_ns) == (1, 0, 0)
    assert change.caller_ns >= 20_000


def test_a_range_run_inside_a_timed_one_is_not_timed_again(clock):
    change = _run(clock, "og_clock_nested", 1, 1)  # one serial run whose body runs another
    assert (change.caller_runs, change.other_runs) == (1, 0)
    assert change.caller_ns >= 20_000
