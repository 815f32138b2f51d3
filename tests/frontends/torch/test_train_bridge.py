"""The double-backward bridge's first-order backward (autograd.py, ``_Bridge``): the island's one
backward node called directly when the island is simple, ``torch.autograd.grad`` otherwise;
both give the same gradients."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

import opgraph.frontends.torch as og_torch  # noqa: E402
from opgraph.core.errors import GraphError  # noqa: E402
from opgraph.frontends.torch import autograd  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class _TwoHeads(torch.nn.Module):
    """Two outputs: a loss on one of them leaves the other without a cotangent."""

    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.left = torch.nn.Linear(8, 3)
        self.right = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(self.body(x))
        return self.left(h), self.right(h)


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
        torch.nn.Linear(16, 3),
    )  # fmt: skip


def _spy(monkeypatch: pytest.MonkeyPatch, disable: bool = False) -> list[bool]:
    """Records, per bridge backward that reaches it, whether the direct node call ran
    (``disable``: it never does, as if every island needed ``autograd.grad``)."""
    taken: list[bool] = []
    real = autograd._through_node

    def spy(pairs, aliases):  # type: ignore[no-untyped-def]
        found = None if disable else real(pairs, aliases)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(autograd, "_through_node", spy)
    return taken


def _step_grads(model: torch.nn.Module, x: torch.Tensor, loss) -> dict[str, torch.Tensor]:  # type: ignore[no-untyped-def]
    compiled = torch.compile(model, backend="opgraph")
    loss(compiled(x)).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def test_a_simple_island_calls_its_node_and_matches_autograd_grad(monkeypatch):
    torch.manual_seed(0)
    model, x = _mlp(), torch.randn(5, 6, requires_grad=True)
    other = copy.deepcopy(model)
    x_other = x.detach().clone().requires_grad_(True)
    taken = _spy(monkeypatch)
    got = _step_grads(model, x, lambda out: out.square().mean())
    assert taken == [True]
    torch._dynamo.reset()
    taken_other = _spy(monkeypatch, disable=True)
    want = _step_grads(other, x_other, lambda out: out.square().mean())
    assert taken_other == [False]
    assert got.keys() == want.keys() and len(got) == 6
    for name, grad in want.items():
        assert torch.equal(got[name], grad), name  # the same compiled backward ran
    assert x.grad is not None and torch.equal(x.grad, x_other.grad)
    reference = copy.deepcopy(other)
    for p in reference.parameters():
        p.grad = None
    reference(x.detach()).square().mean().backward()
    for name, p in reference.named_parameters():
        torch.testing.assert_close(got[name], p.grad, rtol=1e-5, atol=1e-6)


def test_an_output_without_a_cotangent_takes_autograd_grad_and_is_right(monkeypatch):
    torch.manual_seed(0)
    model, x = _TwoHeads(), torch.randn(4, 6)
    reference = copy.deepcopy(model)
    taken = _spy(monkeypatch)
    got = _step_grads(model, x, lambda out: out[0].square().sum())
    assert taken == [False]  # the node has two outputs, one cotangent: the engine's zeros
    reference(x)[0].square().sum().backward()
    for name, p in reference.named_parameters():
        if p.grad is None:
            assert name not in got or not got[name].any(), name
            continue
        torch.testing.assert_close(got[name], p.grad, rtol=1e-5, atol=1e-6)


def test_double_backward_still_recomputes_eagerly(monkeypatch):
    torch.manual_seed(0)
    model = _mlp()
    reference = copy.deepcopy(model)
    taken = _spy(monkeypatch)
    x = torch.randn(5, 6, requires_grad=True)
    compiled = torch.compile(model, backend="opgraph")
    with pytest.warns(og_torch.FallbackWarning, match="double backward"):
        (dx,) = torch.autograd.grad(compiled(x).sum(), x, create_graph=True)
    assert taken == []  # grad mode on: the eager recompute, not the node
    (want,) = torch.autograd.grad(reference(x).sum(), x, create_graph=True)
    torch.testing.assert_close(dx, want, rtol=1e-5, atol=1e-6)
    assert dx.requires_grad


def test_a_symbolic_size_input_takes_autograd_grad_and_is_right(monkeypatch):
    """``dynamic=True``: the batch size is an input of the island's node with no edge."""
    torch.manual_seed(0)
    model, x = _mlp(), torch.randn(7, 6)
    reference = copy.deepcopy(model)
    taken = _spy(monkeypatch)
    compiled = torch.compile(model, backend="opgraph", dynamic=True)
    compiled(x).square().mean().backward()
    assert taken == [False]
    reference(x).square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("direct", [True, False], ids=["node", "autograd-grad"])
def test_a_second_backward_is_a_clear_error(monkeypatch, direct):
    """The first backward frees the island (its saved activations), on either path."""
    _spy(monkeypatch, disable=not direct)
    model = _mlp()
    loss = torch.compile(model, backend="opgraph")(torch.randn(5, 6)).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(GraphError, match="a second time"):
        loss.backward()
