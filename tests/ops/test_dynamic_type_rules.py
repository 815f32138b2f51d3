"""Type rules of shape_of and non_zero: accepted cases (static and symbolic inputs), the fresh
data-dependent symbol of non_zero, and one test per error."""

import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.dim import bounds, free_symbols


def p(shape, t=og.f32):
    return og.parameter(t, shape)


@pytest.mark.parametrize(
    ("shape", "t", "want"),
    [((2, 3, 4), og.f32, "i64[3]"), ((), og.i8, "i64[0]"), ((3, 0), og.boolean, "i64[2]")],
)
def test_shape_of_static(shape, t, want):
    assert str(ops.shape_of(p(shape, t)).type) == want


def test_shape_of_symbolic_input_has_static_rank():
    x = p((og.dim("batch"), 2 * og.dim("seq"), 3))
    assert str(ops.shape_of(x).type) == "i64[3]"


def test_shape_of_is_not_differentiable():
    assert ops.ShapeOf.differentiable is False


def test_non_zero_gets_fresh_bounded_symbol():
    x = p((3, 4))
    a, b = ops.non_zero(x), ops.non_zero(x)
    assert a.type.rank == 2 and a.type.shape[0] == 2
    (sa,), (sb,) = free_symbols(a.type.shape), free_symbols(b.type.shape)
    assert sa != sb  # one fresh symbol per node
    assert (sa.min, sa.max) == (0, 12)
    assert a.node.op.bound_symbols() == (sa,)
    assert a.type.element_type == og.i64


def test_non_zero_bound_on_symbolic_input():
    x = p((og.dim("n", max=10), 3))
    (symbol,) = free_symbols(ops.non_zero(x).type.shape[1])
    assert symbol.max == bounds(30)[1]


def test_non_zero_unbounded_symbolic_input_has_no_max():
    (symbol,) = free_symbols(ops.non_zero(p((og.dim("n"),))).type.shape[1])
    assert symbol.max is None


def test_non_zero_specialised_count_is_static():
    x = p((3, 4))
    y = ops.non_zero(x)
    (symbol,) = free_symbols(y.type.shape)
    fn = og.passes.specialize_shapes(og.Function([y], [x]), {symbol.name: 5})
    assert str(fn.flat_result_types[0]) == "i64[2,5]"


def test_non_zero_rejects_scalar():
    with pytest.raises(og.OpTypeError, match="rank >= 1"):
        ops.non_zero(p(()))


def test_non_zero_rejects_count_above_element_count():
    with pytest.raises(og.OpTypeError, match="exceeds the 6 elements"):
        ops.NonZero(7)(p((2, 3)))


@pytest.mark.parametrize("count", [-1, 2 * og.dim("k"), "k"])
def test_non_zero_rejects_bad_count(count):
    with pytest.raises(og.OpTypeError, match="count must be a symbol"):
        ops.NonZero(count)


def test_non_zero_and_shape_of_are_marked_not_differentiable():
    assert ops.NonZero.differentiable is False
    assert ops.ShapeOf.differentiable is False
