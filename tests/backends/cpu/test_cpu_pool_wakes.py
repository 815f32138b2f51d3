"""When a caller wakes the pool's sleeping workers: at publication for a function whose last
pace was worth it, after its first block otherwise, and now and then for small jobs.

* **Paced wake-ups** (``og_paced_worth``): a job whose range function's last run says the blocks
  after the caller's first are worth a wake-up wakes sleeping workers when it is published
  (counted in ``paced_wakes``), and only once; a function never run before is woken, if at
  all, after the caller's first block, as before.
* **Re-wakes** (``og_set_rewake``): a job not worth a wake-up still wakes sleeping workers when
  none was woken for a while on a calm machine (``rewakes``); not when the interval has not
  passed, nor when a spinning worker found itself descheduled within the calm window.
* ``og_set_wake_rules`` switches either rule off (measurements compare them).

The runtime's C source is compiled with its test hooks (``hooked_runtime``) and a recording
kernel; the thresholds are set to 0 or to ``1 << 62`` so that every decision is certain, and
the counters say which rule acted. Nothing is timed; the timeout turns a hang into a failure.
"""

import ctypes
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from pool_sleep import wait_asleep  # beside this file (rootdir import)

from opgraph.backends.cpu.codegen.runtime_counters import PoolCounters, runtime_counters

pytestmark = pytest.mark.timeout(300, method="thread")

KERNEL = r"""
/* T[0] hits per element. Two functions with the same body: each has its own pace. */
static int og_wakes_body(void* const* T, long lo, long hi) {
  int* hits = (int*)T[0];
  for (long i = lo; i < hi; ++i) hits[i] += 1;
  return 0;
}
int og_wakes_kernel(void* const* T, char* A, long lo, long hi) {
  return og_wakes_body(T, lo, hi);
}
int og_wakes_fresh(void* const* T, char* A, long lo, long hi) {
  return og_wakes_body(T, lo, hi);
}
"""

NEVER = 1 << 62
N, GRAIN = 4096, 16  # 128 blocks for two threads: never "a few large blocks"


@pytest.fixture(scope="module")
def pool(hooked_runtime: Callable[[str, str], ctypes.CDLL]) -> ctypes.CDLL:
    lib = hooked_runtime("wakes", KERNEL)
    lib.og_set_wake_worth.argtypes = [ctypes.c_long]
    lib.og_set_rewake.argtypes = [ctypes.c_long, ctypes.c_long]
    lib.og_set_wake_rules.argtypes = [ctypes.c_long]
    return lib


@pytest.fixture
def rules(pool: ctypes.CDLL) -> Iterator[ctypes.CDLL]:
    """The pool with its one worker created; its default thresholds restored after."""
    _call(pool, "og_wakes_kernel")
    yield pool
    pool.og_set_wake_worth(125_000)
    pool.og_set_rewake(-1, -1)
    pool.og_set_wake_rules(-1)


def _call(pool: ctypes.CDLL, kernel: str) -> None:
    hits = np.zeros(N, np.int32)
    table = (ctypes.c_void_p * 1)(hits.ctypes.data)
    fn = ctypes.cast(getattr(pool, kernel), ctypes.c_void_p).value
    assert pool.og_parallel(fn, table, None, N, GRAIN, 2) == 0
    assert (hits == 1).all(), "a block ran twice or never"


def _asleep_call(pool: ctypes.CDLL, kernel: str = "og_wakes_kernel") -> PoolCounters:
    """One two-thread job of ``kernel`` published while the worker sleeps: the counters'
    change."""
    wait_asleep(pool)
    before = runtime_counters(pool)
    _call(pool, kernel)
    after = runtime_counters(pool)
    return PoolCounters(*(a - b for a, b in zip(after, before, strict=True)))


def test_a_function_whose_pace_is_worth_it_wakes_when_published_once(rules):
    rules.og_set_rewake(NEVER, -1)
    rules.og_set_wake_worth(0)  # every block is worth a wake-up; the pace is known now
    change = _asleep_call(rules)
    assert (change.wakes, change.paced_wakes) == (1, 1)


def test_a_function_whose_pace_is_not_worth_it_sleeps_on(rules):
    rules.og_set_rewake(NEVER, -1)
    rules.og_set_wake_worth(NEVER)
    change = _asleep_call(rules)
    assert (change.wakes, change.paced_wakes) == (0, 0)


def test_a_function_never_run_is_woken_after_the_first_block(rules):
    rules.og_set_rewake(NEVER, -1)
    rules.og_set_wake_worth(0)
    change = _asleep_call(rules, "og_wakes_fresh")
    assert (change.wakes, change.paced_wakes) == (1, 0)
    change = _asleep_call(rules, "og_wakes_fresh")  # its pace is known from now on
    assert (change.wakes, change.paced_wakes) == (1, 1)


def test_paced_wake_ups_switched_off_wake_after_the_first_block(rules):
    rules.og_set_rewake(NEVER, -1)
    rules.og_set_wake_worth(0)
    rules.og_set_wake_rules(2)  # re-wakes only
    change = _asleep_call(rules)
    assert (change.wakes, change.paced_wakes) == (1, 0)


def test_small_jobs_re_wake_sleepers_once_the_interval_has_passed(rules):
    rules.og_set_wake_worth(NEVER)
    rules.og_set_rewake(0, 0)
    change = _asleep_call(rules)
    assert (change.wakes, change.rewakes, change.paced_wakes) == (1, 1, 0)


def test_small_jobs_do_not_re_wake_within_the_interval(rules):
    rules.og_set_wake_worth(NEVER)
    rules.og_set_rewake(NEVER, 0)
    change = _asleep_call(rules)
    assert (change.wakes, change.rewakes) == (0, 0)


def test_small_jobs_do_not_re_wake_on_a_machine_that_is_not_calm(rules):
    rules.og_set_wake_worth(NEVER)
    rules.og_set_rewake(0, NEVER)  # every preemption seen is within the calm window
    change = _asleep_call(rules)
    assert (change.wakes, change.rewakes) == (0, 0)


def test_re_wakes_switched_off_leave_sleepers_asleep(rules):
    rules.og_set_wake_worth(NEVER)
    rules.og_set_rewake(0, 0)
    rules.og_set_wake_rules(1)  # paced wake-ups only
    change = _asleep_call(rules)
    assert (change.wakes, change.rewakes) == (0, 0)
