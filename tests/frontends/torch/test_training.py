"""Training through torch.compile(backend="opgraph"): gradients and optimizer trajectories
match eager PyTorch (1e-5 relative on f32, 1e-9 on f64)."""

import copy
import warnings

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_train_models import MODELS, make  # noqa: E402

import opgraph.frontends.torch as og_torch  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("error::opgraph.frontends.torch.FallbackWarning"),
]

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-9}
OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1),
}


def _loss(model, x, y):
    return torch.nn.functional.cross_entropy(model(x), y)


def _assert_close_to_scale(got, want, tol, what):
    """Equal within ``tol`` relative, with an absolute floor of ``tol`` times the largest
    magnitude of ``want``'s family (a gradient that is zero in exact arithmetic is rounding
    noise in both runs)."""
    scale = max(w.abs().max().item() for w in want.values())
    for name, w in want.items():
        torch.testing.assert_close(
            got[name], w, rtol=tol, atol=tol * scale, msg=lambda m, n=name: f"{what} {n}: {m}"
        )


def _grads(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def _state(model):
    return {n: t.detach().clone() for n, t in model.state_dict().items() if t.is_floating_point()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_gradients_after_one_step_match_eager(name, dtype, counter):
    if dtype == torch.float64 and name in ("transformer", "lstm"):
        pytest.skip("f64 is checked on the mlp, cnn and inplace models (keeps the test short)")
    model, x, y = make(name, dtype)
    reference = copy.deepcopy(model)
    loss = _loss(torch.compile(model, backend="opgraph"), x, y)
    loss.backward()
    want = _loss(reference, x, y)
    want.backward()
    assert counter.calls >= 2  # forward and backward ran in opgraph
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(loss, want, rtol=tol, atol=tol)
    _assert_close_to_scale(_grads(model), _grads(reference), tol, "gradient of")
    _assert_close_to_scale(_state(model), _state(reference), tol, "buffer")


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_parameters_after_twenty_steps_match_eager(name, optimizer):
    model, x, y = make(name)
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="opgraph")
    for net, run in ((model, compiled), (reference, reference)):
        step = OPTIMIZERS[optimizer](net.parameters())
        for _ in range(20):
            step.zero_grad()
            _loss(run, x, y).backward()
            step.step()
    _assert_close_to_scale(_state(model), _state(reference), 1e-5, "parameter")


def test_no_grad_inference_keeps_the_export_path(counter):
    model, x, _ = make("mlp")
    model.eval()
    compiled = torch.compile(model, backend="opgraph")
    with torch.no_grad():
        got = compiled(x)
    assert counter.calls == 1
    assert not got.requires_grad
    torch.testing.assert_close(got, model(x).detach(), rtol=1e-5, atol=1e-6)


def test_new_batch_sizes_in_training_compile_again(counter):
    model, x, y = make("mlp")
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="opgraph")
    for rows in (16, 5, 9):  # the second shape makes dynamo hand over a symbolic graph
        for net, run in ((model, compiled), (reference, reference)):
            net.zero_grad()
            _loss(run, x[:rows], y[:rows]).backward()
        _assert_close_to_scale(_grads(model), _grads(reference), 1e-5, f"rows={rows}: grad")
    assert counter.calls >= 6


def test_training_mode_dropout_runs_in_torch_with_its_generator():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 32), torch.nn.Dropout(0.5), torch.nn.Linear(32, 2)
    )
    reference = copy.deepcopy(model)
    x = torch.randn(16, 8)
    compiled = torch.compile(model, backend="opgraph")
    with pytest.warns(og_torch.FallbackWarning, match="native_dropout"):
        compiled(x)  # compile first: tracing may draw random numbers
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        torch.manual_seed(1)
        got = compiled(x)
    torch.manual_seed(1)
    want = reference(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert record == []  # the warning came once, at compilation


def test_dropout_fallback_is_named_in_one_warning():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    with pytest.warns(og_torch.FallbackWarning, match="native_dropout") as record:
        torch.compile(model, backend="opgraph")(torch.randn(4, 8)).sum().backward()
    assert len([w for w in record if issubclass(w.category, og_torch.FallbackWarning)]) == 1


def test_fallback_error_raises_in_training():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    compiled = torch.compile(model, backend="opgraph", options={"fallback": "error"})
    with pytest.raises(Exception, match="native_dropout"):
        compiled(torch.randn(4, 8))
