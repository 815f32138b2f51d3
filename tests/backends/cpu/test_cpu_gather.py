"""Gather, GatherElements and GatherND as indexed loads in fused loop kernels: the values of
INTERPRETER, negative indices wrapped, out-of-range indices an ExecutionError naming the node
(never a read outside the data), empty tensors, and what fuses with them."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.program import KKind, LoopStep

RNG = np.random.default_rng(7)


def _both(fn, *args):
    got = og.backend("CPU").compile(fn)(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)  # exp: vector libm, within an ulp
    return got


def _gathers(exe):
    return [
        n
        for s in exe.program.steps
        if isinstance(s, LoopStep)
        for k in s.kernels
        for n in k.nodes
        if n.kind is KKind.GATHER
    ]


#: (build, data shape, indices shape, valid index bound, size of the axis the last index
#: reads)
CASES = {
    "gather": (lambda x, i: ops.gather(x, i, 1), (4, 5, 3), (2, 3), 5, 5),
    "gather_batch": (lambda x, i: ops.gather(x, i, 1, batch_dims=1), (4, 5, 3), (4, 6), 5, 5),
    "gather_elements": (lambda x, i: ops.gather_elements(x, i, 1), (4, 5, 3), (3, 7, 2), 5, 5),
    "gather_nd": (ops.gather_nd, (4, 5, 3), (6, 2), 4, 5),
    "gather_nd_batch": (lambda x, i: ops.gather_nd(x, i, 1), (4, 5, 3), (4, 2, 1), 5, 5),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("index_type", [og.i32, og.i64])
def test_negative_indices_wrap_and_out_of_range_fails(cpu, name, index_type):
    build, x_shape, i_shape, bound, size = CASES[name]
    x = og.parameter(og.f32, x_shape)
    i = og.parameter(index_type, i_shape)
    fn = og.Function([ops.exp(build(x, i))], [x, i])
    exe = cpu.compile(fn)
    assert exe.fallback_ops() == [] and _gathers(exe)
    data = RNG.standard_normal(x_shape).astype(np.float32)
    index = RNG.integers(-bound, bound, i_shape).astype(index_type.dtype)
    _both(fn, data, index)
    for bad in (size, -size - 1, np.iinfo(index_type.dtype).max, np.iinfo(index_type.dtype).min):
        wrong = index.copy()
        wrong.flat[-1] = bad
        with pytest.raises(og.ExecutionError, match=r"while executing %\d+ = Gather.*out of range"):
            exe(data, wrong)


def test_the_message_names_axis_and_size(cpu):
    x, i = og.parameter(og.f32, (3, 4)), og.parameter(og.i64, (2,))
    exe = cpu.compile(og.Function([ops.gather(x, i, 1)], [x, i]))
    with pytest.raises(og.ExecutionError, match=r"for axis 1 of size 4 \(valid: -4\.\.3\)"):
        exe(np.zeros((3, 4), np.float32), np.array([0, 4]))


def test_strided_data_and_constant_tables(cpu):
    x, i = og.parameter(og.f32, (6, 5)), og.parameter(og.i64, (3, 2))
    table = og.constant(RNG.standard_normal((7, 4)).astype(np.float32))
    uniform = og.constant(np.full((5, 3), 2.5, np.float32))
    fn = og.Function(
        [
            ops.gather(ops.transpose(x, (1, 0)), i, 1),
            ops.gather(table, ops.convert(i, og.i32), 0),
            ops.gather(uniform, i, 0),
        ],
        [x, i],
    )
    data = RNG.standard_normal((6, 5)).astype(np.float32)
    _both(fn, data, np.array([[0, -1], [3, 2], [4, -5]]))
    with pytest.raises(og.ExecutionError, match="out of range for axis 0 of size 5"):
        cpu.compile(fn)(data, np.array([[0, 0], [0, 0], [0, 5]]))


def test_empty_tensors(cpu):
    x, none = og.parameter(og.f32, (3, 4)), og.parameter(og.i64, (0,))
    empty = og.parameter(og.f32, (0, 4))
    some = og.parameter(og.i64, (2,))
    fn = og.Function([ops.gather(x, none, 0), ops.gather(empty, none, 0)], [x, empty, none])
    got = _both(fn, np.ones((3, 4), np.float32), np.zeros((0, 4), np.float32), np.zeros(0, int))
    assert [g.shape for g in got] == [(0, 4), (0, 4)]
    exe = cpu.compile(og.Function([ops.gather(empty, some, 0)], [empty, some]))
    with pytest.raises(og.ExecutionError, match="out of range for axis 0 of size 0"):
        exe(np.zeros((0, 4), np.float32), np.zeros(2, np.int64))


def test_an_embedding_lookup_fuses_with_its_consumers(cpu):
    """Gather, position add and layer norm: one loop kernel, no fallback."""
    vocab, width = 3000, 64
    table = og.constant(RNG.standard_normal((vocab, width)).astype(np.float32))
    ids = og.parameter(og.i64, (4, 128))
    position = og.constant(RNG.standard_normal((4, 128, width)).astype(np.float32))
    fn = og.Function([ops.layer_norm(ops.gather(table, ids, 0) + position, axis=-1)], [ids])
    exe = cpu.compile(fn)
    loops = [s for s in exe.program.steps if isinstance(s, LoopStep)]
    assert exe.fallback_ops() == [] and len(loops) == 1
    ids_value = RNG.integers(-vocab, vocab, (4, 128))
    np.testing.assert_allclose(
        exe(ids_value)[0],
        og.backend("INTERPRETER").compile(fn)(ids_value)[0],
        rtol=1e-5,
        atol=1e-5,
    )


def test_a_gather_never_fuses_with_the_producer_of_its_inputs(cpu):
    """The indices and the data are computed by kernels of the gather's own shape; its
    consumer reads them too. They must be stored before the gather reads them."""
    x, y = og.parameter(og.f32, (4, 6)), og.parameter(og.f32, (4, 6))
    data = ops.exp(x)
    index = ops.convert(ops.floor(y), og.i64)
    out = ops.gather_elements(data, index, 1) + data + ops.convert(index, og.f32)
    fn = og.Function([out], [x, y])
    xv = RNG.standard_normal((4, 6)).astype(np.float32)
    yv = RNG.uniform(-6, 6, (4, 6)).astype(np.float32)
    got = og.backend("CPU").compile(fn)(xv, yv)[0]
    want = og.backend("INTERPRETER").compile(fn)(xv, yv)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_gathered_product_is_not_an_epilogue(cpu):
    """A kernel that gathers from a GEMM's result must wait for the whole product."""
    a, b = og.parameter(og.f32, (8, 16)), og.parameter(og.f32, (16, 8))
    i = og.parameter(og.i64, (8, 8))
    product = ops.dot(a, b)
    fn = og.Function([ops.gather_elements(product, i, 0) + product], [a, b, i])
    args = (
        RNG.standard_normal((8, 16)).astype(np.float32),
        RNG.standard_normal((16, 8)).astype(np.float32),
        RNG.integers(-8, 8, (8, 8)),
    )
    got = og.backend("CPU").compile(fn)(*args)[0]
    want = og.backend("INTERPRETER").compile(fn)(*args)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_large_gathers(cpu):
    table = og.parameter(og.f32, (20000, 96))
    ids = og.parameter(og.i32, (8, 256))
    nd = og.parameter(og.i64, (4096, 2))
    fn = og.Function([ops.gather(table, ids, 0), ops.gather_nd(table, nd)], [table, ids, nd])
    data = RNG.standard_normal((20000, 96)).astype(np.float32)
    rows = RNG.integers(0, 20000, (8, 256)).astype(np.int32)
    pairs = np.stack([RNG.integers(0, 20000, 4096), RNG.integers(-96, 96, 4096)], -1)
    got, got_nd = cpu.compile(fn)(data, rows, pairs)
    np.testing.assert_array_equal(got, data[rows])
    np.testing.assert_array_equal(got_nd, data[pairs[:, 0], pairs[:, 1]])
