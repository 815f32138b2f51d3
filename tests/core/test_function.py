import pytest

import opgraph as og
from opgraph import ops


def seed():
    a, b, c = (og.parameter(og.f32, (32, 32), name=n) for n in "abc")
    return og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c], name="f"), (a, b, c)


def test_printing_format():
    f, _ = seed()
    assert str(f).splitlines() == [
        "function f(%0: f32[32,32], %1: f32[32,32], %2: f32[32,32]) -> (f32[32,32])",
        '  %0 = Parameter "a" : f32[32,32]',
        '  %1 = Parameter "b" : f32[32,32]',
        '  %2 = Parameter "c" : f32[32,32]',
        "  %3 = Add(%0, %1) : f32[32,32]",
        "  %4 = Mul(%3, %2) : f32[32,32]",
        "  return %4",
    ]


def test_printing_is_local_and_stable():
    f, _ = seed()
    g, _ = seed()  # built later: different global ids, same text
    assert str(f) == str(g) == str(f.clone())


def test_printing_attributes_and_multi_output():
    x = og.parameter(og.f32, (2, 3))
    y = ops.transpose(x, (1, 0))
    t = ops.tuple_(y, x)
    fn = og.Function([ops.get_tuple_element(t, 0)], [x], name="t")
    text = str(fn)
    assert "%1 = Transpose[perm=(1, 0)](%0) : f32[3,2]" in text
    assert "Tuple(%1, %0) : (f32[3,2], f32[2,3])" in text


def test_topological_order_is_deterministic_and_valid():
    f, _ = seed()
    positions = {n: i for i, n in enumerate(f.nodes)}
    for node in f.nodes:
        for i in node.inputs:
            assert positions[i.node] < positions[node]
    assert [n.op.name for n in f.nodes] == ["Parameter"] * 3 + ["Add", "Mul"]


def test_shared_subexpression_appears_once():
    x = og.parameter(og.f32, (2,))
    e = ops.exp(x)
    fn = og.Function([ops.add(e, e), e], [x])
    assert sum(1 for n in fn.nodes if n.op.name == "Exp") == 1


def test_rejects_duplicate_parameter():
    a = og.parameter(og.f32, (2,), name="a")
    with pytest.raises(
        og.GraphError, match="parameter 'a' f32.2. .* is listed twice .positions 0 and 1."
    ):
        og.Function([ops.exp(a)], [a, a])


def test_rejects_undeclared_parameter():
    a = og.parameter(og.f32, (2,), name="a")
    b = og.parameter(og.f32, (2,), name="hidden")
    with pytest.raises(og.GraphError, match="not in the parameter list: 'hidden'"):
        og.Function([ops.add(a, b)], [a])


def test_rejects_non_parameter_and_non_output():
    a = og.parameter(og.f32, (2,))
    with pytest.raises(og.GraphError, match="parameter 0 is Exp"):
        og.Function([a], [ops.exp(a)])
    with pytest.raises(og.GraphError, match="result 0 must be an Output, got int"):
        og.Function([3], [a])
    with pytest.raises(og.GraphError, match="got a Node"):
        og.Function(ops.exp(a).node, [a])


def test_unused_parameter_is_allowed():
    a = og.parameter(og.f32, (2,))
    unused = og.parameter(og.i8, (5,))
    fn = og.Function([ops.exp(a)], [a, unused])
    assert fn.parameter_types == (og.TensorType(og.f32, (2,)), og.TensorType(og.i8, (5,)))


def test_clone_is_a_deep_copy():
    f, params = seed()
    g = f.clone(name="g")
    assert g.name == "g"
    assert not set(g.nodes) & set(f.nodes)
    assert [n.name for n in g.nodes[:3]] == ["a", "b", "c"]
    assert [n.provenance for n in g.nodes] == [n.provenance for n in f.nodes]


def test_function_is_immutable():
    f, _ = seed()
    with pytest.raises(AttributeError):
        f.name = "g"


def test_single_output_form_and_tuple_results():
    a = og.parameter(og.f32, (2,))
    fn = og.Function(ops.exp(a), [a])
    assert len(fn.results) == 1
    t = og.Function([ops.tuple_(a, ops.tuple_(a, ops.exp(a)))], [a])
    assert [str(x) for x in t.flat_result_types] == ["f32[2]"] * 3
