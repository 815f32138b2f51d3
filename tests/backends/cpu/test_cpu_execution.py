"""Running compiled code: results in the caller's buffers, copies where required, thread
safety, the unchecked path, run-time errors, profiling."""

import threading

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen.loops import STREAM_BLOCKS
from opgraph.backends.fused.program import BufferKind, LoopStep


def test_results_are_written_into_the_callers_buffers(cpu):
    a, b = og.parameter(og.f32, (4, 8)), og.parameter(og.f32, (4, 8))
    exe = cpu.compile(og.Function([ops.multiply(ops.add(a, b), b)], [a, b]))
    storage = np.full((4, 8), -1.0, np.float32)
    out = cpu.create_tensor(og.f32, (4, 8), storage)
    args = [cpu.create_tensor(og.f32, (4, 8), np.full((4, 8), v, np.float32)) for v in (1, 2)]
    exe.call([out], args)
    assert out.buffer is storage or np.shares_memory(out.buffer, storage)
    assert np.all(storage == 6)
    # The kernel stores straight into the result buffer: no arena, no copy step.
    assert exe.memory_plan().peak == 0
    assert len(exe.program.steps) == 1


def test_parameter_constant_and_repeated_results_get_copies(cpu):
    x = og.parameter(og.f32, (3,))
    e = ops.exp(x)
    c = og.constant([1.5, 2.5, 3.5], og.f32)
    exe = cpu.compile(og.Function([x, e, e, c, ops.transpose(ops.reshape(x, (3, 1)))], [x]))
    values = np.array([0.0, 1.0, 2.0], np.float32)
    outs = [cpu.create_tensor(t.element_type, t.shape) for t in exe.result_types]
    exe.call(outs, [cpu.create_tensor(og.f32, (3,), values.copy())])
    np.testing.assert_array_equal(outs[0].read(), values)
    np.testing.assert_allclose(outs[1].read(), np.exp(values), rtol=1e-6)
    np.testing.assert_array_equal(outs[2].read(), outs[1].read())
    np.testing.assert_array_equal(outs[3].read(), [1.5, 2.5, 3.5])
    np.testing.assert_array_equal(outs[4].read(), values.reshape(1, 3))
    assert not np.shares_memory(outs[1].buffer, outs[2].buffer)


def test_call_unchecked_runs_without_validation(cpu):
    a = og.parameter(og.i32, (6,))
    exe = cpu.compile(og.Function([ops.multiply(a, a)], [a]))
    arg = cpu.create_tensor(og.i32, (6,), np.arange(6, dtype=np.int32))
    out = cpu.create_tensor(og.i32, (6,))
    exe.call_unchecked([out], [arg])
    assert out.read().tolist() == [0, 1, 4, 9, 16, 25]


def test_numpy_convenience_accepts_non_contiguous_arrays(cpu):
    x = og.parameter(og.f64, (3, 2))
    exe = cpu.compile(og.Function([ops.negative(x)], [x]))
    data = np.arange(6.0).reshape(2, 3).T  # Fortran order: copied once
    np.testing.assert_array_equal(exe(data)[0], -data)


@pytest.mark.parametrize("backend_name", ["cpu", "parallel_cpu"])
def test_concurrent_calls_use_separate_arenas(backend_name, request):
    """A graph with arena temporaries, called from several threads at once: each call takes
    its own arena from the pool (and, in parallel mode, shares the thread pool)."""
    backend = request.getfixturevalue(backend_name)
    x = og.parameter(og.f32, (64, 96))
    w = og.parameter(og.f32, (96, 32))
    hidden = ops.relu(ops.dot(x, w))
    fn = og.Function([ops.softmax(ops.add(hidden, hidden), -1)], [x, w])
    exe = backend.compile(fn)
    assert exe.memory_plan().peak > 0
    reference = og.backend("INTERPRETER").compile(fn)
    errors = []

    def worker(k):
        rng = np.random.default_rng(k)
        for _ in range(15):
            args = [rng.random((64, 96), np.float32), rng.random((96, 32), np.float32)]
            got, want = exe(*args)[0], reference(*args)[0]
            if not np.allclose(got, want, rtol=1e-4, atol=1e-6):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_integer_division_by_zero_names_the_fused_node(cpu):
    x, y = og.parameter(og.i64, (8,)), og.parameter(og.i64, (8,))
    exe = cpu.compile(og.Function([ops.add(ops.divide(x, y), x)], [x, y]))
    ones = np.ones(8, np.int64)
    assert exe(ones * 7, ones * 2)[0].tolist() == [10] * 8
    divisor = ones.copy()
    divisor[5] = 0
    with pytest.raises(og.ExecutionError, match=r"Div\[floor_division=True\].*division by zero"):
        exe(ones, divisor)


