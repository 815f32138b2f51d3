"""How long an idle worker of the pool spins for the next job: a few times the length of the
job it last joined, counted from the job's publication, not from the worker's join.

A worker that joined a job late ran little of it; when its spin came from its own share, it
slept before the next job (joining that one late again, after a futex wake-up): a state a
process could fall into and stay in (2026-11-26, H89). Here a worker is held at its join
(``og_test_stall`` at hook 1) until the caller has run every block alone, for far longer than
the longest spin; on release it runs nothing, and the spin it chooses must still be the
longest (``OG_MAX_SPIN``), not the shortest.

The runtime's C is compiled with its test hooks (``hooked_runtime``), which record the spin a
worker chose after its last job. Nothing is timed: the hold is released only after the caller
has returned, and the loops below only wait for the worker to get there (the timeout turns a
hang into a failure).
"""

import ctypes
import time
from collections.abc import Callable

import numpy as np
import pytest

from opgraph.backends.cpu.codegen import runtime, runtime_counters

pytestmark = pytest.mark.timeout(300, method="thread")

KERNEL = r"""
static int og_patience_body(void* const* T, long lo, long hi) {
  int* hits = (int*)T[0];
  for (long i = lo; i < hi; ++i) hits[i] += 1;
  return 0;
}
int og_patience_kernel(void* const* T, char* A, long lo, long hi) {
  return og_patience_body(T, lo, hi);
}
long og_patience_last(int reset) {
  if (reset) __atomic_store_n(&og_test_patience, 0, __ATOMIC_SEQ_CST);
  return (long)__atomic_load_n(&og_test_patience, __ATOMIC_SEQ_CST);
}
"""

N, GRAIN = 4096, 16  # 128 blocks for two threads
MIN_SPIN, MAX_SPIN = 100_000, 500_000  # OG_MIN_SPIN, OG_MAX_SPIN (TSC ticks)


def _call(pool: ctypes.CDLL) -> None:
    hits = np.zeros(N, np.int32)
    table = (ctypes.c_void_p * 1)(hits.ctypes.data)
    fn = ctypes.cast(pool.og_patience_kernel, ctypes.c_void_p).value
    assert pool.og_parallel(fn, table, None, N, GRAIN, 2) == 0
    assert (hits == 1).all(), "a block ran twice or never"


def _until(done: Callable[[], bool], what: str) -> None:
    for _ in range(100_000):
        if done():
            return
        time.sleep(0.0005)
    raise AssertionError(f"the worker never {what}")


def test_spin_constants_match_the_runtime() -> None:
    assert f"#define OG_MIN_SPIN {MIN_SPIN}ull" in runtime.SOURCE
    assert f"#define OG_MAX_SPIN {MAX_SPIN}ull" in runtime.SOURCE


def test_a_late_worker_spins_for_the_whole_job_length(
    hooked_runtime: Callable[[str, str], ctypes.CDLL],
) -> None:
    pool = hooked_runtime("patience", KERNEL)
    pool.og_set_wake_worth.argtypes = [ctypes.c_long]
    pool.og_patience_last.argtypes = [ctypes.c_int]
    pool.og_patience_last.restype = ctypes.c_long
    pool.og_set_wake_worth(0)  # every job wakes a sleeping worker: it joins each one
    try:
        # the worker exists and has run a block (its hooks act only once it has joined)
        _until(lambda: _call(pool) or runtime_counters.runtime_counters(pool).worker_blocks > 0,
               "ran a block")  # fmt: skip
        pool.og_patience_last(1)
        pool.og_test_stall(1, -1)  # the worker that joins next waits at its join
        _call(pool)  # the caller runs every block: the held worker claims none
        _until(lambda: pool.og_test_stalled() == 1, "joined the job")
        time.sleep(0.01)  # the job, as the worker sees it, lasts far longer than MAX_SPIN
        pool.og_test_release()
        _until(lambda: pool.og_patience_last(0) != 0, "finished the job")
        assert pool.og_patience_last(0) == MAX_SPIN, (
            "a worker that ran none of a long job must spin for the longest time, "
            f"expected {MAX_SPIN} ticks, found {pool.og_patience_last(0)}"
        )
    finally:
        pool.og_test_stall(0, 0)
        pool.og_test_release()
        pool.og_set_wake_worth(125_000)
