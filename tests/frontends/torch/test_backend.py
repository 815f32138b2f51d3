"""The "opgraph" torch.compile backend: fallback, recompilation, mutation, grad mode, options."""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_bridge_helpers import assert_close  # noqa: E402
from torch_bridge_models import make  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

import opgraph as og  # noqa: E402
import opgraph.frontends.torch as og_torch  # noqa: E402
from opgraph.frontends.torch import dynamo  # noqa: E402


class WithUnsupported(torch.nn.Module):
    """A Bessel function (no converter) between two supported regions."""

    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.l1(x))
        return self.l2(torch.special.bessel_j0(h) * h).sum(-1) + h.mean(-1)


def _fallback_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, og_torch.FallbackWarning)]


def test_backend_is_registered_by_name():
    assert "opgraph" in torch._dynamo.list_backends()


def test_unsupported_op_runs_eagerly_with_one_warning(counter):
    model, x = WithUnsupported().eval(), torch.randn(5, 8)
    with warnings.catch_warnings(record=True) as record, torch.no_grad():
        warnings.simplefilter("always")
        compiled = torch.compile(model, backend="opgraph")
        got, again = compiled(x), compiled(x)
        want = model(x)
    messages = _fallback_warnings(record)
    assert len(messages) == 1
    assert "aten.special_bessel_j0.default" in messages[0] and "no converter" in messages[0]
    assert counter.calls == 4  # two opgraph partitions around the eager op, two calls
    assert_close(got, want)
    assert_close(again, want)


def test_fallback_eager_runs_the_whole_graph_in_torch(counter):
    model, x = WithUnsupported().eval(), torch.randn(5, 8)
    with pytest.warns(og_torch.FallbackWarning, match="whole graph"), torch.no_grad():
        compiled = torch.compile(model, backend="opgraph", options={"fallback": "eager"})
        got = compiled(x)
    assert counter.calls == 0
    with torch.no_grad():
        assert_close(got, model(x))


def test_fallback_error_raises():
    model, x = WithUnsupported().eval(), torch.randn(5, 8)
    compiled = torch.compile(model, backend="opgraph", options={"fallback": "error"})
    with pytest.raises(Exception, match="special_bessel_j0"), torch.no_grad():
        compiled(x)


def test_new_input_shapes_compile_once_more_symbolically(monkeypatch, counter):
    calls = []
    symbolic = []
    original = dynamo.specialize
    original_symbolic = dynamo.CompiledGraph._symbolic

    def spy(gm, args, *rest):
        inputs = [a for a in args if type(a) is torch.Tensor]  # not the nn.Parameters
        calls.append(tuple(inputs[0].shape))
        return original(gm, args, *rest)

    def spy_symbolic(graph, args):
        symbolic.append(len(args))
        return original_symbolic(graph, args)

    monkeypatch.setattr(dynamo, "specialize", spy)
    monkeypatch.setattr(dynamo.CompiledGraph, "_symbolic", spy_symbolic)
    model, _ = make("mlp")
    compiled = torch.compile(model, backend="opgraph")
    with torch.no_grad():
        for batch in (4, 8, 9, 8, 4):
            x = torch.randn(batch, 16)
            assert_close(compiled(x), model(x))
    # 4: dynamo's static graph, specialised; then dynamo's symbolic graph (which it tries
    # first from now on) is compiled once, symbolically, for 8, 9, 8 and 4
    assert calls == [(4, 16)]
    assert len(symbolic) == 1
    assert counter.calls == 5


def test_static_shapes_with_dynamic_false():
    model, _ = make("cnn")
    compiled = torch.compile(model, backend="opgraph", dynamic=False)
    with torch.no_grad():
        for size in (8, 12):
            x = torch.randn(1, 3, size, size)
            assert_close(compiled(x), model(x))


class Mutates(torch.nn.Module):
    def forward(self, x, total):
        total.add_(x.sum(0))
        x[0] = 0.0
        return x * 2


def test_input_mutations_are_applied(counter):
    x, total = torch.randn(3, 4), torch.ones(4)
    x_ref, total_ref = x.clone(), total.clone()
    with torch.no_grad():
        got = torch.compile(Mutates(), backend="opgraph")(x, total)
        want = Mutates()(x_ref, total_ref)
    assert counter.calls >= 1
    assert_close(got, want)
    assert_close(x, x_ref)
    assert_close(total, total_ref)


