"""fold_quantized_chains: a QuantizeLinear whose input is a pointwise function of one 8-bit
value becomes a 256-entry table lookup (or the value itself), bit-identical to the chain on
the INTERPRETER; what does not qualify is left alone."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.ops.elementwise import Erf
from opgraph.ops.indexing import Gather
from opgraph.ops.quantization import QuantizeLinear
from opgraph.passes.fold_quantized_chains import fold_quantized_chains

INTERPRETER = og.backend("INTERPRETER")
SHAPE = (4, 96)


def _scalar(value: float | int, t: og.ElementType) -> og.Output:
    return og.constant(np.array(value, t.dtype))


def _qdq(x: og.Output, scale: float, zero: int, t: og.ElementType = og.u8) -> og.Output:
    """Q then DQ, as onnxruntime's quantizer wraps every op."""
    s, z = _scalar(scale, og.f32), _scalar(zero, t)
    return ops.dequantize_linear(ops.quantize_linear(x, s, z), s, z)


def _like(value: float, x: og.Output) -> og.Output:
    return ops.broadcast(_scalar(value, og.f32), x.shape, tuple(range(x.rank)))


def gelu_chain(t: og.ElementType = og.u8) -> og.Function:
    """BERT's GELU as quantize_static writes it: every op's output quantized and
    dequantized again (five QuantizeLinear after the source's own)."""
    x = og.parameter(og.f32, SHAPE, name="x")
    zero = 3 if t is og.u8 else -5
    h = _qdq(x, 0.043, zero, t)  # the source: Q(x) is the 8-bit value
    e = _qdq(ops.erf(ops.divide(h, _like(1.4142135, h))), 0.0078, zero, t)
    p = _qdq(ops.add(e, _like(1.0, e)), 0.0079, zero, t)
    m = _qdq(ops.multiply(h, p), 0.05, zero, t)
    s, z = _scalar(0.021, og.f32), _scalar(zero, t)
    out = ops.quantize_linear(ops.multiply(m, _like(0.5, m)), s, z)
    return og.Function([out], [x])


def _inputs(rng: np.random.Generator) -> np.ndarray:
    data = (rng.standard_normal(SHAPE) * 4).astype(np.float32)
    data.reshape(-1)[:8] = [np.nan, np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0, 0.0215]
    return data


def _kinds(fn: og.Function) -> list[type]:
    return [type(n.op) for n in fn.nodes]


@pytest.mark.parametrize("t", [og.u8, og.i8])
def test_a_gelu_chain_becomes_one_lookup_bit_identical(t):
    fn = gelu_chain(t)
    folded = fold_quantized_chains(fn)
    kinds = _kinds(folded)
    assert kinds.count(Gather) == 1  # the inner quantizations died with the outer chain
    assert Erf not in kinds and kinds.count(QuantizeLinear) == 1  # the source's own
    assert folded.result_types == fn.result_types
    data = _inputs(np.random.default_rng(5))
    want = INTERPRETER.compile(fn)(data)
    np.testing.assert_array_equal(INTERPRETER.compile(folded)(data), want)


def test_every_byte_value_maps_as_the_chain_does():
    """Drive the source through all 256 codes: the table must agree everywhere, including
    the saturated ends."""
    fn = gelu_chain()
    codes = (np.arange(256, dtype=np.float32) - 3) * np.float32(0.043)
    data = np.resize(codes, SHAPE).astype(np.float32)
    folded = fold_quantized_chains(fn)
    np.testing.assert_array_equal(INTERPRETER.compile(folded)(data), INTERPRETER.compile(fn)(data))


