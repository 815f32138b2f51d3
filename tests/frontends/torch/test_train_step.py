"""compile_train_step: forward, backward and the optimizer update in one opgraph call,
matching torch's eager step after 20 steps."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_train_models import MODELS, make  # noqa: E402

from opgraph.core.errors import ConversionError  # noqa: E402
from opgraph.frontends.torch import compile_train_step  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True),
    "dampening": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.5),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=1e-2),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
}
LOSS = torch.nn.functional.cross_entropy


def _run_both(name, optimizer, steps=20, dtype=torch.float32):
    model, x, y = make(name, dtype)
    reference = copy.deepcopy(model)
    step = compile_train_step(model, LOSS, OPTIMIZERS[optimizer](model.parameters()))
    eager = OPTIMIZERS[optimizer](reference.parameters())
    losses = []
    for _ in range(steps):
        got = step(x, y)
        eager.zero_grad()
        want = LOSS(reference(x), y)
        want.backward()
        eager.step()
        losses.append((got, want.detach()))
    return model, reference, losses, eager, step


def _assert_states_close(model, reference, tol):
    want = {k: v for k, v in reference.state_dict().items() if v.is_floating_point()}
    got = model.state_dict()
    scale = max(v.abs().max().item() for v in want.values())
    for key, value in want.items():
        torch.testing.assert_close(got[key], value, rtol=tol, atol=tol * scale, msg=key)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_twenty_steps_match_eager(name, optimizer):
    if optimizer in ("nesterov", "dampening", "adam") and name not in ("mlp", "cnn"):
        pytest.skip("optimizer variants are checked on the mlp and cnn (keeps the test short)")
    model, reference, losses, _, _ = _run_both(name, optimizer)
    for got, want in losses:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    _assert_states_close(model, reference, 1e-5)


def test_f64_matches_to_1e_9():
    model, reference, _, _, _ = _run_both("cnn", "adamw", steps=5, dtype=torch.float64)
    _assert_states_close(model, reference, 1e-9)


def test_parameters_keep_identity_and_the_optimizer_state_is_torchs():
    model, reference, _, eager, step = _run_both("mlp", "adamw", steps=3)
    parameters = list(model.parameters())
    step(*make("mlp")[1:])
    assert [id(p) for p in model.parameters()] == [id(p) for p in parameters]
    for p in parameters:
        state = step.optimizer.state[p]
        assert int(state["step"]) == 4 and state["exp_avg"].shape == p.shape
    # the eager optimizer can take over from the compiled step's state
    step.optimizer.zero_grad()
    LOSS(model(make("mlp")[1]), make("mlp")[2]).backward()
    step.optimizer.step()


def test_learning_rate_changes_are_seen():
    model, x, y = make("mlp")
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    eager = torch.optim.SGD(reference.parameters(), lr=0.1)
    step = compile_train_step(model, LOSS, optimizer)
    for lr in (0.1, 0.01, 0.5):
        for opt in (optimizer, eager):
            opt.param_groups[0]["lr"] = lr
        step(x, y)
        eager.zero_grad()
        LOSS(reference(x), y).backward()
        eager.step()
    _assert_states_close(model, reference, 1e-5)


def test_unsupported_optimizer_and_dropout_are_refused():
    model, x, y = make("mlp")
    with pytest.raises(ConversionError, match="supports torch.optim.SGD"):
        compile_train_step(model, LOSS, torch.optim.RMSprop(model.parameters()))
    with pytest.raises(ConversionError, match="amsgrad"):
        compile_train_step(model, LOSS, torch.optim.Adam(model.parameters(), amsgrad=True))
    dropout = torch.nn.Sequential(torch.nn.Linear(12, 4), torch.nn.Dropout(0.5))
    step = compile_train_step(dropout, LOSS, torch.optim.SGD(dropout.parameters(), lr=0.1))
    with pytest.raises(ConversionError, match="native_dropout"):
        step(x, y)
