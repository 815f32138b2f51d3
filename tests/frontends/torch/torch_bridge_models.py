"""Small models for the PyTorch bridge tests, each with example inputs."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.l2(torch.relu(self.l1(x))))
        return torch.softmax(self.l3(h), dim=-1)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = (
            nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(16),
        )
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(torch.relu(self.bn1(self.conv1(x))))
        y = torch.relu(self.bn2(self.conv2(y)))
        return self.head(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


class InPlaceViews(nn.Module):
    """In-place updates through views, slicing, transposes, splits and expands."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.clone()
        y.mul_(2)
        y[:, 0] += 1
        y[1:3, 1:].clamp_(min=-0.5)
        z = y.view(-1, 4).t()
        z.relu_()
        a, b = z.split(2, 0)
        joined = torch.cat([a * b, x.transpose(0, 1).reshape(4, -1)[:2]], 1)
        return joined, y.unsqueeze(0).expand(2, -1, -1).sum(0)


def _stats(module: nn.Module) -> nn.Module:
    """Give batch-norm layers non-trivial running statistics."""
    generator = torch.Generator().manual_seed(1)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=generator) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=generator) + 0.5)
    return module


def _models() -> dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]]:
    def mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        return MLP(), (torch.randn(4, 16),)

    def cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        return _stats(SmallCNN()), (torch.randn(2, 3, 8, 8),)

    def transformer() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        return layer, (torch.randn(2, 5, 32),)

    def lstm() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        return nn.LSTM(8, 16, num_layers=1, batch_first=True), (torch.randn(2, 3, 8),)

    def inplace() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        return InPlaceViews(), (torch.randn(4, 4),)

    return {"mlp": mlp, "cnn": cnn, "transformer": transformer, "lstm": lstm, "inplace": inplace}


MODELS = _models()


def make(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A fresh, seeded model in evaluation mode and its example inputs."""
    torch.manual_seed(0)
    model, args = MODELS[name]()
    return model.eval(), args


@functools.cache
def exported(name: str, grad: bool = True) -> tuple[torch.export.ExportedProgram, nn.Module, tuple]:
    """``make(name)`` exported and decomposed to core ATen (cached: exporting is slow).

    With ``grad`` off, PyTorch's fused inference fast paths are taken (as torch.compile
    under ``torch.no_grad()`` sees them).
    """
    model, args = make(name)
    with torch.set_grad_enabled(grad), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own pytree deprecation
        program = torch.export.export(model, args).run_decompositions()
    return program, model, args
