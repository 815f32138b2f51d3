"""Where the pool's workers run: never on the caller's core while another is allowed, and on
the caller's core while it waits for a block they hold.

On a 2-core machine beside a busy process, a worker woken onto the caller's core shares that
core with the caller while the busy process has the other: the job gets one core instead of
one and a half (docs/performance.md, "a worker on the caller's core"). The rules
(``codegen/runtime.py``, ``og_move_off`` and ``og_hand_over``):

* a worker that joins a job on the CPU the caller published it from narrows its affinity to
  the mask it was created with, less that CPU;
* a caller whose wait for blocks in progress outlasts its spin moves the workers that hold
  those blocks onto its own CPU before it sleeps there.

The tests pin threads to force each situation and read the runtime's counters and the
threads' affinity masks: nothing is timed. They use the runtime built with its test hooks
(its own pool, not the backend's) and need two CPUs. The last test checks, with the
backend's own runtime, that a call as small as W1 32x32 never reaches the pool at all.
"""

import ctypes
import dataclasses
import os
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from pool_sleep import wait_asleep  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen.runtime_counters import PoolCounters, runtime_counters

# "thread": a call stuck in C never returns to the interpreter, where a signal would act.
pytestmark = pytest.mark.timeout(300, method="thread")

KERNEL = r"""
#include <time.h>
/* T[0] flags: [0] microseconds each block sleeps, [1] block 0 waits (waking the pool's
   workers, up to 10 s) until a worker is stalled; per element, T[1] how often it ran,
   T[2] the CPU it ran on and T[3] the participant that ran it. */
int og_place_kernel(void* const* T, char* A, long lo, long hi) {
  const long* flags = (const long*)T[0];
  int* hits = (int*)T[1];
  int* cpus = (int*)T[2];
  int* who = (int*)T[3];
  struct timespec ms = {0, 1000000}, nap = {0, flags[0] * 1000};
  if (lo == 0 && flags[1])
    for (int i = 0; i < 10000 && !og_test_stalled(); ++i) {
      og_futex_wake(&og_generation, OG_MAX_THREADS);
      nanosleep(&ms, 0);
    }
  if (flags[0]) nanosleep(&nap, 0);
  int cpu = sched_getcpu(), me = og_worker_index();
  for (long i = lo; i < hi; ++i) {
    hits[i] += 1;
    cpus[i] = cpu;
    who[i] = me;
  }
  return 0;
}

/* The thread id of pool worker ``slot`` (0 until it has started). */
int og_place_worker_tid(int slot) { return __atomic_load_n(&og_info[slot].tid, __ATOMIC_ACQUIRE); }
"""

APART, HAND_OVER = 1, 2
#: Jobs before a woken worker must have joined one: it sleeps between them, and each job's
#: blocks sleep too, so the worker gets a CPU even where it shares the caller's.
ATTEMPTS = 200
BLOCKS = 8


def _allowed() -> set[int]:
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        pytest.skip("needs two CPUs to move a pool worker between")
    return cpus


@pytest.fixture
def pinned() -> Iterator[Callable[[int, set[int]], None]]:
    """``pin(tid, cpus)`` (0: this thread); every thread pinned is given its mask back after."""
    saved: dict[int, set[int]] = {}

    def pin(tid: int, cpus: set[int]) -> None:
        saved.setdefault(tid, os.sched_getaffinity(tid))
        os.sched_setaffinity(tid, cpus)

    yield pin
    for tid, cpus in saved.items():
        os.sched_setaffinity(tid, cpus)


def _build(hooked_runtime: Callable[[str, str], ctypes.CDLL], name: str) -> ctypes.CDLL:
    lib = hooked_runtime(name, KERNEL)
    lib.og_set_placement.argtypes = [ctypes.c_long]
    return lib


def _job(lib: ctypes.CDLL, nap_us: int = 200, wait_for_stall: bool = False) -> np.ndarray:
    """One two-thread job of ``BLOCKS`` blocks that each sleep ``nap_us``; every element once.
    Returns the CPUs the worker's elements ran on."""
    flags = np.array([nap_us, int(wait_for_stall)], np.int64)
    hits, cpus, who = (np.zeros(BLOCKS * 4, np.int32) for _ in range(3))
    table = (ctypes.c_void_p * 4)(*(a.ctypes.data for a in (flags, hits, cpus, who)))
    kernel = ctypes.cast(lib.og_place_kernel, ctypes.c_void_p).value
    assert lib.og_parallel(kernel, table, None, hits.size, 4, 2) == 0
    assert (hits == 1).all(), "a block ran twice or never"
    return cpus[who == 1]


def _worker(lib: ctypes.CDLL) -> int:
    """The thread id of the pool's one worker (created by a first job), once it sleeps."""
    _job(lib, nap_us=0)
    wait_asleep(lib)
    return int(lib.og_place_worker_tid(0))


def _jobs_until(lib: ctypes.CDLL, done: Callable[[PoolCounters], bool]) -> PoolCounters:
    for _ in range(ATTEMPTS):
        _job(lib)
        if done(counters := runtime_counters(lib)):
            return counters
    return runtime_counters(lib)


