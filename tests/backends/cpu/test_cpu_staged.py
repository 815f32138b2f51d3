"""CPU runs Functions with data-dependent sizes in stages: each stage compiled once, the
data-dependent nodes run between them on reference kernels (issue 16, item 3)."""

import threading

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.staged import StagedCpuExecutable
from opgraph.testing.compare import assert_close

RNG = np.random.default_rng(41)


def _masked_mlp():
    """non_zero -> gather -> a matmul and a broadcast sized by the count -> reduce."""
    n = og.dim("n", max=64)
    x = og.parameter(og.f32, (n, 8), name="x")
    keep = og.parameter(og.f32, (n,), name="keep")
    rows = ops.reshape(ops.non_zero(ops.abs(keep)), (-1,))
    picked = ops.gather(x, rows, 0)
    w = og.constant(RNG.standard_normal((8, 4)).astype(np.float32))
    hidden = ops.relu(ops.matmul(picked, w))
    total = ops.reduce_sum(hidden, (0,))
    return og.Function([hidden, total, rows], [x, keep], name="masked_mlp")


def _compare(exe, ref, arrays):
    got, want = exe(*arrays), ref(*arrays)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"result {i}: {g.shape} vs {w.shape}"
        assert_close(g, w, 1e-4, 1e-4, f"result {i}")


def _case(n, density=0.5):
    x = RNG.standard_normal((n, 8)).astype(np.float32)
    keep = (RNG.random(n) < density).astype(np.float32)
    return [x, keep]


def test_non_zero_runs_in_stages_and_matches_interpreter(cpu):
    fn = _masked_mlp()
    exe = cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    assert isinstance(exe, StagedCpuExecutable)
    assert "NonZero" in exe.fallback_ops()
    assert len(exe.stages) == 2  # before the NonZero and after it
    for n, density in ((5, 0.5), (64, 0.9), (3, 0.0), (0, 0.5), (17, 1.0)):
        _compare(exe, ref, _case(n, density))


def test_new_data_never_recompiles(cpu, compile_counts):
    fn = _masked_mlp()
    exe = cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    compile_counts.reset()
    for n, density in ((9, 0.3), (40, 0.7), (2, 1.0), (9, 0.3), (30, 0.0)):
        _compare(exe, ref, _case(n, density))
    assert (compile_counts.builds, compile_counts.lowerings) == (0, 0)  # neither ran again


@pytest.mark.parametrize(
    "build",
    [
        lambda x: [ops.unique(x)[0], ops.unique(x)[3]],
        lambda x: [ops.compress(ops.exp(x), ops.greater(x, ops.negative(x)), axis=0)],
        lambda x: [ops.boolean_mask(x, ops.less(x, ops.abs(x)))],
    ],
    ids=["unique", "compress", "boolean_mask"],
)
def test_other_data_dependent_ops(cpu, build):
    x = og.parameter(og.f32, (og.dim("n", max=32),), name="x")
    fn = og.Function(build(x), [x])
    exe = cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    for n in (1, 7, 32):
        _compare(exe, ref, [np.round(RNG.standard_normal(n), 1).astype(np.float32)])


def test_broadcast_to_a_data_dependent_count_reads_a_carrier(cpu):
    x = og.parameter(og.f32, (6,), name="x")
    idx = ops.non_zero(x)
    ones = ops.broadcast(og.constant(np.float32(1.5)), idx.shape, (0, 1))
    fn = og.Function([ones, idx], [x])
    exe = cpu.compile(fn)
    got, _ = exe(np.array([0, 1, 0, 2, 3, 0], np.float32))
    assert got.shape == (1, 3) and np.all(got == 1.5)


