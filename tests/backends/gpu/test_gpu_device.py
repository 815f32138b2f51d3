"""The GPU backend on a real CUDA device (CuPy): skipped, with the reason, where there is none.

Once a device is present, ``og.backends()`` lists "GPU" and the shared numeric record table
(tests/numerics/test_op_records.py), the random-graph differential test and the execution
contract run on it too; the tests here cover what only a device can check: the generated
CUDA's numbers (vector and scalar paths, block and thread row kernels, 16-bit floats),
cuBLAS products, im2col convolutions, the error word, zero-copy device arrays, and several
executables sharing one device from several threads.
"""

import threading

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends import gpu
from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate
from opgraph.testing.records import RECORDS

pytestmark = pytest.mark.skipif(
    not gpu.available(), reason=f"no GPU: {gpu.unavailable_reason() or 'unavailable'}"
)


@pytest.fixture(scope="module")
def backend():
    return gpu.GpuBackend()


def _check(backend, fn, args, rtol=1e-5, atol=1e-6):
    got = backend.compile(fn)(*args)
    for g, w in zip(got, evaluate(fn, args), strict=True):
        assert_close(g, w, rtol, atol, fn.name)


#: Each record on its first element type and on the 16-bit floats (the whole table runs in
#: tests/numerics once "GPU" is registered); one skipped placeholder without a device.
SAMPLE = [
    pytest.param(r, t, id=f"{r.name}-{t.name}")
    for r in (RECORDS if gpu.available() else [])
    for t in dict.fromkeys(
        (r.element_types[0], *(x for x in r.element_types if x.name in ("f16", "bf16")))
    )
] or [pytest.param(None, None, id="no-gpu")]


@pytest.mark.parametrize(("record", "element_type"), SAMPLE)
def test_record_sample_on_gpu(backend, record, element_type):
    fn = record.function(element_type)
    args = record.arguments(element_type)
    rtol, atol = record.tolerance(element_type)
    _check(backend, fn, args, rtol, atol)


@pytest.mark.parametrize("size", [4 << 20, 4099, 3, 0])
def test_w2_vector_and_scalar_paths(backend, size):
    x = og.parameter(og.f32, (size,), "x")
    fn = og.Function([ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x / 3.0], [x], name="w2")
    data = np.random.default_rng(1).uniform(-4, 4, size).astype(np.float32)
    _check(backend, fn, [data], 1e-5, 1e-6)


def test_misaligned_device_arrays_take_the_scalar_path(backend):
    import cupy

    x = og.parameter(og.f32, (1024,), "x")
    exe = backend.compile(og.Function([ops.exp(x)], [x], name="misaligned"))
    base = cupy.arange(1025, dtype=cupy.float32) / 1000
    (got,) = exe(base[1:])  # 4 bytes past a 256-byte boundary: no float4 loads
    np.testing.assert_allclose(got, np.exp(cupy.asnumpy(base[1:])), rtol=1e-6)


@pytest.mark.parametrize("shape", [(32, 1000), (4096, 10), (1, 100000)])
def test_softmax_rows(backend, shape):
    x = og.parameter(og.f32, shape, "x")
    data = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    _check(backend, og.Function([ops.softmax(x, -1)], [x], name="softmax"), [data])


@pytest.mark.parametrize("element_type", [og.f32, og.f16, og.bf16])
def test_layer_norm_rows(backend, element_type):
    x = og.parameter(element_type, (64, 768), "x")
    s, b = og.parameter(element_type, (768,), "s"), og.parameter(element_type, (768,), "b")
    fn = og.Function([ops.layer_norm(x, s, b, -1, 1e-12)], [x, s, b], name="ln")
    rng = np.random.default_rng(3)
    args = [
        rng.standard_normal(shape).astype(element_type.dtype)
        for shape in ((64, 768), (768,), (768,))
    ]
    tolerance = 1e-4 if element_type is og.f32 else 4e-2
    _check(backend, fn, args, tolerance, tolerance)


