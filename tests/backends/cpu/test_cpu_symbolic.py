"""CPU runs Functions with symbolic dimensions: one compile serves every binding (issue 16)."""

import ctypes
import math
import threading

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu.codegen.dims import DIM_HELPERS, render_dim
from opgraph.backends.cpu.executable import CpuExecutable
from opgraph.backends.cpu.symbolic import SymbolicCpuExecutable
from opgraph.testing.compare import assert_close

RNG = np.random.default_rng(16)


def _random(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _linear(x, w, b):
    y = ops.matmul(x, og.constant(w))
    return ops.add(y, ops.broadcast(og.constant(b), y.shape, tuple(range(len(y.shape) - 1))))


def _encoder(hidden=32, heads=4, ffn=64):
    """A small post-LN encoder layer over f32[batch, seq, hidden] with symbolic batch/seq."""
    batch, seq = og.dim("batch", max=64), og.dim("seq", max=512)
    x = og.parameter(og.f32, (batch, seq, hidden), name="x")
    head = hidden // heads

    def split(v, perm):
        return ops.transpose(ops.reshape(v, (batch, seq, heads, head)), perm)

    q = split(_linear(x, _random(hidden, hidden), _random(hidden)), (0, 2, 1, 3))
    k = split(_linear(x, _random(hidden, hidden), _random(hidden)), (0, 2, 3, 1))
    v = split(_linear(x, _random(hidden, hidden), _random(hidden)), (0, 2, 1, 3))
    scores = ops.matmul(q, k) * (head**-0.5)
    context = ops.matmul(ops.softmax(scores, -1), v)
    merged = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (batch, seq, hidden))
    h = ops.add(_linear(merged, _random(hidden, hidden), _random(hidden)), x)
    gamma, beta = (
        og.constant(np.ones(hidden, np.float32)),
        og.constant(np.zeros(hidden, np.float32)),
    )
    h = ops.layer_norm(h, gamma, beta, -1, 1e-5)
    f = _linear(
        ops.relu(_linear(h, _random(hidden, ffn), _random(ffn))),
        _random(ffn, hidden),
        _random(hidden),
    )
    return og.Function([ops.add(f, h)], [x], name="encoder")


def _elementwise():
    n, m = og.dim("n", max=4096), og.dim("m", max=100)
    a = og.parameter(og.f32, (n, m), name="a")
    b = og.parameter(og.f32, (n, m), name="b")
    s = ops.softmax(ops.add(ops.exp(a), b), -1)
    total = ops.reduce_sum(ops.multiply(a, b), (0,))
    return og.Function([s, total, ops.concat([a, b], 1)], [a, b], name="pointwise")


def _compare(cpu_exe, ref_exe, arrays, rtol=1e-4, atol=1e-4):
    got, want = cpu_exe(*arrays), ref_exe(*arrays)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"result {i}: {g.shape} vs {w.shape}"
        assert_close(g, w, rtol, atol, f"result {i}")


def test_static_function_keeps_the_static_executable(cpu):
    x = og.parameter(og.f32, (3, 4), name="x")
    exe = cpu.compile(og.Function([ops.relu(x)], [x]))
    assert isinstance(exe, CpuExecutable)


def test_one_compile_serves_every_binding(cpu, compile_counts):
    fn = _elementwise()
    exe = cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    assert isinstance(exe, SymbolicCpuExecutable)
    assert exe.fallback_ops() == []  # softmax, reductions, concat: loop kernels
    compile_counts.reset()
    for n, m in ((1, 1), (7, 3), (300, 100), (2, 17), (0, 5), (7, 3)):
        _compare(exe, ref, [_random(n, m), _random(n, m)])
    assert (compile_counts.builds, compile_counts.lowerings) == (0, 0)  # neither ran again


def test_encoder_matches_interpreter_at_several_sizes(cpu):
    fn = _encoder()
    exe = cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    for batch, seq in ((1, 16), (2, 5), (1, 64), (3, 1)):
        _compare(exe, ref, [_random(batch, seq, 32)], 1e-3, 1e-4)


