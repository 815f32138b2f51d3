"""The CPU runtime's thread pool under oversubscription, load and stalled workers.

Two kinds of tests:

* The pool itself: the runtime's C source compiled here with ``-DOG_TEST_HOOKS`` (a test
  build: the library the backend loads never has the hooks) together with a small range
  kernel that records, per element, how many times it ran and which participant ran it.
  ``og_test_stall`` stops one pool worker at a chosen point (after joining a job, while
  holding a claimed block, after its first block), so the tests show that a caller never
  waits for a worker that holds no unfinished block, and that blocks a stuck worker has not
  started are done by the caller.
* Real compiled kernels with 8 threads on this machine (more threads than cores), with a
  busy-looping process beside them: the results must be exact.

Nothing here is timed; a call that waited for a stalled worker would hang, and the timeout
below turns that into a failure.
"""

import ctypes
import dataclasses
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config

# "thread": a call stuck in C never returns to the interpreter, where a signal would act.
pytestmark = pytest.mark.timeout(300, method="thread")

KERNEL = r"""
#include <time.h>
/* T[0] in, T[1] out, T[2] hits, T[3] who (per element), T[4] flags:
   flags[0]: block 0 waits (up to 10 s, waking the pool's workers) until a worker is
   stalled; flags[1]: element whose
   block fails with code 4 (-1: none). */
static _Atomic int og_test_in_use[OG_MAX_THREADS];
static _Atomic int og_test_collisions;

int og_test_kernel(void* const* T, char* A, long lo, long hi) {
  const float* in = (const float*)T[0];
  float* out = (float*)T[1];
  int* hits = (int*)T[2];
  int* who = (int*)T[3];
  const long* flags = (const long*)T[4];
  int me = og_worker_index();
  if (__atomic_exchange_n(&og_test_in_use[me], 1, __ATOMIC_SEQ_CST))
    __atomic_fetch_add(&og_test_collisions, 1, __ATOMIC_SEQ_CST);
  struct timespec ms = {0, 1000000};
  if (lo == 0 && flags[0])  /* the caller wakes sleepers only after its first block: now */
    for (int i = 0; i < 10000 && !og_test_stalled(); ++i) {
      og_futex_wake(&og_generation, OG_MAX_THREADS);
      nanosleep(&ms, 0);
    }
  for (long i = lo; i < hi; ++i) {
    out[i] = in[i] * 3.0f + 1.0f;
    hits[i] += 1;
    who[i] = me;
  }
  __atomic_store_n(&og_test_in_use[me], 0, __ATOMIC_SEQ_CST);
  return flags[1] >= lo && flags[1] < hi ? 4 : 0;
}

int og_test_collision_count(void) { return og_test_collisions; }
"""


@pytest.fixture(scope="module")
def pool(hooked_runtime: Callable[[str, str], ctypes.CDLL]) -> ctypes.CDLL:
    """The runtime built with its test hooks, plus the recording kernel."""
    return hooked_runtime("pool", KERNEL)


@dataclasses.dataclass
class Run:
    """One ``og_parallel`` call of the recording kernel over ``n`` elements."""

    values: np.ndarray
    out: np.ndarray
    hits: np.ndarray
    who: np.ndarray
    code: int

    def check(self, threads: int) -> None:
        np.testing.assert_array_equal(self.out, self.values * np.float32(3) + np.float32(1))
        assert (self.hits == 1).all(), "a block ran twice or never"
        assert self.who.min() >= 0 and self.who.max() < threads


def call(
    lib: ctypes.CDLL,
    n: int,
    threads: int,
    grain: int = 1,
    wait_for_stall: bool = False,
    fail_at: int = -1,
) -> Run:
    values = (np.arange(n) % 1000).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    hits = np.zeros(n, np.int32)
    who = np.full(n, -1, np.int32)
    flags = np.array([int(wait_for_stall), fail_at], np.int64)
    arrays = (values, out, hits, who, flags)
    table = (ctypes.c_void_p * 5)(*(a.ctypes.data for a in arrays))
    kernel = ctypes.cast(lib.og_test_kernel, ctypes.c_void_p).value
    code = lib.og_parallel(kernel, table, None, n, grain, threads)
    return Run(values, out, hits, who, code)


@pytest.fixture
def released(pool: ctypes.CDLL) -> Iterator[None]:
    """Disarms and releases any stall when the test ends, and waits until the worker runs."""
    yield
    pool.og_test_stall(0, 0)
    pool.og_test_release()
    for _ in range(10000):
        if not pool.og_test_stalled():
            break
        time.sleep(0.001)
    assert pool.og_test_stalled() == 0


@pytest.fixture
def busy_loop() -> Iterator[None]:
    """A process that spins on a core beside the test (not pinned: the scheduler places it)."""
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("threads", [2, 3, 8, 17])
@pytest.mark.parametrize(("n", "grain"), [(1, 1), (15, 1), (1000, 7), (100_003, 1024)])
def test_every_element_runs_once_on_a_valid_participant(pool, threads, n, grain):
    for _ in range(20):
        call(pool, n, threads, grain).check(threads)
    assert pool.og_test_collision_count() == 0, "two threads used one participant index"