def test_reductions_with_nan_and_columns(backend):
    x = og.parameter(og.f32, (2048, 33), "x")
    data = np.random.default_rng(4).standard_normal((2048, 33)).astype(np.float32)
    data[7, 3] = np.nan
    fn = og.Function(
        [ops.reduce_sum(x, (0,)), ops.reduce_max(x, (1,)), ops.reduce_min(x, (0, 1))], [x]
    )
    _check(backend, fn, [data], 1e-4, 1e-4)


def test_products_and_convolutions(backend):
    rng = np.random.default_rng(5)
    a, b = og.parameter(og.f32, (4, 3, 64, 32), "a"), og.parameter(og.f32, (3, 32, 16), "b")
    i, j = og.parameter(og.i32, (16, 32), "i"), og.parameter(og.i32, (32, 8), "j")
    x, w = og.parameter(og.f32, (2, 4, 17, 17), "x"), og.parameter(og.f32, (6, 2, 3, 3), "w")
    conv = ops.relu(ops.convolution(x, w, (2, 2), None, (1, 1), (1, 1), groups=2))
    fn = og.Function(
        [
            ops.matmul(a, b),
            ops.dot(i, j),
            ops.max_pool(conv, (2, 2)),
            ops.convolution(x, ops.slice(w, [0, 0, 1, 1], [6, 2, 2, 2]), groups=2),
        ],
        [a, b, i, j, x, w],
    )
    args = [
        rng.standard_normal((4, 3, 64, 32)).astype(np.float32),
        rng.standard_normal((3, 32, 16)).astype(np.float32),
        rng.integers(-100, 100, (16, 32)).astype(np.int32),
        rng.integers(-100, 100, (32, 8)).astype(np.int32),
        rng.standard_normal((2, 4, 17, 17)).astype(np.float32),
        rng.standard_normal((6, 2, 3, 3)).astype(np.float32),
    ]
    _check(backend, fn, args, 1e-4, 1e-4)


def test_integer_division_by_zero_is_reported(backend):
    a, b = og.parameter(og.i32, (1000,)), og.parameter(og.i32, (1000,))
    exe = backend.compile(og.Function([ops.divide(a, b)], [a, b]))
    divisors = np.ones(1000, np.int32)
    divisors[999] = 0
    with pytest.raises(og.ExecutionError, match="integer division by zero"):
        exe(np.ones(1000, np.int32), divisors)


def test_device_arrays_in_and_out_without_copies(backend):
    import cupy

    x = og.parameter(og.f32, (256, 256), "x")
    exe = backend.compile(og.Function([ops.relu(x)], [x], name="relu"))
    data = cupy.random.standard_normal((256, 256), dtype=cupy.float32)
    inp = backend.create_tensor(og.f32, (256, 256), data)
    out = backend.create_tensor(og.f32, (256, 256))
    before = backend.device.stats.snapshot()
    exe.call([out], [inp])
    assert backend.device.stats.snapshot() == before
    result = cupy.asarray(out)  # __cuda_array_interface__: no copy
    cupy.testing.assert_array_equal(result, cupy.maximum(data, 0))


def test_executables_share_the_device_across_threads(backend):
    x = og.parameter(og.f32, (512, 512), "x")
    exes = [
        backend.compile(og.Function([ops.softmax(x, -1)], [x], name="a")),
        backend.compile(og.Function([ops.exp(ops.negative(x))], [x], name="b")),
    ]
    data = np.random.default_rng(6).standard_normal((512, 512)).astype(np.float32)
    wants = [evaluate(e.function, [data])[0] for e in exes]
    errors = []

    def worker(k):
        for _ in range(10):
            (got,) = exes[k % 2](data)
            if not np.allclose(got, wants[k % 2], rtol=1e-5, atol=1e-6):
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