def _cnn(size):
    n = og.dim("n", max=32)
    x = og.parameter(og.f32, (n, 3, size, size), name="x")
    conv = ops.convolution(x, og.constant(_random(16, 3, 3, 3)), (1, 1), (1, 1), (1, 1))
    conv = ops.convolution(
        ops.relu(conv), og.constant(_random(16, 16, 3, 3)), (1, 1), (1, 1), (1, 1)
    )
    pooled = ops.avg_pool(ops.max_pool(ops.relu(conv), (2, 2), (2, 2)), (2, 2), (1, 1))
    features = math.prod(pooled.shape[1:])
    flat = ops.reshape(pooled, (n, features))
    return og.Function([_linear(flat, _random(features, 10), _random(10))], [x], name="cnn")


@pytest.mark.parametrize("size", [12, 24], ids=["wide", "rows"])
def test_cnn_with_symbolic_batch_is_native(cpu, parallel_cpu, size):
    # 12x12 outputs run as one GEMM over every image ("wide"), 24x24 by blocks of output
    # rows: both take the batch per call
    fn = _cnn(size)
    reference = og.backend("INTERPRETER").compile(fn)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        assert exe.fallback_ops() == []
        for batch in (1, 4, 2):
            _compare(exe, reference, [_random(batch, 3, size, size)], 1e-3, 1e-4)


def test_fallback_ops_name_the_steps_without_symbolic_code(cpu):
    n = og.dim("n", max=64)
    a = og.parameter(og.i32, (n, 3), name="a")
    b = og.parameter(og.i32, (3, n), name="b")
    fn = og.Function([ops.add(ops.matmul(a, b), ops.matmul(a, b))], [a, b], name="ints")
    exe = cpu.compile(fn)
    assert exe.fallback_ops() == ["MatMul"]  # integer products are static-only code
    reference = og.backend("INTERPRETER").compile(fn)
    for rows in (1, 5):
        arrays = [RNG.integers(-9, 9, (rows, 3), dtype=np.int32) for _ in range(1)]
        arrays.append(RNG.integers(-9, 9, (3, rows), dtype=np.int32))
        _compare(exe, reference, arrays)


def test_encoder_with_symbolic_batch_and_sequence_is_native(cpu, parallel_cpu):
    # attention multiplies over a symbolic batch of heads: a grid of GEMMs
    fn = _encoder()
    reference = og.backend("INTERPRETER").compile(fn)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        assert exe.fallback_ops() == []
        for batch, seq in ((2, 5), (3, 40)):
            _compare(exe, reference, [_random(batch, seq, 32)], 1e-3, 1e-4)


def test_products_are_native_on_symbols(cpu, parallel_cpu):
    seq = og.dim("seq", max=512)
    q = og.parameter(og.f32, (1, 4, seq, 16), name="q")
    k = og.parameter(og.f32, (1, 4, 16, seq), name="k")
    v = og.parameter(og.f64, (seq, 5), name="v")
    w = og.parameter(og.f64, (5, seq), name="w")
    scores = ops.softmax(ops.matmul(q, k), -1)
    attended = ops.matmul(scores, ops.transpose(k, (0, 1, 3, 2)))
    dense = _linear(ops.reshape(attended, (4 * seq, 16)), _random(16, 40), _random(40))
    row = ops.matmul(ops.slice(v, (0, 0), (1, 5)), w)
    fn = og.Function([dense, ops.matmul(v, w), row, ops.matmul(w, v)], [q, k, v, w])
    reference = og.backend("INTERPRETER").compile(fn)
    for backend in (cpu, parallel_cpu):
        exe = backend.compile(fn)
        assert exe.fallback_ops() == []
        assert "scipy_cblas_dgemm" in exe.source() and "og_gemm_panels" in exe.source()
        for n in (1, 3, 200):
            arrays = [_random(1, 4, n, 16), _random(1, 4, 16, n)]
            arrays += [RNG.standard_normal((n, 5)), RNG.standard_normal((5, n))]
            _compare(exe, reference, arrays, 2e-4, 2e-4)


def test_memory_plan_per_binding(cpu):
    encoder = cpu.compile(_encoder())
    small = encoder.memory_plan({"batch": 1, "seq": 2})
    large = encoder.memory_plan({"batch": 2, "seq": 100})
    assert 0 < small.peak < large.peak
    exe = cpu.compile(_elementwise())
    with pytest.raises(og.GraphError, match="needs a binding"):
        exe.memory_plan()
    # calls alternate between bindings whose arenas differ: each call gets a large enough one
    ref = og.backend("INTERPRETER").compile(_elementwise())
    for n, m in ((2, 3), (1000, 100), (2, 3)):
        _compare(exe, ref, [_random(n, m), _random(n, m)])


