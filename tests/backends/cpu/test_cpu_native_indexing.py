"""ArgMax/ArgMin, TopK, the scatters, OneHot, Pad and ReplaceSlice run natively on CPU (no
reference fallback) and agree with INTERPRETER bit for bit: ties, NaNs, strided inputs,
duplicate scatter targets under every reduction, 16-bit accumulation, bad indices."""

import re

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.indexed import ArgStep, ScatterStep, TopKStep
from opgraph.testing.records import RECORDS

NATIVE = {"ArgMax", "ArgMin", "TopK", "ScatterElements", "ScatterND", "OneHot", "Pad"}
NATIVE |= {"ReplaceSlice"}

CASES = [
    pytest.param(r, t, id=f"{r.name}-{t.name}")
    for r in RECORDS
    for t in r.element_types[:2]
    if NATIVE & {n.op.name for n in r.function(r.element_types[0]).nodes}
]


@pytest.fixture(scope="module")
def cpu():
    return og.backend("CPU")


@pytest.fixture(scope="module")
def reference():
    return og.backend("INTERPRETER")


def same(got, want):
    """Equal bit for bit, NaN positions included (16-bit floats compared widened)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "fV" or got.dtype.name == "bfloat16":
        got, want = got.astype(np.float64), want.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        got, want = np.nan_to_num(got), np.nan_to_num(want)
    np.testing.assert_array_equal(got, want)


def agree(cpu, reference, fn, args, steps=()):
    exe = cpu.compile(fn)
    assert exe.fallback_ops() == []
    kinds = {type(s) for s in exe.program.steps}
    assert set(steps) <= kinds, f"expected steps {steps}, got {kinds}"
    for got, want in zip(exe(*args), reference.compile(fn)(*args), strict=True):
        same(got, want)


@pytest.mark.parametrize(("record", "element_type"), CASES)
def test_records_of_these_ops_run_natively(cpu, record, element_type):
    assert cpu.compile(record.function(element_type)).fallback_ops() == []


def test_the_native_records_are_there():
    assert len(CASES) > 50


def _ties_and_nans(element_type, shape, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(-3, 3, size=shape).astype(np.float64)
    if element_type.is_real:
        values[rng.random(shape) < 0.08] = np.nan
    return values.astype(element_type.dtype)


TYPES = [og.f32, og.f16, og.bf16, og.f64, og.i32, og.u8]


@pytest.mark.parametrize("element_type", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize(("shape", "axis"), [((37, 5), 0), ((4, 300), 1), ((2, 3, 513), 2)])
@pytest.mark.parametrize("builder", [ops.arg_max, ops.arg_min], ids=["max", "min"])
@pytest.mark.parametrize("last", [False, True], ids=["first", "last"])
def test_arg_search_ties_and_nans_through_strides(
    cpu, reference, element_type, shape, axis, builder, last
):
    x = og.parameter(element_type, shape[::-1])
    seen = ops.transpose(x, tuple(reversed(range(len(shape)))))  # a strided input
    fn = og.Function([builder(seen, axis, select_last_index=last)], [x])
    agree(cpu, reference, fn, [_ties_and_nans(element_type, shape[::-1], 1)], [ArgStep])


@pytest.mark.parametrize("element_type", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("k", [1, 4, 40])
@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
@pytest.mark.parametrize("ordered", [True, False], ids=["sorted", "unsorted"])
def test_top_k_ties_and_nans_through_strides(cpu, reference, element_type, k, largest, ordered):
    x = og.parameter(element_type, (40, 3, 2))
    values, indices = ops.top_k(ops.transpose(x, (2, 1, 0)), k, 2, largest, ordered)
    fn = og.Function([values, indices], [x])
    agree(cpu, reference, fn, [_ties_and_nans(element_type, (40, 3, 2), k)], [TopKStep])


def test_top_k_with_a_heap_too_large_for_the_stack(cpu, reference):
    x = og.parameter(og.f32, (3, 20000))
    values, indices = ops.top_k(x, 9000, 1, sorted=True)
    data = np.random.default_rng(3).standard_normal((3, 20000)).astype(np.float32)
    agree(cpu, reference, og.Function([values, indices], [x]), [data], [TopKStep])


REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("element_type", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_duplicates_in_order(cpu, reference, element_type, reduction):
    x = og.parameter(element_type, (6, 5))
    index = og.parameter(og.i64, (4, 7))
    updates = og.parameter(element_type, (7, 4))
    scattered = ops.scatter_elements(x, index, ops.transpose(updates, (1, 0)), 1, reduction)
    fn = og.Function([scattered], [x, index, updates])
    rng = np.random.default_rng(4)
    args = [
        _ties_and_nans(element_type, (6, 5), 5),
        rng.integers(-5, 5, (4, 7)),  # many duplicates, negative indices
        _ties_and_nans(element_type, (7, 4), 6),
    ]
    agree(cpu, reference, fn, args, [ScatterStep])


@pytest.mark.parametrize("element_type", TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_slices_with_duplicates(cpu, reference, element_type, reduction):
    x = og.parameter(element_type, (4, 5, 6))
    index = og.parameter(og.i32, (3, 3, 2))
    updates = og.parameter(element_type, (3, 3, 6))
    fn = og.Function([ops.scatter_nd(x, index, updates, reduction)], [x, index, updates])
    rng = np.random.default_rng(7)
    args = [
        _ties_and_nans(element_type, (4, 5, 6), 8),
        rng.integers(-4, 4, (3, 3, 2)).astype(np.int32),
        _ties_and_nans(element_type, (3, 3, 6), 9),
    ]
    agree(cpu, reference, fn, args, [ScatterStep])


def test_scatter_add_of_f16_accumulates_in_f32_and_rounds_once(cpu, reference):
    """2048 + 1 + 1 in f16 steps is 2048 (each +1 rounds away); in f32 then rounded, 2050."""
    x = og.parameter(og.f16, (2,))
    index = og.parameter(og.i64, (2,))
    updates = og.parameter(og.f16, (2,))
    fn = og.Function([ops.scatter_elements(x, index, updates, 0, "add")], [x, index, updates])
    args = [np.array([2048, 0], np.float16), np.array([0, 0]), np.ones(2, np.float16)]
    got = cpu.compile(fn)(*args)[0]
    assert got.tolist() == [2050.0, 0.0]
    agree(cpu, reference, fn, args)


def test_a_scatter_chain_updates_in_place_and_keeps_the_data(cpu, reference):
    """The second scatter may write over the first one's result (it dies there); the
    caller's data is never written."""
    x = og.parameter(og.f32, (8, 4))
    index = og.parameter(og.i64, (2, 1))
    updates = og.parameter(og.f32, (2, 4))
    first = ops.scatter_nd(ops.negative(x), index, updates)
    second = ops.scatter_nd(first, index, ops.negative(updates), "add")
    fn = og.Function([second], [x, index, updates])
    data = np.arange(32, dtype=np.float32).reshape(8, 4) / 10
    before = data.copy()
    args = [data, np.array([[3], [3]]), np.ones((2, 4), np.float32)]
    agree(cpu, reference, fn, args, [ScatterStep])
    np.testing.assert_array_equal(data, before)
    assert cpu.compile(fn).memory_plan().inplace  # the second scatter took the first's buffer


