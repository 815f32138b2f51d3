"""Training a model whose 3x3 convolutions have small planes and 64 channels, so that the CPU
runs their filter gradients by Winograd F(3x3, 2x2) (fused/lowering/winograd_filter_gradient.py): the
one-call step and the torch.compile path match eager to 1e-5."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

import opgraph.frontends.torch  # noqa: E402, F401  (registers the "opgraph" backend)
from opgraph.backends.fused.lowering.winograd_filter_gradient import MIN_CHANNELS  # noqa: E402
from opgraph.frontends.torch import compile_train_step  # noqa: E402
from opgraph.runtime.backend import backends  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.skipif("CPU" not in backends(), reason="needs the CPU backend"),
]
LOSS = torch.nn.functional.cross_entropy


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    c = MIN_CHANNELS
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, c, 3, padding=1, bias=False),
        torch.nn.BatchNorm2d(c),
        torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1, bias=False),  # 8x8: Winograd filter gradient
        torch.nn.BatchNorm2d(c),
        torch.nn.ReLU(),
        torch.nn.Conv2d(c, c, 3, padding=1),  # with a bias
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(c, 10),
    )


def _batch():
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 8, 8, generator=generator)
    return x, torch.randint(0, 10, (4,), generator=generator)


def _assert_close(got: dict, want: dict) -> None:
    scale = max(v.abs().max().item() for v in want.values())
    for key, value in want.items():
        torch.testing.assert_close(got[key], value, rtol=1e-5, atol=1e-5 * scale, msg=key)


def _floats(model: torch.nn.Module) -> dict:
    return {k: v for k, v in model.state_dict().items() if v.is_floating_point()}


def test_one_call_step_matches_eager_after_20_steps():
    model = _model()
    reference = copy.deepcopy(model)
    step = compile_train_step(
        model, LOSS, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    )
    eager = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    x, y = _batch()
    for _ in range(20):
        got = step(x, y)
        eager.zero_grad()
        want = LOSS(reference(x), y)
        want.backward()
        eager.step()
        torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
    _assert_close(_floats(model), _floats(reference))


def test_torch_compile_gradients_match_eager():
    model = _model()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="opgraph")
    x, y = _batch()
    LOSS(compiled(x), y).backward()
    LOSS(reference(x), y).backward()
    got = {n: p.grad for n, p in model.named_parameters()}
    want = {n: p.grad for n, p in reference.named_parameters()}
    _assert_close(got, want)