def test_disagreeing_arguments_raise_and_write_nothing(cpu):
    exe = cpu.compile(_elementwise())
    with pytest.raises(og.CallTypeError, match="symbol n is 3 from argument 0 axis 0 but 4"):
        exe(_random(3, 2), _random(4, 2))
    out = [cpu.create_tensor(og.f32, s) for s in ((3, 2), (2,), (3, 4))]
    for t in out:
        t.buffer[...] = 7.0
    inputs = [cpu.create_tensor(og.f32, (3, 2), _random(3, 2)) for _ in range(2)]
    bad = [cpu.create_tensor(og.f32, (3, 2), _random(3, 2)), cpu.create_tensor(og.f32, (3, 3))]
    with pytest.raises(og.CallTypeError, match="symbol m"):
        exe.call(out, bad)
    wrong = [out[0], cpu.create_tensor(og.f32, (3,)), out[2]]
    with pytest.raises(og.GraphError, match=r"output 1 has shape \[3\], result 1 has \[2\]"):
        exe.call(wrong, inputs)
    assert all(np.all(t.buffer == 7.0) for t in out)
    exe.call_unchecked(out, inputs)  # validated above: now it runs
    want = og.backend("INTERPRETER").compile(_elementwise())(*(t.buffer for t in inputs))
    for got, expected in zip(out, want, strict=True):
        assert_close(got.buffer, expected, 1e-5, 1e-6)


def test_value_above_its_bound(cpu):
    exe = cpu.compile(_elementwise())
    with pytest.raises(og.CallTypeError, match="outside its bounds 0..100"):
        exe(_random(2, 101), _random(2, 101))


def test_binding_a_type_rule_rejects_is_a_call_type_error(cpu):
    n = og.dim("n", max=100)
    x = og.parameter(og.f32, (n,), name="x")
    fn = og.Function([ops.exp(ops.slice(x, (2,), (6,)))], [x], name="sliced")
    exe = cpu.compile(fn)
    want = np.exp(np.arange(2, 6, dtype=np.float32))
    assert_close(exe(np.arange(8, dtype=np.float32))[0], want, 1e-6, 0)
    with pytest.raises(og.CallTypeError, match="n=4"):
        exe(np.arange(4, dtype=np.float32))


