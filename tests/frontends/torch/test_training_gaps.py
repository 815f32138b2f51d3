"""Training through torch.compile(backend="opgraph") beyond first-order gradients of feed-forward
models: double backward (create_graph=True) and ``nn.LSTM`` modules."""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_train_models import make  # noqa: E402

import opgraph.frontends.torch as og_torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9}


def _close_to_scale(got, want, tol, what):
    scale = max(w.abs().max().item() for w in want.values())
    assert got.keys() == want.keys(), what
    for name, w in want.items():
        torch.testing.assert_close(
            got[name], w, rtol=tol, atol=tol * scale, msg=lambda m, n=name: f"{what} {n}: {m}"
        )


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _gradient_penalty(run, x):
    """A WGAN-GP-style loss: the squared norm of d(sum of outputs)/d(input), differentiated
    again with respect to the parameters."""
    x = x.detach().requires_grad_(True)
    out = run(x)
    (dx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    penalty = dx.square().sum() + out.square().mean()
    penalty.backward()
    return dx.detach(), penalty.detach()


# ---------------------------------------------------------------------------- double backward
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_double_backward_matches_eager_with_one_warning(dtype):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.GELU(),
        torch.nn.Linear(16, 2),
    ).to(dtype)  # fmt: skip
    reference = copy.deepcopy(model)
    x = torch.randn(5, 6, dtype=dtype)
    compiled = torch.compile(model, backend="opgraph")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dx, penalty = _gradient_penalty(compiled, x)
        _gradient_penalty(compiled, x)  # a second time: no second warning
    want_dx, want_penalty = _gradient_penalty(reference, x)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(dx, want_dx, rtol=tol, atol=tol)
    torch.testing.assert_close(penalty, want_penalty, rtol=tol, atol=tol)
    model.zero_grad()
    reference.zero_grad()
    _gradient_penalty(compiled, x)
    _gradient_penalty(reference, x)
    _close_to_scale(_grads(model), _grads(reference), tol, "second-order gradient of")
    fallbacks = [w for w in caught if issubclass(w.category, og_torch.FallbackWarning)]
    assert len(fallbacks) == 1
    assert "double backward" in str(fallbacks[0].message)


def test_double_backward_updates_batch_norm_statistics_once():
    """The eager recomputation runs on copies of the buffers: running statistics advance by
    one step per forward, as in eager."""
    model, x, _ = make("cnn")
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="opgraph")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", og_torch.FallbackWarning)
        _gradient_penalty(compiled, x)
    _gradient_penalty(reference, x)
    _close_to_scale(_grads(model), _grads(reference), 1e-5, "second-order gradient of")
    for name, buffer in reference.named_buffers():
        torch.testing.assert_close(dict(model.named_buffers())[name], buffer, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("error::opgraph.frontends.torch.FallbackWarning")
def test_first_order_training_runs_compiled_without_a_warning(counter):
    model, x, y = make("mlp")
    reference = copy.deepcopy(model)
    loss = torch.nn.functional.cross_entropy(torch.compile(model, backend="opgraph")(x), y)
    loss.backward()
    torch.nn.functional.cross_entropy(reference(x), y).backward()
    assert counter.calls >= 2  # forward and backward ran in opgraph
    _close_to_scale(_grads(model), _grads(reference), 1e-5, "gradient of")


# ------------------------------------------------------------------------------------ nn.LSTM
class _Recurrent(torch.nn.Module):
    def __init__(self, **options) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 10, **options)
        hidden = 10 * (2 if options.get("bidirectional") else 1)
        self.head = torch.nn.Linear(hidden, 3)
        self.batch_first = options.get("batch_first", False)

    def forward(self, x, state=None):
        out, (h, c) = self.lstm(x, state)
        last = out[:, -1] if self.batch_first else out[-1]
        return self.head(last) + h.sum(0).mean() + c.sum(0).mean()


LSTM_OPTIONS = {
    "one-layer": {"batch_first": True},
    "two-layers": {"num_layers": 2},
    "bidirectional": {"bidirectional": True, "batch_first": True},
    "no-bias": {"bias": False},
}


@pytest.fixture
def _rnn_in_dynamo():
    """dynamo runs RNN modules eagerly unless told otherwise."""
    previous = torch._dynamo.config.allow_rnn
    torch._dynamo.config.allow_rnn = True
    yield
    torch._dynamo.config.allow_rnn = previous


@pytest.mark.usefixtures("_rnn_in_dynamo")
@pytest.mark.filterwarnings("error::opgraph.frontends.torch.FallbackWarning")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(LSTM_OPTIONS))
def test_lstm_gradients_match_eager(name, dtype, counter):
    if dtype == torch.float64 and name != "two-layers":
        pytest.skip("f64 is checked on the two-layer LSTM (keeps the test short)")
    torch.manual_seed(0)
    model = _Recurrent(**LSTM_OPTIONS[name]).to(dtype).train()
    reference = copy.deepcopy(model)
    shape = (4, 7, 6) if LSTM_OPTIONS[name].get("batch_first") else (7, 4, 6)
    x, y = torch.randn(*shape, dtype=dtype), torch.randint(0, 3, (4,))
    loss = torch.nn.functional.cross_entropy(torch.compile(model, backend="opgraph")(x), y)
    loss.backward()
    want = torch.nn.functional.cross_entropy(reference(x), y)
    want.backward()
    assert counter.calls >= 2  # forward and backward ran in opgraph
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(loss, want, rtol=tol, atol=tol)
    _close_to_scale(_grads(model), _grads(reference), tol, "gradient of")


@pytest.mark.usefixtures("_rnn_in_dynamo")
@pytest.mark.filterwarnings("error::opgraph.frontends.torch.FallbackWarning")
def test_lstm_with_a_given_state_and_input_gradient_trains_like_eager():
    torch.manual_seed(1)
    model = _Recurrent(num_layers=2).train()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="opgraph")
    x, y = torch.randn(5, 3, 6), torch.randint(0, 3, (3,))
    state = (torch.randn(2, 3, 10), torch.randn(2, 3, 10))
    for net, run in ((model, compiled), (reference, reference)):
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-2)
        for _ in range(20):
            optimizer.zero_grad()
            inputs = x.clone().requires_grad_(True)
            torch.nn.functional.cross_entropy(run(inputs, state), y).backward()
            optimizer.step()
    got = {n: p.detach() for n, p in model.named_parameters()}
    want = {n: p.detach() for n, p in reference.named_parameters()}
    _close_to_scale(got, want, 1e-5, "parameter")


@pytest.mark.filterwarnings("ignore:The tensor attributes:UserWarning")  # torch.export on RNNs
def test_lstm_in_one_call_steps_like_eager():
    torch.manual_seed(2)
    model = _Recurrent(num_layers=2, batch_first=True).train()
    reference = copy.deepcopy(model)
    x, y = torch.randn(3, 6, 6), torch.randint(0, 3, (3,))
    loss_fn = torch.nn.functional.cross_entropy
    step = og_torch.compile_train_step(
        model, loss_fn, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    )
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for _ in range(20):
        step(x, y)
        optimizer.zero_grad()
        loss_fn(reference(x), y).backward()
        optimizer.step()
    got = {n: p.detach() for n, p in model.named_parameters()}
    want = {n: p.detach() for n, p in reference.named_parameters()}
    _close_to_scale(got, want, 1e-5, "parameter")