@pytest.mark.parametrize(
    ("builder", "message"),
    [
        (lambda x, i, u: ops.scatter_elements(x, i, u, 0), "index out of range for axis 0"),
        (lambda x, i, u: ops.scatter_nd(x, ops.reshape(i, (3, 1)), u), "axis 0 of size 6"),
    ],
    ids=["elements", "nd"],
)
def test_a_bad_scatter_index_names_the_node(cpu, builder, message):
    x = og.parameter(og.f32, (6,))
    index = og.parameter(og.i64, (3,))
    updates = og.parameter(og.f32, (3,))
    exe = cpu.compile(og.Function([builder(x, index, updates)], [x, index, updates]))
    assert exe.fallback_ops() == []
    args = [np.zeros(6, np.float32), np.array([0, -7, 1]), np.ones(3, np.float32)]
    with pytest.raises(og.ExecutionError, match=rf"while executing %\d+ = Scatter.*{message}"):
        exe(*args)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize(
    ("below", "above"), [((2, 0, 3), (1, 4, 0)), ((-1, 2, 5), (3, -1, 1)), ((0, 0, 0), (0, 0, 0))]
)
def test_pad_through_strides(cpu, reference, mode, below, above):
    x = og.parameter(og.f32, (4, 3, 5))
    value = og.parameter(og.f32, ())
    padded = ops.pad(ops.transpose(x, (2, 1, 0)), below, above, mode, value)
    fn = og.Function([ops.add(padded, padded)], [x, value])
    data = np.arange(60, dtype=np.float32).reshape(4, 3, 5)
    agree(cpu, reference, fn, [data, np.asarray(-1.5, np.float32)])


