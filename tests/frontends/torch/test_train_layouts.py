"""Views at partition boundaries (``frontends/torch/layouts.py``): partition outputs that are
views run as torch views, and inputs laid out as a permutation of a dense layout are passed
without a copy; results stay right whatever layout a call brings, and results of one step are
not overwritten by the next."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import opgraph as og  # noqa: E402
from opgraph.frontends.torch.layouts import dense_order, inverse  # noqa: E402
from opgraph.frontends.torch.partition import compile_graph  # noqa: E402
from opgraph.frontends.torch.runtime import ExecutableModule  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.ReLU(),
        torch.nn.Linear(16, 4),
    )  # fmt: skip


def test_dense_order_of_layouts():
    base = torch.empty(3, 4, 5)
    assert dense_order(base) is None  # contiguous
    assert dense_order(base.permute(2, 0, 1)) == (1, 2, 0)
    assert base.permute(2, 0, 1).permute(1, 2, 0).is_contiguous()
    assert dense_order(base[:, :, ::2]) is None  # not dense
    assert dense_order(torch.empty(4, 1).t()) is None  # a unit axis: already contiguous
    assert inverse((1, 2, 0)) == (2, 0, 1)


def _modules(graph_module):
    return [m for m in graph_module.modules() if isinstance(m, ExecutableModule)]


@pytest.mark.parametrize("transposed_call", [True, False], ids=["traced-layout", "other-layout"])
def test_a_transposed_input_is_passed_permuted_and_any_layout_is_right(transposed_call):
    """A graph traced with ``w.t()`` as input takes the weight's own layout (no copy); called
    with a contiguous tensor of the same values instead, it still computes the same."""
    torch.manual_seed(1)
    w, x = torch.randn(6, 5), torch.randn(3, 5)

    def f(wt, a):
        return torch.ops.aten.relu.default(torch.ops.aten.mm.default(a, wt))

    traced = make_fx(f, tracing_mode="fake")(w.t(), x)
    run = compile_graph(traced, {}, og.backend("CPU"), "error", lambda m: None)
    (module,) = _modules(run)
    assert module.orders is not None and (1, 0) in module.orders
    wt = w.t() if transposed_call else w.t().contiguous()
    torch.testing.assert_close(run(wt, x), torch.relu(x @ w.t()), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("transposed_call", [True, False], ids=["traced-layout", "other-layout"])
def test_a_permuted_input_in_its_traced_layout_takes_the_direct_call(transposed_call):
    """The traced layout (``w.t()``) runs on the tensor's address, checked by its strides
    (no permuted view, no opgraph Tensor); another layout of the same shape (contiguous, or
    not dense) takes the general path, which permutes and copies, and is still right."""
    torch.manual_seed(2)
    w, x = torch.randn(7, 5), torch.randn(4, 5)

    def f(wt, a):
        return torch.ops.aten.mm.default(a, wt)

    traced = make_fx(f, tracing_mode="fake")(w.t(), x)
    run = compile_graph(traced, {}, og.backend("CPU"), "error", lambda m: None)
    (module,) = _modules(run)
    general = []
    call = module.executable.call
    module.executable.call = lambda *a: (general.append(1), call(*a))[1]
    wt = w.t() if transposed_call else w.t().contiguous()
    torch.testing.assert_close(run(wt, x), x @ w.t(), rtol=1e-6, atol=1e-6)
    assert len(general) == (0 if transposed_call else 1)
    strided = torch.randn(7, 10)[:, ::2].t()  # the traced shape, not a dense layout
    torch.testing.assert_close(run(strided, x), x @ strided, rtol=1e-6, atol=1e-6)
    assert len(general) == (1 if transposed_call else 2)


def test_view_outputs_are_views_and_gradients_match():
    """The training forward returns the transposed weights and aliases it saves for the
    backward as torch views (the weight's storage), not copies; gradients equal eager's."""
    model = _mlp()
    reference = copy.deepcopy(model)
    captured = []
    original = ExecutableModule.forward

    def spy(self, *args):
        out = original(self, *args)
        captured.append(out)
        return out

    x, y = torch.randn(8, 12), torch.randint(0, 4, (8,))
    ExecutableModule.forward = spy
    try:
        loss = torch.nn.functional.cross_entropy(torch.compile(model, backend="opgraph")(x), y)
    finally:
        ExecutableModule.forward = original
    outs = captured[0] if isinstance(captured[0], tuple) else (captured[0],)
    weights = {p.data_ptr() for p in model.parameters()}
    assert not any(o.data_ptr() in weights for o in outs)  # written by opgraph: fresh memory
    assert len(outs) == 3  # the activations and the logits' softmax input, no copies
    loss.backward()
    torch.nn.functional.cross_entropy(reference(x), y).backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_an_output_that_views_an_input_or_repeats_an_output_is_right():
    """Inference: a graph returning a view of its input and the same value twice."""
    torch.manual_seed(2)
    x = torch.randn(4, 6)

    def f(a):
        r = torch.ops.aten.relu.default(a)
        return (r, torch.ops.aten.alias.default(r), torch.ops.aten.permute.default(a, [1, 0]),
                torch.ops.aten.view.default(r, [24]))  # fmt: skip

    traced = make_fx(f, tracing_mode="fake")(x)
    got = compile_graph(traced, {}, og.backend("CPU"), "error", lambda m: None)(x)
    want = f(x)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    assert got[2].data_ptr() == x.data_ptr()  # the input's view, as eager
    assert got[1].data_ptr() == got[0].data_ptr() == got[3].data_ptr()


def test_results_of_a_step_are_not_overwritten_by_the_next():
    """The loss of step k and the model's outputs kept by the user keep their values after
    step k+1, on the torch.compile path and the one-call step."""
    from opgraph.frontends.torch import compile_train_step

    x, y = torch.randn(8, 12), torch.randint(0, 4, (8,))
    model = _mlp()
    compiled = torch.compile(model, backend="opgraph")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    kept = []
    for _ in range(2):
        optimizer.zero_grad()
        out = compiled(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        kept.append((loss, out, loss.detach().clone(), out.detach().clone()))
    for loss, out, loss_copy, out_copy in kept:
        assert torch.equal(loss.detach(), loss_copy) and torch.equal(out.detach(), out_copy)
    assert not torch.equal(kept[0][2], kept[1][2])
    step_model = _mlp()
    step = compile_train_step(
        step_model,
        torch.nn.functional.cross_entropy,
        torch.optim.SGD(step_model.parameters(), lr=0.5),
    )
    losses = [step(x, y) for _ in range(3)]
    copies = [loss.clone() for loss in losses]
    step(x, y)
    assert all(torch.equal(a, b) for a, b in zip(losses, copies, strict=True))
    assert len({float(v) for v in copies}) == 3


def _stepped(backend, steps=3):
    from opgraph.frontends.torch import compile_train_step

    torch.manual_seed(3)
    x, y = torch.randn(8, 12), torch.randint(0, 4, (8,))
    model = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    step = compile_train_step(model, torch.nn.functional.cross_entropy, optimizer, backend=backend)
    for _ in range(steps):
        step(x, y)
    return model, step, (x, y)


def test_the_step_on_addresses_matches_the_validated_path():
    """CPU runs the step on tensor addresses (``call_addresses``); INTERPRETER has none and
    takes ``Executable.call``: the parameters agree after three SGD-momentum steps."""
    cpu, _, _ = _stepped("CPU")
    interpreter, _, _ = _stepped("INTERPRETER")
    for (name, p), q in zip(cpu.named_parameters(), interpreter.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_a_weight_replaced_by_a_wrong_shape_is_a_clear_error():
    """The address path checks shapes itself and leaves a mismatch to ``Executable.call``,
    whose validation names it (never a write past a buffer)."""
    model, step, (x, y) = _stepped("CPU", steps=1)
    model[0].weight.data = torch.randn(16, 13)
    with pytest.raises(og.OpgraphError, match="shape"):
        step(x, y)


def test_a_view_valid_only_in_the_traced_layout_is_replayed_as_reshape():
    """``view(permute(relu(a)), [24])`` with ``a`` traced transposed: a view there, but the
    partition's result is contiguous, where that ``view`` would fail; the replay reshapes."""
    a = torch.randn(6, 4).t()

    def f(x):
        r = torch.ops.aten.relu.default(x)
        flat = torch.ops.aten.view.default(torch.ops.aten.permute.default(r, [1, 0]), [24])
        return r, flat

    traced = make_fx(f, tracing_mode="fake")(a)
    got = compile_graph(traced, {}, og.backend("CPU"), "error", lambda m: None)(a)
    for g, w in zip(got, f(a), strict=True):
        torch.testing.assert_close(g, w)