def test_fallback_errors_name_the_node(cpu):
    data = og.parameter(og.f32, (2, 3))
    lengths = og.parameter(og.i64, (2,))
    reversed_ = ops.reverse_sequence(data, lengths, 0, 1)
    exe = cpu.compile(og.Function([ops.exp(reversed_)], [data, lengths]))
    assert exe.fallback_ops() == ["ReverseSequence"]
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = np.exp([[1.0, 0.0, 2.0], [5.0, 4.0, 3.0]])
    np.testing.assert_allclose(exe(values, np.array([2, 3]))[0], want, rtol=1e-6)
    with pytest.raises(og.ExecutionError, match=r"while executing %\d+ = ReverseSequence"):
        exe(values, np.array([0, 9]))


def test_profile_counts_every_step(cpu):
    x = og.parameter(og.f32, (16, 16))
    fn = og.Function([ops.softmax(ops.dot(x, x), -1)], [x])
    exe = cpu.compile(fn, profile=True)
    data = np.eye(16, dtype=np.float32)
    for _ in range(3):
        exe(data)
    counters = exe.performance_counters()
    assert len(counters) == len(exe.program.steps)
    assert all(c.calls == 3 and c.total_seconds >= 0 for c in counters)
    assert any("Dot" in c.node for c in counters)