def test_worker_on_the_callers_cpu_moves_off_it(hooked_runtime, pinned):
    cpus = _allowed()
    lib = _build(hooked_runtime, "placement_apart")
    lib.og_set_placement(APART)
    tid = _worker(lib)  # created unpinned: its own mask is every allowed CPU
    first = min(cpus)
    pin(pinned, 0, tid, first)
    before = runtime_counters(lib)
    after = _jobs_until(lib, lambda c: c.moves > before.moves)
    assert after.colocated > before.colocated, "the worker never joined on the caller's CPU"
    assert after.moves > before.moves
    assert os.sched_getaffinity(tid) == cpus - {first}


def test_without_the_rule_the_worker_stays(hooked_runtime, pinned):
    """The same situation with the rule switched off: the worker keeps sharing the CPU."""
    cpus = _allowed()
    lib = _build(hooked_runtime, "placement_off")
    lib.og_set_placement(0)
    tid = _worker(lib)
    first = min(cpus)
    pin(pinned, 0, tid, first)
    before = runtime_counters(lib)
    after = _jobs_until(lib, lambda c: c.colocated > before.colocated)
    assert after.colocated > before.colocated, "the worker never joined on the caller's CPU"
    assert after.moves == before.moves
    assert os.sched_getaffinity(tid) == {first}


def test_worker_never_leaves_the_cpus_it_was_created_with(hooked_runtime, pinned):
    """Created while the caller was pinned to one CPU, the worker has nowhere else to go."""
    cpus = _allowed()
    lib = _build(hooked_runtime, "placement_single")
    first = min(cpus)
    pinned(0, {first})
    tid = _worker(lib)
    before = runtime_counters(lib)
    after = _jobs_until(lib, lambda c: c.colocated > before.colocated)
    assert after.colocated > before.colocated, "the worker never joined on the caller's CPU"
    assert after.moves == before.moves
    assert os.sched_getaffinity(tid) == {first}


def test_waiting_caller_hands_its_cpu_to_the_worker_holding_a_block(hooked_runtime, pinned):
    """The worker stops for 0.3 s holding a block, on a CPU the caller cannot use: the caller
    runs every other block, and before it sleeps moves the worker onto its own CPU, where the
    block runs (the wait that slept is counted in ``sleep_ticks`` too). With both rules on,
    the worker then moves back off that CPU by itself."""
    cpus = _allowed()
    lib = _build(hooked_runtime, "placement_hand_over")
    lib.og_test_stall.argtypes = [ctypes.c_int, ctypes.c_long]
    tid = _worker(lib)
    first = min(cpus)
    pinned(0, {first})
    for rules in (HAND_OVER, APART | HAND_OVER):
        lib.og_set_placement(rules)
        pinned(tid, cpus - {first})
        before = runtime_counters(lib)
        lib.og_test_stall(2, 300_000)
        ran_on = _job(lib, nap_us=0, wait_for_stall=True)
        after = runtime_counters(lib)
        assert ran_on.size and (ran_on == first).all(), "the worker's block ran elsewhere"
        assert after.handoffs == before.handoffs + 1
        assert after.wait_sleeps > before.wait_sleeps
        slept = after.sleep_ticks - before.sleep_ticks  # the wait that slept, counted apart
        assert 0 < slept <= after.wait_ticks - before.wait_ticks
        wait_asleep(lib)  # what it does after its block may come after the call returned
        moved = runtime_counters(lib).moves - before.moves
        if rules == HAND_OVER:
            assert (moved, os.sched_getaffinity(tid)) == (0, {first})
        else:
            assert (moved, os.sched_getaffinity(tid)) == (1, cpus - {first})


def pin(pinned: Callable[[int, set[int]], None], caller: int, worker: int, cpu: int) -> None:
    """The caller thread and the worker both on ``cpu``."""
    pinned(caller, {cpu})
    pinned(worker, {cpu})


# ----------------------------------------------- a tiny call never involves another thread


def _elementwise(n: int) -> og.Function:
    """W1's ``(a + b) * c`` on ``n`` f32 elements."""
    a, b, c = (og.parameter(og.f32, (n,), name) for name in "abc")
    return og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c])


@pytest.mark.parametrize(("n", "shared"), [(32 * 32, False), (1 << 20, True)])
def test_only_work_worth_a_thread_reaches_the_pool(n, shared):
    """W1 32x32 (a 3 µs call) runs on the calling thread without touching the pool: no job,
    not even a serial ``og_parallel``; a million elements are shared out on every call."""
    backend = CpuBackend(dataclasses.replace(default_config(), num_threads=2))
    exe = backend.compile(_elementwise(n))
    assert ("og_parallel(" in exe.source().split("og_run(")[0]) == shared
    data = [np.full(n, v, np.float32) for v in (1, 2, 3)]
    inputs = [backend.create_tensor(og.f32, (n,), d) for d in data]
    out = backend.create_tensor(og.f32, (n,))
    library = backend.toolchain.runtime()
    before = runtime_counters(library)
    for _ in range(20):
        exe.call([out], inputs)
    after = runtime_counters(library)
    np.testing.assert_array_equal(out.read(), np.full(n, 9, np.float32))
    assert after.jobs - before.jobs == (20 if shared else 0)
    assert after.serial == before.serial