def test_result_tensors_are_checked_before_anything_is_written(cpu):
    fn = _masked_mlp()
    exe = cpu.compile(fn)
    x, keep = _case(6, 1.0)
    keep[:] = [1, 0, 1, 0, 1, 0]  # 3 rows
    inputs = [cpu.create_tensor(og.f32, a.shape, a) for a in (x, keep)]
    wrong = [
        cpu.create_tensor(og.f32, (4, 4)),
        cpu.create_tensor(og.f32, (4,)),
        cpu.create_tensor(og.i64, (4,)),
    ]
    for t in wrong:
        t.buffer[...] = 7
    with pytest.raises(og.GraphError, match="output 0 has shape"):
        exe.call(wrong, inputs)
    assert all(np.all(t.buffer == 7) for t in wrong)
    right = [
        cpu.create_tensor(og.f32, (3, 4)),
        cpu.create_tensor(og.f32, (4,)),
        cpu.create_tensor(og.i64, (3,)),
    ]
    exe.call(right, inputs)
    want = og.backend("INTERPRETER").compile(fn)(x, keep)
    for got, expected in zip(right, want, strict=True):
        assert_close(got.buffer, expected, 1e-5, 1e-5)
    with pytest.raises(og.CallTypeError, match="outside its bounds"):
        exe(*_case(65))


def test_concurrent_calls_with_different_data(parallel_cpu):
    fn = _masked_mlp()
    exe = parallel_cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    cases = [_case(n, d) for n, d in ((5, 0.5), (60, 0.8), (33, 0.1))]
    expected = [ref(*arrays) for arrays in cases]
    failures = []

    def worker(k):
        try:
            for _ in range(10):
                for g, w in zip(exe(*cases[k]), expected[k], strict=True):
                    assert_close(g, w, 1e-4, 1e-4, f"case {k}")
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(k % 3,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_profile_counts_stages_and_data_dependent_nodes(cpu):
    exe = cpu.compile(_masked_mlp(), profile=True)
    exe(*_case(8, 0.5))
    names = [c.node for c in exe.performance_counters()]
    assert any("NonZero" in n for n in names)
    assert any(n.startswith("stage1/") for n in names)
    with pytest.raises(og.GraphError, match="stage"):
        exe.memory_plan()


def test_broadcast_ordered_after_its_binder_only_through_its_shape(cpu):
    start, limit, delta = (og.parameter(og.i64, (), name=n) for n in ("start", "limit", "delta"))
    r = ops.dynamic_range(start, limit, delta)
    two = ops.broadcast(og.constant(np.int64(2)), r.shape, (0,))
    fn = og.Function([ops.add(two, r)], [start, limit, delta])
    assert fn.nodes.index(two.node) < fn.nodes.index(r.node)  # no data edge orders them
    exe = cpu.compile(fn)
    for stop in (4, 7, 0):
        (y,) = exe(np.int64(0), np.int64(stop), np.int64(1))
        np.testing.assert_array_equal(y, np.arange(stop) + 2)


def test_a_size_expression_crosses_two_stages(cpu):
    x = og.parameter(og.i64, (6,), name="x")
    idx = ops.non_zero(x)  # i64[1, n]
    doubled = ops.concat([idx, ops.multiply(idx, idx)], 1)  # i64[1, 2*n], stage 1
    inner = ops.non_zero(doubled)  # i64[2, k]
    flat = ops.reshape(doubled, (-1,))  # read in stage 2: its size is 2*n, n from a carrier
    picked = ops.gather(flat, ops.reshape(ops.slice(inner, (1, 0), (2, inner.shape[1])), (-1,)), 0)
    fn = og.Function([picked, ops.add(flat, flat)], [x])
    exe = cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    assert len(exe.stages) == 2
    for values in ([0, 3, 0, 1, 2, 0], [0] * 6, [1] * 6):
        _compare(exe, ref, [np.array(values, np.int64)])


def test_a_count_above_its_bound_is_a_call_type_error(cpu):
    x = og.parameter(og.f32, (4,), name="x")
    node = ops.NonZero(og.dim("few", max=2))(ops.abs(x))
    exe = cpu.compile(og.Function([node], [x]))
    np.testing.assert_array_equal(exe(np.array([0, 1, 0, 1], np.float32))[0], [[1, 3]])
    with pytest.raises(og.CallTypeError, match="few is 3, outside its bounds 0..2"):
        exe(np.array([1, 1, 0, 1], np.float32))
