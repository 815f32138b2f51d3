"""Rules and rewrite: fixed points, composition, callbacks, and every error path."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.pattern import MatchContext, P, PatternError, Rules, rewrite
from opgraph.testing.oracle import evaluate

IDENTITIES = Rules(
    [
        (P(ops.Add, P.var("a"), P.const(0)), lambda a: a),
        (P(ops.Mul, P.var("a"), P.const(1)), lambda a: a),
        (P(ops.Neg, P(ops.Neg, P.var("a"))), lambda a: a),
    ]
)


def op_names(fn):
    return [n.op.name for n in fn.ops]


def test_rewrite_reaches_a_fixed_point_and_keeps_numerics():
    x = og.parameter(og.f32, (2, 3))
    y = ops.negative(ops.negative((x + 0.0) * 1.0))
    fn = og.Function([ops.exp(y), y * 1.0], [x])
    text = str(fn)
    out = rewrite(fn, IDENTITIES)
    assert op_names(out) == ["Exp"]
    assert out.results[1] == x
    assert str(fn) == text  # the input Function is untouched
    arg = np.random.default_rng(0).random((2, 3), np.float32)
    for got, want in zip(evaluate(out, [arg]), evaluate(fn, [arg]), strict=True):
        np.testing.assert_array_equal(got, want)


def test_rewrite_without_a_match_returns_the_same_function():
    x = og.parameter(og.f32, (2,))
    fn = og.Function([ops.exp(x)], [x])
    assert rewrite(fn, IDENTITIES) is fn


def test_unchanged_nodes_are_shared():
    x = og.parameter(og.f32, (2,))
    e = ops.exp(x)
    fn = og.Function([ops.tanh(e) + 0.0], [x])
    out = rewrite(fn, IDENTITIES)
    assert out.results[0].node.inputs[0] is e


def test_rules_compose_in_order():
    first = Rules([(P(ops.Exp, P.var("a")), lambda a: ops.tanh(a))])
    second = Rules([(P(ops.Exp, P.var("a")), lambda a: ops.sigmoid(a))])
    x = og.parameter(og.f32, (2,))
    fn = og.Function([ops.exp(x)], [x])
    assert op_names(rewrite(fn, first + second)) == ["Tanh"]
    assert op_names(rewrite(fn, second + first)) == ["Sigmoid"]
    assert len(first + second) == 2 and [r.name for r in first] == ["<lambda>"]


def test_declined_match_tries_the_other_order_and_the_next_rule():
    seen = []

    def only_when_first_is_exp(a, b):
        seen.append((a.op.name, b.op.name))
        return ops.multiply(a, b) if isinstance(a.op, ops.Exp) else None

    rules = Rules([(P(ops.Add, P.var("a"), P.var("b")), only_when_first_is_exp)])
    x = og.parameter(og.f32, (2,))
    fn = og.Function([ops.add(x, ops.exp(x))], [x])
    out = rewrite(fn, rules)
    assert op_names(out) == ["Exp", "Mul"]
    assert seen == [("Parameter", "Exp"), ("Exp", "Parameter")]


def test_callback_receives_ctx_when_asked():
    contexts = []

    def record(a, e, ctx):
        contexts.append(ctx)

    rules = Rules([(P(ops.Exp, P.var("a"), name="e"), record)])
    x = og.parameter(og.f32, (2,))
    e = ops.exp(x)
    rewrite(og.Function([e], [x]), rules)
    (ctx,) = contexts
    assert isinstance(ctx, MatchContext)
    assert ctx.root == e and ctx.node is e.node and ctx.captures == {"a": x, "e": e}
    assert ctx.rule is rules.rules[0]


def test_callback_with_kwargs_takes_every_capture():
    got = {}
    rules = Rules([(P(ops.Add, P.var("a"), P.var("b")), lambda **kw: got.update(kw))])
    x = og.parameter(og.f32, (2,))
    rewrite(og.Function([ops.add(x, x)], [x]), rules)
    assert got == {"a": x, "b": x}


def test_multi_output_root():
    x = og.parameter(og.f32, (2,))
    first, second = ops.call(og.Function([ops.exp(x), ops.negative(x)], [x]), x)
    rules = Rules([(P(ops.Call, P.var("a"))[1], lambda a: ops.tanh(a))])
    out = rewrite(og.Function([first, second], [x]), rules)
    assert out.results[0] == first
    assert out.results[1].op.name == "Tanh"


def test_parameters_are_never_rewritten():
    rules = Rules([(P.var("v", where=lambda o: o.shape == (2,)), lambda v: ops.negative(v))])
    x = og.parameter(og.f32, (2,))
    with pytest.raises(og.OpgraphError, match="not reached a fixed point"):
        rewrite(og.Function([ops.exp(x)], [x]), rules, max_iterations=3)
    assert rewrite(og.Function([x], [x]), rules).results == (x,)


def test_loop_guard_names_the_rule_and_its_line():
    def rebuild(a):
        return ops.exp(a)  # a new but equal node every time: never a fixed point

    rules = Rules([(P(ops.Exp, P.var("a")), rebuild)])
    x = og.parameter(og.f32, (2,))
    with pytest.raises(og.OpgraphError) as info:
        rewrite(og.Function([ops.exp(x)], [x]), rules, max_iterations=5)
    message = str(info.value)
    assert "after 5 sweeps" in message
    line = rebuild.__code__.co_firstlineno
    assert (
        f"rebuild (pattern at test_rewrite.py:{line + 3}, callback at test_rewrite.py:{line})"
        in message
    )


def test_replacement_of_another_type_is_refused():
    rules = Rules([(P(ops.Exp, P.var("a")), lambda a: ops.convert(a, og.f64))])
    x = og.parameter(og.f32, (2,))
    with pytest.raises(
        PatternError,
        match=r"replaced Exp : f32\[2\] .* with Convert : f64\[2\]; a replacement must have the matched value's type",
    ):
        rewrite(og.Function([ops.exp(x)], [x]), rules)


def test_callback_must_return_an_output():
    rules = Rules([(P(ops.Exp, P.var("a")), lambda a: a.node)])
    x = og.parameter(og.f32, (2,))
    with pytest.raises(PatternError, match="returned Node; a callback returns an Output or None"):
        rewrite(og.Function([ops.exp(x)], [x]), rules)


def test_type_errors_in_callbacks_name_the_rule():
    rules = Rules([(P(ops.Exp, P.var("a")), lambda a: ops.add(a, ops.transpose(a)))])
    x = og.parameter(og.f32, (2, 3))
    with pytest.raises(og.OpTypeError) as info:
        rewrite(og.Function([ops.exp(x)], [x]), rules)
    assert any(
        "while applying rule <lambda> (pattern at test_rewrite.py:" in n
        for n in info.value.__notes__
    )


def _two(a, b):
    return a


RULE_ERRORS = [
    ("not_a_pair", [P.any()], "entry 0 must be a (pattern, callback) pair"),
    ("not_a_pattern", [(ops.Exp, _two)], "entry 0 pattern must be a Pattern, got type"),
    ("not_callable", [(P(ops.Exp), 3)], "callback must be callable, got int"),
    (
        "missing_capture",
        [(P(ops.Add, P.var("a"), P.var("c")), _two)],
        "has no parameter for capture(s) c",
    ),
    (
        "extra_parameter",
        [(P(ops.Exp, P.var("a")), _two)],
        "callback parameter(s) b are not captures of the pattern (captures: a)",
    ),
]


@pytest.mark.parametrize(
    ("entries", "message"), [e[1:] for e in RULE_ERRORS], ids=[e[0] for e in RULE_ERRORS]
)
def test_rules_errors(entries, message):
    with pytest.raises(PatternError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Rules(entries)


@pytest.mark.parametrize(
    ("rules", "kwargs", "message"),
    [
        ([], {}, "rules must be a Rules table, got list"),
        (IDENTITIES, {"max_iterations": 0}, "max_iterations must be a positive int, got 0"),
    ],
)
def test_rewrite_argument_errors(rules, kwargs, message):
    x = og.parameter(og.f32, (2,))
    with pytest.raises(PatternError, match=message):
        rewrite(og.Function([x], [x]), rules, **kwargs)