def test_concurrent_calls_at_different_bindings(parallel_cpu):
    fn = _elementwise()
    exe = parallel_cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    cases = [[_random(n, m), _random(n, m)] for n, m in ((5, 7), (200, 64), (33, 1))]
    expected = [ref(*arrays) for arrays in cases]
    failures = []

    def worker(k):
        try:
            for _ in range(20):
                got = exe(*cases[k])
                for g, w in zip(got, expected[k], strict=True):
                    assert_close(g, w, 1e-4, 1e-4, f"case {k}")
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(k % 3,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_gather_and_reverse_with_symbolic_sizes(cpu):
    n = og.dim("n", max=50)
    table = og.parameter(og.f32, (n, 4), name="table")
    index = og.parameter(og.i64, (n,), name="index")
    picked = ops.gather(ops.reverse(table, (0,)), index, 0)
    fn = og.Function([ops.add(picked, picked)], [table, index], name="pick")
    exe = cpu.compile(fn)
    ref = og.backend("INTERPRETER").compile(fn)
    for size in (1, 9):
        _compare(exe, ref, [_random(size, 4), RNG.integers(-size, size, size)])
    with pytest.raises(og.ExecutionError, match="index out of range"):
        exe(_random(3, 4), np.array([0, 1, 3], np.int64))


def test_gather_from_an_axis_empty_at_the_binding(cpu):
    n, m = og.dim("n", max=10), og.dim("m", max=10)
    x = og.parameter(og.f32, (n, 3), name="x")
    index = og.parameter(og.i64, (m,), name="index")
    exe = cpu.compile(og.Function([ops.gather(x, index, 0)], [x, index]))
    with pytest.raises(og.ExecutionError, match="index out of range for axis 0 of size n"):
        exe(np.ones((0, 3), np.float32), np.array([0, 0]))  # nothing is read from x
    assert exe(np.ones((0, 3), np.float32), np.zeros(0, np.int64))[0].shape == (0, 3)


def test_data_dependent_nodes_run_in_stages(cpu):
    x = og.parameter(og.f32, (og.dim("n"),), name="x")
    exe = cpu.compile(og.Function([ops.non_zero(x)], [x]))  # tests/backends/cpu/test_cpu_staged.py
    assert exe.fallback_ops() == ["NonZero"]
    assert exe(np.array([0, 2, 0, 3], np.float32))[0].tolist() == [[1, 3]]


def test_bf16_precision_needs_static_sizes(cpu):
    with pytest.raises(og.UnsupportedOpError, match="precision='bf16' needs static shapes"):
        cpu.compile(_elementwise(), precision="bf16")


def test_arenas_grow_for_unbounded_symbols(cpu):
    n = og.dim("n")  # no bound: arenas start empty and grow as calls need
    x = og.parameter(og.f32, (n, 8), name="x")
    hidden = ops.relu(_linear(x, _random(8, 64), _random(64)))
    fn = og.Function([_linear(ops.exp(hidden), _random(64, 8), _random(8))], [x], name="mlp")
    exe = cpu.compile(fn)
    reference = og.backend("INTERPRETER").compile(fn)
    for rows in (2, 500, 3, 1000, 1):
        _compare(exe, reference, [_random(rows, 8) * 0.1], 1e-4, 1e-5)
    assert exe.memory_plan({"n": 1000}).peak > exe.memory_plan({"n": 2}).peak > 0


def test_dimension_expressions_in_c_match_python(cpu):
    # every DimOp rendered to C agrees with Python's //, max and min, negatives included
    n, m = og.dim("n"), og.dim("m", min=1)
    exprs = [
        og.core.dim.floor_div(n - 7, m),
        og.core.dim.dim_max(n - 5, m),
        og.core.dim.dim_min(3 - n, m),
    ]
    body = "\n".join(
        f"long e{i}(void* const* T) {{ return {render_dim(e, {'n': 0, 'm': 1})}; }}"
        for i, e in enumerate(exprs)
    )
    compiled = cpu.toolchain.build(f"{DIM_HELPERS}\n{body}\n", frozenset())
    for value_n, value_m in ((0, 1), (3, 2), (4, 3), (11, 4), (1, 7), (6, 5)):
        table = (ctypes.c_void_p * 2)(value_n or None, value_m)
        for i, e in enumerate(exprs):
            entry = getattr(compiled.library, f"e{i}")
            entry.argtypes, entry.restype = [ctypes.c_void_p], ctypes.c_long
            want = og.core.dim.evaluate(e, {"n": value_n, "m": value_m})
            assert entry(ctypes.cast(table, ctypes.c_void_p)) == want, (e, value_n, value_m)


def test_a_deferred_check_that_moves_no_view_is_checked_per_binding():
    """A split into equal halves of a symbolic axis divides only at even sizes: INTERPRETER
    raises at an odd one, and so does CPU (the type rules' deferred conditions are evaluated
    at each new binding), before anything is written."""
    n = og.dim("n", max=64)
    x = og.parameter(og.f32, (n, 3), name="x")
    first, second = ops.split(x, 0, 2)
    fn = og.Function([ops.add(first, second)], [x], name="halves")
    cpu = og.backend("CPU").compile(fn)
    interpreter = og.backend("INTERPRETER").compile(fn)
    even = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(cpu(even)[0], even[:2] + even[2:])
    odd = np.arange(15, dtype=np.float32).reshape(5, 3)
    with pytest.raises(og.CallTypeError) as want:
        interpreter(odd)
    backend = og.backend("CPU")
    out = backend.create_tensor(og.f32, (2, 3))
    out.buffer[...] = 7.0
    with pytest.raises(og.CallTypeError) as got:
        cpu.call([out], [backend.create_tensor(og.f32, (5, 3), odd)])
    assert str(got.value) == str(want.value)  # worded as INTERPRETER words it
    assert np.all(out.buffer == 7.0)  # nothing written