def test_oversubscribed_pool_with_a_busy_loop_beside(pool, busy_loop):
    """8 threads on this machine's cores, one core taken by a spinning process."""
    for i in range(300):
        run = call(pool, 50_000 + i, 8, grain=64)
        run.check(8)
        assert run.code == 0
    assert pool.og_test_collision_count() == 0


def test_error_of_any_block_reaches_the_caller(pool):
    for fail_at in (0, 4999, 9999):
        assert call(pool, 10_000, 4, grain=16, fail_at=fail_at).code == 4


def test_call_completes_while_a_joined_worker_is_stuck(pool, released):
    """The only worker joins the job and stops before claiming anything: the caller runs
    every block, and later calls complete too while the worker stays stuck."""
    pool.og_test_stall(1, -1)
    run = call(pool, 4096, 2, grain=16, wait_for_stall=True)
    assert pool.og_test_stalled() == 1, "the stall hook never ran"
    run.check(2)
    assert (run.who == 0).all()
    for _ in range(5):
        call(pool, 4096, 2, grain=16).check(2)
    assert pool.og_test_stalled() == 1


def test_blocks_a_stuck_worker_has_not_started_are_taken_over(pool, released):
    """The worker runs one block of its home and stops: the caller does the rest of it."""
    pool.og_test_stall(3, -1)
    run = call(pool, 4096, 2, grain=16, wait_for_stall=True)
    assert pool.og_test_stalled() == 1, "the stall hook never ran"
    run.check(2)
    by_worker = run.who == 1
    assert 0 < by_worker.sum() <= 32  # one block: 4096 elements in 128 blocks of 32
    assert (run.who[2048:] == 0).sum() >= 2048 - 32  # its home: the second half


def test_block_held_by_a_stalled_worker_is_finished_exactly(pool, released):
    """A worker stops for 0.2 s while it holds a claimed block: that block is being written,
    so the caller must wait for it (sleeping) and the result is exact."""
    pool.og_test_stall(2, 200_000)
    run = call(pool, 4096, 2, grain=16, wait_for_stall=True)
    run.check(2)
    assert (run.who == 1).sum() > 0


# ----------------------------------------------------------- compiled kernels, 8 threads


@pytest.fixture(scope="module")
def oversubscribed() -> CpuBackend:
    """8 threads on this machine (more than its cores), every kernel split between them."""
    return CpuBackend(dataclasses.replace(default_config(), num_threads=8, parallel_threshold=1))


def _integers(shape: tuple[int, ...], seed: int, high: int = 8) -> np.ndarray:
    """Small integers as f32: every sum and product below is exact in any order."""
    return np.random.default_rng(seed).integers(-high, high, shape).astype(np.float32)


def _cases() -> list[tuple[og.Function, list[np.ndarray], list[np.ndarray]]]:
    a, b, c = (og.parameter(og.f32, (301, 257)) for _ in range(3))
    x, y, z = (_integers((301, 257), s) for s in (1, 2, 3))
    elementwise = og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c])
    rows = og.Function([ops.reduce_sum(a, (1,))], [a])
    m, k, n = 96, 200, 130
    p, q = og.parameter(og.f32, (m, k)), og.parameter(og.f32, (k, n))
    u, v = _integers((m, k), 4, 4), _integers((k, n), 5, 4)
    product = og.Function([ops.matmul(p, q)], [p, q])
    img, filt = og.parameter(og.f32, (2, 8, 20, 20)), og.parameter(og.f32, (16, 8, 3, 3))
    i, f = _integers((2, 8, 20, 20), 6, 4), _integers((16, 8, 3, 3), 7, 4)
    conv = og.Function([ops.convolution(img, filt, padding_below=(1, 1), padding_above=(1, 1))],
                       [img, filt])  # fmt: skip
    interpreter = og.backend("INTERPRETER")
    (conv_want,) = interpreter.compile(conv)(i, f)
    return [
        (elementwise, [x, y, z], [(x + y) * z]),
        (rows, [x], [x.sum(axis=1)]),
        (product, [u, v], [u @ v]),
        (conv, [i, f], [conv_want]),
    ]


def test_compiled_kernels_on_8_threads_with_a_busy_loop_are_exact(oversubscribed, busy_loop):
    for fn, args, wants in _cases():
        exe = oversubscribed.compile(fn)
        for _ in range(30):
            for got, want in zip(exe(*args), wants, strict=True):
                np.testing.assert_array_equal(got, want)


def test_concurrent_callers_on_8_threads_are_exact(oversubscribed, busy_loop):
    """Python threads calling at once: one runs on the pool, the others run serially."""
    fn, args, wants = _cases()[0]
    exe = oversubscribed.compile(fn)
    failures: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(40):
                np.testing.assert_array_equal(exe(*args)[0], wants[0])
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_test_hooks_are_not_in_the_backend_runtime(cpu):
    """The library the backend loads is the production build: no stall hooks."""
    library = cpu.toolchain.runtime()
    assert hasattr(library, "og_parallel")
    assert not hasattr(library, "og_test_stall")