def test_grad_mode_trains_through_opgraph(counter):
    model, (x,) = make("mlp")
    reference = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", og_torch.FallbackWarning)
        y = torch.compile(model, backend="opgraph")(x)
        y.sum().backward()
    assert counter.calls == 2  # the forward and the backward graph
    reference(x).sum().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        assert_close(p.grad, q.grad)


def test_inference_mode(counter):
    model, (x,) = make("transformer")
    with torch.inference_mode():
        got = torch.compile(model, backend="opgraph")(x)
        want = model(x)
    assert counter.calls == 1
    assert_close(got, want)


@pytest.mark.parametrize("freeze", [True, False])
def test_weights_updated_in_place_are_seen(freeze, counter):
    model, (x,) = make("mlp")
    compiled = torch.compile(model, backend="opgraph", options={"freeze": freeze})
    with torch.no_grad():
        before = compiled(x)
        model.l3.bias.add_(1.0)
        model.l1.weight.mul_(-1.0)
        after = compiled(x)
        assert_close(after, model(x))
    assert not torch.allclose(before, after)
    assert counter.calls == 2


def test_interpreter_option_and_callable_backend(monkeypatch):
    used = []
    original = og.backend

    def spy(name):
        used.append(name)
        return original(name)

    monkeypatch.setattr(dynamo, "get_backend", spy)
    model, (x,) = make("inplace")
    compiled = torch.compile(model, backend=og_torch.backend, options={"backend": "INTERPRETER"})
    with torch.no_grad():
        assert_close(compiled(x), model(x))
    assert used == ["INTERPRETER"]


def test_graph_breaks_compile_each_piece(counter):
    def f(x):
        y = torch.tanh(x) * 3
        if y.sum() > 0:  # data-dependent branch: a graph break
            return torch.sigmoid(y) + 1
        return torch.relu(y) - 1

    compiled = torch.compile(f, backend="opgraph")
    with torch.no_grad():
        for sign in (1.0, -1.0):
            x = torch.full((3, 4), sign) + torch.randn(3, 4) * 0.1
            assert_close(compiled(x), f(x))
    assert counter.calls == 4


def test_non_contiguous_and_double_inputs(counter):
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.GELU()).double().eval()
    x = torch.randn(6, 4, dtype=torch.float64).t()  # a transposed view
    with torch.no_grad():
        got = torch.compile(model, backend="opgraph")(x)
        want = model(x)
    assert counter.calls == 1
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_unknown_option_is_rejected():
    with pytest.raises(ValueError, match="unknown opgraph backend option"):
        dynamo.BackendOptions.parse({"bakend": "CPU"})
    with pytest.raises(ValueError, match="fallback"):
        dynamo.BackendOptions.parse({"fallback": "sometimes"})


def test_default_backend_prefers_cpu():
    expected = "CPU" if "CPU" in og.backends() else "INTERPRETER"
    assert dynamo.default_backend() == expected


def test_a_partition_that_fails_to_compile_runs_eagerly(monkeypatch, counter):
    from opgraph.frontends.torch import partition

    def broken(*args):
        raise RuntimeError("kernel generator exploded")

    monkeypatch.setattr(partition, "compile_partition", broken)
    model, (x,) = make("mlp")
    message = "RuntimeError: kernel generator exploded"
    with pytest.warns(og_torch.FallbackWarning, match=message), torch.no_grad():
        got = torch.compile(model, backend="opgraph")(x)
    assert counter.calls == 0
    with torch.no_grad():
        assert_close(got, model(x))


def test_python_float_arguments_stay_in_opgraph(counter):
    # dynamo passes unspecialised floats as tensors read with .item() (a SymFloat)
    def f(x, alpha, k):
        return torch.tanh(x) * alpha + k

    compiled = torch.compile(f, backend="opgraph")
    with warnings.catch_warnings(record=True) as record, torch.no_grad():
        warnings.simplefilter("always")
        for x, alpha, k in [
            (torch.randn(3), 0.5, 1),
            (torch.randn(3), 1.5, 2),
            (torch.arange(3), 2.5, 3),
        ]:
            assert_close(compiled(x, alpha, k), f(x, alpha, k))
    assert _fallback_warnings(record) == []
    assert counter.calls == 3
