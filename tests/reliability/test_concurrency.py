"""Several threads calling one Executable with random data get exactly the serial results.

Each thread calls the same Executable with its own random inputs, all threads released at
once; afterwards every call is repeated serially and the results must be bit-identical (the
backends are deterministic, so any difference is a race: shared scratch memory, arenas or
kernel state leaking between calls).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import opgraph as og
from opgraph import ops

pytestmark = pytest.mark.timeout(600)

THREADS = 4


def model() -> og.Function:
    """Products, fused elementwise chains, reductions, softmax and integer wrap-around."""
    x = og.parameter(og.f32, (16, 32), name="x")
    n = og.parameter(og.i32, (64,), name="n")
    rng = np.random.default_rng(0)
    w = og.constant(rng.standard_normal((32, 8)).astype(np.float32))
    b = og.constant(rng.standard_normal(8).astype(np.float32))
    hidden = ops.relu(ops.dot(x, w) + ops.broadcast(b, (16, 8), (0,)))
    probabilities = ops.softmax(hidden, 1)
    total = ops.reduce_sum(probabilities * hidden, (0,))
    three = ops.broadcast(og.constant(np.int32(3)), (64,), (0,))
    wrapped = n * three + n
    return og.Function([probabilities, total, wrapped], [x, n], name="concurrent")


def random_inputs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x = rng.uniform(-4, 4, (16, 32)).astype(np.float32)
    n = rng.integers(np.iinfo(np.int32).min, np.iinfo(np.int32).max, 64, dtype=np.int32)
    return x, n


@pytest.mark.parametrize("backend_name", ["INTERPRETER", "CPU"])
def test_threads_sharing_an_executable_get_exact_results(backend_name, fuzz_cases):
    if backend_name not in og.backends():
        pytest.skip(f"{backend_name} is not available here")
    executable = og.backend(backend_name).compile(model())
    calls = fuzz_cases(100)
    start = threading.Barrier(THREADS)
    seen: list[list[tuple[tuple[np.ndarray, ...], list[np.ndarray]]]] = [[] for _ in range(THREADS)]
    failures: list[BaseException] = []

    def work(index: int) -> None:
        rng = np.random.default_rng(1000 + index)
        try:
            start.wait()
            for _ in range(calls):
                inputs = random_inputs(rng)
                seen[index].append((inputs, [r.copy() for r in executable(*inputs)]))
        except BaseException as error:  # reported below, with the thread's index
            failures.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert all(len(calls_seen) == calls for calls_seen in seen)
    for index, calls_seen in enumerate(seen):
        for call, (inputs, results) in enumerate(calls_seen):
            expected = executable(*inputs)
            for k, (got, want) in enumerate(zip(results, expected, strict=True)):
                assert got.tobytes() == want.tobytes(), f"thread {index} call {call} result {k}"
    # And the serial results are right, not merely repeatable: the integer result is exact.
    inputs, results = seen[0][0]
    n64 = inputs[1].astype(np.int64)
    np.testing.assert_array_equal(results[2], (n64 * 4).astype(np.int32))
