"""Pattern matching: one table of (pattern, value, expected captures), then the error paths."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.pattern import P, PatternError, constant_value, source_constant
from opgraph.testing.fake_ops import SquarePlusOne

x = og.parameter(og.f32, (2, 3), name="x")
y = og.parameter(og.f32, (2, 3), name="y")
i = og.parameter(og.i32, (2, 3), name="i")
zero = (x * 0.0).node.inputs[1]  # sugar: Broadcast(Constant 0.0)
one_const = og.constant(np.ones((2, 3), np.float32))
half_mixed = og.constant(np.array([[0.5, 0.5, 0.5], [0.5, 0.5, 1.0]], np.float32))
add_xy = ops.add(x, y)
add_xx = ops.add(x, x)
sub_xy = ops.subtract(x, y)
max_zero = ops.maximum(zero, x)
conv = ops.convert(ops.convert(i, og.f32), og.f32)
conv_once = ops.convert(i, og.f32)
exp_conv = ops.exp(conv_once)
top = ops.top_k(x, 2)
split = ops.call(og.Function([ops.exp(x), ops.negative(x)], [x]), x)
nested = ops.multiply(ops.add(x, y), ops.exp(x))
mixed = ops.add(ops.exp(x), x)

MATCHES = [
    # (id, pattern, value, expected captures by name or None for no match)
    ("class", P(ops.Add), add_xy, {}),
    ("class_miss", P(ops.Sub), add_xy, None),
    ("class_tuple", P((ops.Sub, ops.Add)), add_xy, {}),
    ("family_base", P(ops.BinaryElementwise), sub_xy, {}),
    ("vars", P(ops.Add, P.var("a"), P.var("b")), add_xy, {"a": x, "b": y}),
    ("named_root", P(ops.Add, name="root"), add_xy, {"root": add_xy}),
    ("same_var_twice", P(ops.Add, P.var("a"), P.var("a")), add_xx, {"a": x}),
    ("same_var_twice_miss", P(ops.Add, P.var("a"), P.var("a")), add_xy, None),
    (
        "commuted",
        P(ops.Add, P.var("a", where=lambda o: o == y), P.var("b")),
        add_xy,
        {"a": y, "b": x},
    ),
    ("not_commutative", P(ops.Sub, P.var("a", where=lambda o: o == y), P.any()), sub_xy, None),
    ("arity_mismatch", P(ops.Add, P.any()), add_xy, None),
    (
        "nested",
        P(ops.Mul, P(ops.Add, P.var("a"), P.any()), P(ops.Exp, P.var("a"))),
        nested,
        {"a": x},
    ),
    ("nested_commuted", P(ops.Mul, P(ops.Exp, P.var("a")), P(ops.Add)), nested, {"a": x}),
    # backtracking: the first order binds a=exp(x) and fails at P.var("a") == x
    (
        "backtrack",
        P(ops.Add, P.var("e"), P.var("a", where=lambda o: o == x)),
        mixed,
        {"e": mixed.node.inputs[0], "a": x},
    ),
    ("where_on_output", P(ops.Add, where=lambda o: o.shape == (2, 3)), add_xy, {}),
    ("where_rejects", P(ops.Add, where=lambda o: o.element_type == og.i32), add_xy, None),
    ("const_broadcast", P.const(0.0, name="z"), zero, {"z": zero}),
    ("const_any", P.const(), one_const, {}),
    ("const_value", P.const(1), one_const, {}),
    ("const_value_miss", P.const(2), one_const, None),
    ("const_not_all_equal", P.const(0.5), half_mixed, None),
    ("const_no_broadcast", P.const(0.0, broadcast=False), zero, None),
    ("const_not_constant", P.const(), x, None),
    ("max_zero", P(ops.Max, P.var("v"), P.const(0)), max_zero, {"v": x}),
    ("skip_taken", P(ops.Exp, P.skip(ops.Convert, P.var("v"))), exp_conv, {"v": i}),
    (
        "skip_in_place",
        P(ops.Exp, P.skip(ops.Convert, P.var("v", where=lambda o: o.element_type == og.f32))),
        exp_conv,
        {"v": conv_once},
    ),
    (
        "skip_where",
        P.skip(ops.Convert, P.var("v"), where=lambda o: o.element_type == og.f64),
        conv,
        {"v": conv},
    ),
    ("skip_one_only", P.skip(ops.Convert, P.var("v", where=lambda o: o == i)), conv, None),
    ("output_index", P(ops.Call)[1], split[1], {}),
    ("output_index_miss", P(ops.Call), split[1], None),
    ("output_keyword", P(ops.Call, P.var("a"), output=1), split[1], {"a": x}),
    ("top_k_indices", P(ops.TopK, P.var("a"))[1], top[1], {"a": x}),
    ("top_k_values_not_indices", P(ops.TopK, P.var("a"))[1], top[0], None),
    ("decomposable_op", P(SquarePlusOne, P.var("a")), SquarePlusOne()(x), {"a": x}),
]


@pytest.mark.parametrize(
    ("pattern", "value", "expected"), [m[1:] for m in MATCHES], ids=[m[0] for m in MATCHES]
)
def test_match(pattern, value, expected):
    assert pattern.match(value) == expected


def test_matches_yields_every_way():
    # Both input orders of a commutative op bind differently.
    found = list(P(ops.Add, P.var("a"), P.var("b")).matches(add_xy))
    assert found == [{"a": x, "b": y}, {"a": y, "b": x}]
    # add(x, x) is tried once: swapping equal inputs gives nothing new.
    assert len(list(P(ops.Add, P.var("a"), P.var("b")).matches(add_xx))) == 1


def test_names_and_roots():
    p = P(
        ops.Mul,
        P(ops.Add, P.var("a"), P.const(name="c")),
        P.skip(ops.Convert, P.var("b")),
        name="m",
    )
    assert p.names() == {"a", "b", "c", "m"}
    assert p.root_classes() == (ops.Mul,)
    assert P.var("v").root_classes() is None
    assert P.skip(ops.Convert, P(ops.Exp)).root_classes() == (ops.Convert, ops.Exp)
    assert P.skip(ops.Convert, P.any()).root_classes() is None
    assert "P(Mul, P(Add, P.var('a')" in repr(p)
    assert p.site.startswith("test_pattern.py:")


def test_constant_value_sees_through_broadcasts():
    b = ops.broadcast(og.constant([1.0, 2.0]), (3, 2, 4), (0, 2))
    value = constant_value(b)
    assert value.shape == (3, 2, 4) and value[1, 1, 3] == 2.0
    assert not value.flags.writeable
    assert source_constant(b) is b.node.inputs[0].op
    assert constant_value(x) is None and source_constant(x) is None
    huge = ops.broadcast(og.constant(1.5), (4096, 4096))
    assert constant_value(huge).base is not None  # a view, not 16M copied floats


ERRORS = [
    (
        "string_op",
        lambda: P("Add"),
        "expected an op class or a non-empty tuple of op classes, got 'Add'",
    ),
    ("empty_tuple", lambda: P(()), "expected an op class or a non-empty tuple"),
    ("not_op", lambda: P(int), "expected an op class"),
    (
        "input_not_pattern",
        lambda: P(ops.Add, x, P.any()),
        "P(Add): input pattern 0 must be a Pattern",
    ),
    ("bad_name", lambda: P.var("1x"), "name must be a Python identifier, got '1x'"),
    ("reserved_name", lambda: P.var("ctx"), "the name 'ctx' is reserved"),
    ("no_var_name", lambda: P.var(None), "P.var: a name is required"),
    ("bad_where", lambda: P.any(where=3), "where must be a callable(output) -> bool"),
    ("bad_output", lambda: P(ops.Add, output=-1), "output must be a non-negative int, got -1"),
    ("bad_const", lambda: P.const("zero"), "P.const: value must be a Python scalar"),
    ("skip_string", lambda: P.skip("Convert", P.any()), "P.skip: expected an op class"),
    ("skip_inner", lambda: P.skip(ops.Convert, x), "P.skip: inner must be a Pattern"),
    ("match_non_output", lambda: P.any().match(x.node), "patterns match Outputs, got Node"),
]


@pytest.mark.parametrize(("build", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_pattern_errors(build, message):
    with pytest.raises(PatternError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_pattern_error_is_a_type_error():
    with pytest.raises(TypeError):
        P("Add")
    with pytest.raises(og.OpgraphError):
        P("Add")
