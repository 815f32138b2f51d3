"""Per-channel QDQ chains (``fold_quantized_chains``' per-channel tables): a batch norm
between two quantizations (``Q(BN(DQ(q)))``) becomes one lookup in ``C`` rows of 256 entries,
looked up by rows of bytes where the target has AVX-512 VBMI (the gather loop elsewhere),
with exactly the INTERPRETER's bytes; a per-row table whose rows leave the table takes the
checked element-wise lookup."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.fused.builder import TargetFeatures
from opgraph.backends.fused.pipeline import lower
from opgraph.ops.indexing import Gather
from opgraph.ops.nn import BatchNormInference
from opgraph.passes import fold_quantized_chains as fq

INTERPRETER = og.backend("INTERPRETER")
#: What a forced ISA needs of this CPU (x86-64-v4: AVX-512 without VBMI, the gather loop).
ISA_FLAGS = {"avx2": {"avx2", "fma", "bmi2"}, "avx512": {"avx512f", "avx512bw", "avx512vl"}}


def _q(x: og.Output, scale: float, zero: int, t: og.ElementType) -> og.Output:
    s, z = og.constant(np.float32(scale)), og.constant(np.array(zero, t.dtype))
    return ops.quantize_linear(x, s, z)


def _dq(q: og.Output, scale: float, zero: int) -> og.Output:
    s, z = og.constant(np.float32(scale)), og.constant(np.array(zero, q.element_type.dtype))
    return ops.dequantize_linear(q, s, z)


def batch_norm_chain(shape: tuple[int, ...], t: og.ElementType = og.u8) -> og.Function:
    """``Q(BN(DQ(Q(x))))`` with per-channel parameters (the second quantization's zero point
    0: the ReLU onnxruntime's quantizer folds into it)."""
    rng = np.random.default_rng(3)
    channels = shape[1]
    x = og.parameter(og.f32, shape, name="x")
    zero = 124 if t is og.u8 else -4
    q = _q(x, 0.079, zero, t)
    params = [
        og.constant((rng.random(channels) + 0.5).astype(np.float32)),
        og.constant(rng.standard_normal(channels).astype(np.float32) * 0.2),
        og.constant(rng.standard_normal(channels).astype(np.float32) * 0.3),
        og.constant((rng.random(channels) + 0.1).astype(np.float32)),
    ]
    y = ops.batch_norm_inference(_dq(q, 0.079, zero), *params)
    return og.Function([_q(y, 0.029, 0, t)], [x])


def _data(shape: tuple[int, ...]) -> np.ndarray:
    data = (np.random.default_rng(5).standard_normal(shape) * 6).astype(np.float32)
    data.reshape(-1)[:6] = [np.nan, np.inf, -np.inf, 1e30, -0.0, 0.0395]
    return data


def _kinds(fn: og.Function) -> set[type]:
    return {type(n.op) for n in fn.nodes}


@pytest.mark.parametrize("t", [og.u8, og.i8])
def test_a_batch_norm_chain_becomes_a_per_channel_lookup_bit_identical(t):
    fn = batch_norm_chain((2, 6, 32, 32), t)
    folded = fq.fold_quantized_chains(fn)
    kinds = _kinds(folded)
    assert Gather in kinds and BatchNormInference not in kinds
    data = _data((2, 6, 32, 32))
    np.testing.assert_array_equal(INTERPRETER.compile(folded)(data), INTERPRETER.compile(fn)(data))


def test_a_per_channel_lookup_read_by_more_arithmetic_stays_a_chain():
    fn = batch_norm_chain((2, 6, 32, 32))
    (out,) = fn.results
    fn = og.Function([ops.add(_dq(out, 0.029, 0), _dq(out, 0.029, 0))], fn.parameters)
    assert BatchNormInference in _kinds(fq.fold_quantized_chains(fn))


def test_planes_shorter_than_a_table_stay_chains():
    fn = batch_norm_chain((2, 6, 16, 16))
    assert BatchNormInference in _kinds(fq.fold_quantized_chains(fn))


def test_the_smallest_plane_is_the_callers_to_choose():
    small, large = batch_norm_chain((2, 6, 16, 16)), batch_norm_chain((2, 6, 32, 32))
    assert Gather in _kinds(fq.fold_quantized_chains(small, min_plane=256))
    assert BatchNormInference in _kinds(fq.fold_quantized_chains(large, min_plane=2048))
    assert BatchNormInference in _kinds(fq.fold_quantized_chains(large, min_plane=None))


def test_a_target_without_channel_tables_keeps_the_chain_with_the_same_bytes():
    fn = batch_norm_chain((2, 6, 32, 32))
    off = dataclasses.replace(TargetFeatures(), channel_table_plane=None)
    assert Gather not in _kinds(lower(fn, features=off))  # the chain, decomposed
    assert Gather in _kinds(lower(fn, features=TargetFeatures()))
    data = _data((2, 6, 32, 32))
    want = INTERPRETER.compile(fn)(data)
    np.testing.assert_array_equal(INTERPRETER.compile(lower(fn, features=off))(data), want)


def test_per_channel_multipliers_broadcast_over_the_planes_fold_too():
    x = og.parameter(og.f32, (2, 5, 32, 32), name="x")
    gains = og.constant(np.linspace(0.5, 2.0, 5, dtype=np.float32))
    scaled = ops.multiply(_dq(_q(x, 0.05, 128, og.u8), 0.05, 128),
                          ops.broadcast(gains, x.shape, (0, 2, 3)))  # fmt: skip
    out = _q(ops.exp(_dq(_q(scaled, 0.04, 7, og.u8), 0.04, 7)), 0.3, 0, og.u8)
    fn = og.Function([out], [x])
    folded = fq.fold_quantized_chains(fn)
    assert Gather in _kinds(folded)
    data = _data((2, 5, 32, 32))
    np.testing.assert_array_equal(INTERPRETER.compile(folded)(data), INTERPRETER.compile(fn)(data))


@pytest.mark.parametrize("t", [og.u8, og.i8])
@pytest.mark.parametrize("shape", [(2, 6, 32, 32), (3, 4, 20, 60)])
def test_the_cpu_looks_each_channel_up_on_bytes(t, shape):
    """u8 rows looked up through the row's entries as bytes (VBMI; the gather loop on AVX2
    and AVX-512 without VBMI), i8 ones by the gather loop; one and two threads (ranges
    entered mid-row)."""
    fn = batch_norm_chain(shape, t)
    data = _data(shape)
    want = INTERPRETER.compile(fn)(data)
    for isa, threads in (("native", 2), ("native", 1), ("avx2", 1), ("avx512", 1)):
        if isa != "native" and not ISA_FLAGS[isa] <= cpu_config.cpu_flags():
            continue
        config = dataclasses.replace(default_config(), isa=isa, num_threads=threads)
        exe = CpuBackend(config).compile(fn)
        assert ("lut_ok_" in exe.source()) is (t is og.u8)  # type: ignore[attr-defined]
        np.testing.assert_array_equal(exe(data), want)


def test_rows_whose_entries_leave_the_table_take_the_checked_lookup():
    """A hand-made per-row lookup (not from the pass) whose row offsets are negative (wrapped,
    as Gather wraps) or end past the table: those rows take the element-wise lookup."""
    channels, plane = 4, 100
    q = og.parameter(og.u8, (2, channels, plane), name="q")
    table = og.constant(np.arange(channels * 256, dtype=np.int32) % 251)
    starts = og.constant(np.array([0, 300, -256, 700], np.int32))
    index = ops.add(ops.convert(q, og.i32), ops.broadcast(starts, q.shape, (0, 2)))
    out = ops.convert(ops.gather(table, index, 0), og.u8)
    fn = og.Function([out], [q])
    data = np.random.default_rng(2).integers(0, 256, (2, channels, plane)).astype(np.uint8)
    exe = CpuBackend(default_config()).compile(fn)
    assert "lut_ok_" in exe.source()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(exe(data), INTERPRETER.compile(fn)(data))