def test_softmax_is_one_row_kernel(cpu):
    x = og.parameter(og.f32, (5, 7))
    exe = cpu.compile(og.Function([ops.softmax(x, -1)], [x]))
    (step,) = exe.program.steps
    assert isinstance(step, LoopStep) and step.kernels[0].axes == (1,)
    data = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    e = np.exp(data - data.max(-1, keepdims=True))
    np.testing.assert_allclose(exe(data)[0], e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_views_cost_no_copy(cpu):
    """Transpose, slice and broadcast are read through strides inside the consumer kernel."""
    x = og.parameter(og.f32, (6, 4))
    bias = ops.broadcast(og.constant([1.0, 2.0, 3.0, 4.0], og.f32), (4, 4), (0,))
    y = ops.add(ops.transpose(ops.slice(x, (1, 0), (5, 4)), (1, 0)), bias)
    exe = cpu.compile(og.Function([ops.multiply(y, y)], [x]))
    assert len(exe.program.steps) == 1
    assert not [b for b in exe.program.buffers if b.kind is BufferKind.ARENA]
    data = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.testing.assert_allclose(exe(data)[0], (data[1:5].T + np.arange(1, 5)) ** 2)


@pytest.mark.parametrize(("rows", "panel"), [(1, 16), (7, 32), (30, 32)])
def test_products_by_constants_use_packed_panels(cpu, parallel_cpu, rows, panel):
    """A product by a constant f32 matrix reads it repacked as column panels at compile time:
    a GEMV for one row, a register-blocked GEMM otherwise (odd sizes: padded panels, partial
    row blocks, an inner-dimension remainder), also split between threads."""
    rng = np.random.default_rng(5)
    weights = rng.standard_normal((401, 301)).astype(np.float32)
    x = og.parameter(og.f32, (rows, 401))
    fn = og.Function([ops.tanh(ops.dot(x, og.constant(weights)))], [x])
    data = rng.standard_normal((rows, 401)).astype(np.float32) * 0.05
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        assert exe.program.steps[0].panel == panel
        np.testing.assert_allclose(exe(data)[0], np.tanh(data @ weights), rtol=1e-4, atol=1e-5)


def test_large_results_are_streamed_to_memory(cpu):
    """Results of 4 MiB or more of a loop that touches more than the last-level cache's
    32 MiB are written with non-temporal stores, also into a buffer that is not 64-byte
    aligned."""
    n = (1 << 22) + 37  # 16 MiB each: two inputs and the result
    x, y = og.parameter(og.f32, (n,)), og.parameter(og.f32, (n,))
    exe = cpu.compile(og.Function([ops.multiply(ops.add(x, y), y)], [x, y]))
    assert "og_stream_f32(" in exe.source()
    rng = np.random.default_rng(6)
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    storage = np.zeros(n + 1, np.float32)
    out = cpu.create_tensor(og.f32, (n,), storage[1:])
    exe.call([out], [cpu.create_tensor(og.f32, (n,), a), cpu.create_tensor(og.f32, (n,), b)])
    np.testing.assert_array_equal(storage[1:], (a + b) * b)
    assert storage[0] == 0


@pytest.mark.parametrize("backend", ["cpu", "avx2_cpu"])
def test_streamed_blocks_follow_the_vector_width(backend: str, request: pytest.FixtureRequest):
    """A streamed loop computes blocks of ``STREAM_BLOCKS[lanes]`` elements (64 with 16-lane
    vectors, 512 with AVX2's 8) into its stack buffer; on two threads, with a length whose
    last block is partial, every element is written once and right."""
    cpu = request.getfixturevalue(backend)
    n = (1 << 22) + 5 * 16 + 3
    x, y = og.parameter(og.f32, (n,)), og.parameter(og.f32, (n,))
    exe = cpu.compile(og.Function([ops.multiply(ops.add(x, y), y)], [x, y]))
    block = STREAM_BLOCKS[cpu.config.vector_lanes()]
    assert f"float s0[{block}] __attribute__((aligned(64)));" in exe.source()
    rng = np.random.default_rng(7)
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    np.testing.assert_array_equal(exe(a, b)[0], (a + b) * b)


@pytest.mark.parametrize("backend", ["parallel_cpu", "avx2_cpu"])
def test_streamed_blocks_follow_the_first_results_lines(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """A streamed loop's blocks end on the first result's line boundaries, not on multiples
    of the block from the range's start: two results at different offsets from a line (4 and
    20 bytes past one), a length whose last block is partial, split between threads, every
    element written once and right and nothing written past either end."""
    cpu = request.getfixturevalue(backend)
    n = (1 << 22) + 7 * 16 + 5
    x, y = og.parameter(og.f32, (n,)), og.parameter(og.f32, (n,))
    total = ops.add(x, y)
    exe = cpu.compile(og.Function([ops.multiply(total, y), ops.subtract(total, x)], [x, y]))
    assert exe.source().count("og_stream_f32(") >= 3  # the helper and one call per result
    rng = np.random.default_rng(8)
    a, b = rng.random(n, np.float32), rng.random(n, np.float32)
    offsets = (1, 5)  # floats past a line: 4 and 20 bytes
    storage = [np.full(n + 32, -1.0, np.float32) for _ in offsets]
    starts = [(-s.ctypes.data // 4) % 16 + k for s, k in zip(storage, offsets, strict=True)]
    outs = [
        cpu.create_tensor(og.f32, (n,), s[i : i + n]) for s, i in zip(storage, starts, strict=True)
    ]
    exe.call(outs, [cpu.create_tensor(og.f32, (n,), a), cpu.create_tensor(og.f32, (n,), b)])
    np.testing.assert_array_equal(outs[0].read(), (a + b) * b)
    np.testing.assert_array_equal(outs[1].read(), (a + b) - a)
    for s, i in zip(storage, starts, strict=True):
        assert np.all(s[:i] == -1) and np.all(s[i + n :] == -1)


@pytest.mark.parametrize(
    ("shapes", "streamed"),
    [
        ([(1 << 22,)], False),  # W2's size: 16 MiB in, 16 MiB out, exactly the 32 MiB
        ([(1024, 1024)] * 3, False),  # W1 1024: 12 MiB in, 4 MiB out
        ([(1 << 22,), (1 << 22,)], True),  # 32 MiB in, 16 MiB out
        ([(1 << 22,), None], False),  # x + x: x counts once (16 MiB in, 16 MiB out)
    ],
)
def test_results_stream_only_when_the_loop_outgrows_the_last_level_cache(
    cpu: object, shapes: list[tuple[int, ...] | None], streamed: bool
) -> None:
    """Below that, plain stores leave the result in the cache for its reader (and for the
    next call's write): streaming sends every line to memory."""
    params = [og.parameter(og.f32, s) for s in shapes if s is not None]
    total = params[0]
    for p in [*params[1:], *(params[0] for s in shapes if s is None)]:
        total = ops.add(total, p)
    exe = cpu.compile(og.Function([ops.multiply(total, total)], params))
    assert ("og_stream_f32(" in exe.source()) is streamed