def test_an_identity_requantization_around_a_move_disappears():
    """``Q(transpose(DQ(q)))`` with the same scale and zero point is ``transpose(q)``: the
    table is checked to be the identity, and no lookup is left."""
    q = og.parameter(og.u8, (2, 3, 4), name="q")
    s, z = _scalar(0.0371, og.f32), _scalar(131, og.u8)
    moved = ops.reshape(ops.transpose(ops.dequantize_linear(q, s, z), (2, 0, 1)), (4, 6))
    fn = og.Function([ops.quantize_linear(moved, s, z)], [q])
    folded = fold_quantized_chains(fn)
    kinds = _kinds(folded)
    assert QuantizeLinear not in kinds and Gather not in kinds
    data = np.arange(24, dtype=np.uint8).reshape(2, 3, 4) * 11
    np.testing.assert_array_equal(INTERPRETER.compile(folded)(data), INTERPRETER.compile(fn)(data))


def test_a_requantization_to_another_scale_around_a_move_is_a_lookup():
    q = og.parameter(og.i8, (3, 5), name="q")
    moved = ops.transpose(ops.dequantize_linear(q, _scalar(0.1, og.f32), _scalar(2, og.i8)))
    fn = og.Function([ops.quantize_linear(moved, _scalar(0.07, og.f32), _scalar(-1, og.i8))], [q])
    folded = fold_quantized_chains(fn)
    assert Gather in _kinds(folded)
    data = np.arange(-128, 127, 17, dtype=np.int8).reshape(3, 5)
    np.testing.assert_array_equal(INTERPRETER.compile(folded)(data), INTERPRETER.compile(fn)(data))


def _unchanged(out: og.Output, params: list[og.Output]) -> None:
    fn = og.Function([out], params)
    assert fold_quantized_chains(fn) is fn


def test_a_cheap_requantization_stays_inline():
    """``Q(DQ(q))`` to another scale fuses into its producer: a lookup would cost a pass."""
    q = og.parameter(og.u8, SHAPE)
    d = ops.dequantize_linear(q, _scalar(0.1, og.f32), _scalar(1, og.u8))
    _unchanged(ops.quantize_linear(d, _scalar(0.3, og.f32), _scalar(0, og.u8)), [q])


def test_two_sources_are_not_a_table():
    a, b = og.parameter(og.u8, SHAPE), og.parameter(og.u8, SHAPE)
    s, z = _scalar(0.1, og.f32), _scalar(0, og.u8)
    total = ops.erf(ops.add(ops.dequantize_linear(a, s, z), ops.dequantize_linear(b, s, z)))
    _unchanged(ops.quantize_linear(total, s, z), [a, b])


def test_a_per_element_constant_is_not_a_table():
    """A bias differs per column: the value is not a function of the byte alone."""
    q = og.parameter(og.u8, SHAPE)
    s, z = _scalar(0.1, og.f32), _scalar(0, og.u8)
    bias = og.constant(np.linspace(-1, 1, SHAPE[1], dtype=np.float32))
    biased = ops.add(ops.dequantize_linear(q, s, z), ops.broadcast(bias, SHAPE, (0,)))
    _unchanged(ops.quantize_linear(ops.erf(biased), s, z), [q])


def test_per_axis_quantization_is_not_a_table():
    q = og.parameter(og.u8, SHAPE)
    s = og.constant(np.full(SHAPE[0], 0.1, np.float32))
    z = og.constant(np.zeros(SHAPE[0], np.uint8))
    d = ops.dequantize_linear(q, s, z, axis=0)
    _unchanged(ops.quantize_linear(ops.erf(d), s, z, axis=0), [q])


def test_a_chain_that_fails_on_some_byte_is_left_to_run_time():
    """``100 // q`` fails for ``q == 0`` only: building the table must not fail the compile,
    and the graph keeps failing (or not) exactly where the INTERPRETER does."""
    q = og.parameter(og.u8, (4,))
    hundred = og.constant(np.full(4, 100, np.int32))
    ratio = ops.convert(ops.divide(hundred, ops.convert(q, og.i32)), og.f32)
    out = ops.quantize_linear(ops.erf(ratio), _scalar(0.01, og.f32), _scalar(0, og.u8))
    _unchanged(out, [q])
