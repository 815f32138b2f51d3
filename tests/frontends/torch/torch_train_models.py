"""Small trainable models for the training tests: name → (model, input batch, target batch)."""

from __future__ import annotations

from collections.abc import Callable

import torch


class CNN(torch.nn.Module):
    """Convolution, BatchNorm (training mode: batch statistics, running-stat updates), ReLU,
    max pooling, average pooling and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)  # BN follows
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        h = torch.nn.functional.avg_pool2d(torch.tanh(self.conv2(h)), 2)
        return self.head(h.flatten(1))


class LSTM(torch.nn.Module):
    """An LSTM unrolled over time from ``nn.LSTMCell`` (dynamo compiles it; ``nn.LSTM``
    itself dynamo runs eagerly, see docs/torch.md)."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = torch.nn.LSTMCell(6, 12)
        self.head = torch.nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.new_zeros(x.shape[0], 12)
        c = x.new_zeros(x.shape[0], 12)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return self.head(h)


class InPlace(torch.nn.Module):
    """In-place ops on activations and on views of them (functionalized by AOTAutograd)."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(10, 16), torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.l1(x)
        h.add_(0.5)
        h[:, :4].mul_(2.0)  # in place through a view
        h.relu_()
        h = h.view(-1, 4, 4).transpose(1, 2).reshape(-1, 16)
        h.add_(1.0)
        return self.l2(h).sigmoid()


class Transformer(torch.nn.Module):
    """One post-norm encoder layer without biases (a key bias has a mathematically zero
    gradient, which Adam would turn into noise-driven steps in both eager and compiled
    runs), mean-pooled to a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(
            16, 2, 32, dropout=0.0, batch_first=True, bias=False
        )
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layer(x).mean(1))


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.GELU(),
        torch.nn.Linear(32, 4),
    )  # fmt: skip


Batch = tuple[torch.nn.Module, torch.Tensor, torch.Tensor]

MODELS: dict[str, Callable[[], Batch]] = {
    "mlp": lambda: (_mlp(), torch.randn(16, 12), torch.randint(0, 4, (16,))),
    "cnn": lambda: (CNN(), torch.randn(6, 3, 8, 8), torch.randint(0, 5, (6,))),
    "transformer": lambda: (Transformer(), torch.randn(3, 7, 16), torch.randint(0, 3, (3,))),
    "lstm": lambda: (LSTM(), torch.randn(4, 5, 6), torch.randint(0, 3, (4,))),
    "inplace": lambda: (InPlace(), torch.randn(8, 10), torch.randint(0, 4, (8,))),
}


def make(name: str, dtype: torch.dtype = torch.float32, seed: int = 0) -> Batch:
    """Model ``name`` (in training mode) with a batch, deterministic for ``seed``."""
    torch.manual_seed(seed)
    model, x, y = MODELS[name]()
    return model.to(dtype).train(), x.to(dtype), y