def test_reflect_leaves_an_axis_of_one_alone(cpu, reference):
    """ONNX's test_reflect_pad: reflection pads H and W; the channel axis of size 1 (which
    could not be reflected) is neither padded nor cropped."""
    x = og.parameter(og.i32, (1, 3, 4, 5))
    fn = og.Function([ops.pad(x, (0, 0, 2, 1), (0, 0, 1, 3), "reflect")], [x])
    agree(cpu, reference, fn, [np.arange(60, dtype=np.int32).reshape(1, 3, 4, 5)])


def test_a_large_pad_writes_its_windows_without_streaming(cpu):
    """Non-temporal stores into a strided window leave lines partly written, which the slabs
    then read back: only gap-free stores stream (the fill of a whole result still does)."""
    x = og.parameter(og.f32, (16, 64, 112, 56))  # 25.7 MiB: in and out over 32 MiB
    exe = cpu.compile(og.Function([ops.pad(x, (0, 0, 1, 1), (0, 0, 1, 1))], [x]))
    assert "og_stream_f32(" not in exe.source()
    whole = cpu.compile(og.Function([ops.add(x, x)], [x]))
    assert "og_stream_f32(" in whole.source()


def test_repeated_reflections_beyond_the_copy_limit_fall_back(cpu, reference):
    x = og.parameter(og.f32, (2, 2))
    fn = og.Function([ops.pad(x, (40, 40), (40, 40), "reflect")], [x])
    exe = cpu.compile(fn)
    assert exe.fallback_ops() == ["Pad"]
    data = np.array([[1, 2], [3, 4]], np.float32)
    same(exe(data)[0], reference.compile(fn)(data)[0])


@pytest.mark.parametrize("index_type", [og.i8, og.u8, og.i64, og.u64], ids=lambda t: t.name)
def test_one_hot_wraps_negatives_and_blanks_out_of_range(cpu, reference, index_type):
    indices = og.parameter(index_type, (7,))
    fn = og.Function([ops.one_hot(indices, 5, 0, 2.5, -1.0, og.f16)], [indices])
    raw = [0, 4, 5, -1, -5, -6, 3] if index_type.is_signed else [0, 4, 5, 255, 2, 9, 3]
    agree(cpu, reference, fn, [np.array(raw).astype(index_type.dtype)])


def test_replace_slice_with_strides(cpu, reference):
    x = og.parameter(og.i32, (6, 7))
    update = og.parameter(og.i32, (2, 3))
    fn = og.Function([ops.replace_slice(x, update, (1, 0), (5, 7), (2, 3))], [x, update])
    args = [
        np.arange(42, dtype=np.int32).reshape(6, 7),
        -np.arange(6, dtype=np.int32).reshape(2, 3),
    ]
    agree(cpu, reference, fn, args)


def test_an_embedding_reads_each_row_id_once_before_the_vector_loop(cpu, reference):
    """The id of a row does not move along the embedding width: it is loaded before the
    vector loop, so the row is one contiguous vector load (not a vector gather)."""
    table = np.arange(50 * 16, dtype=np.float32).reshape(50, 16)
    ids = og.parameter(og.i64, (3, 4))
    fn = og.Function([ops.gather(og.constant(table), ids, 0)], [ids])
    source = cpu.compile(fn).source()
    # the id load, then per-row lines only (its wrap and range check, a prefetch), then the loop
    before_loop = (
        r"const int64_t v\d+ = p\d+\[o_p\d+\];\n(?:[ ]*[^#\n ][^\n]*\n)*\s*#pragma omp simd"
    )
    assert re.search(before_loop, source)
    loop = source[source.index("#pragma omp simd") :]
    assert "err |=" not in loop[: loop.index("\n  }")]
    agree(cpu, reference, fn, [np.array([[0, 49, -1, 7], [3, 3, 3, 3], [-50, 1, 2, 48]])])
