"""Train a small CNN on scikit-learn's digits through ``torch.compile(backend="opgraph")``.

    python examples/torch_train.py [--epochs 8] [--limit N]

The same model (same initial weights, same batches) is trained twice, eagerly and through
opgraph (forward and backward compiled by opgraph, the SGD update by torch), and both test
accuracies are printed; they agree because the gradients agree to rounding.
"""

from __future__ import annotations

import argparse
import copy
import warnings

import torch
from sklearn.datasets import load_digits

import opgraph.frontends.torch  # noqa: F401 - registers the "opgraph" backend


class DigitsCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.head = torch.nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)  # 4×4
        h = torch.nn.functional.max_pool2d(torch.relu(self.conv2(h)), 2)  # 2×2
        return self.head(h.flatten(1))


def load(limit: int | None) -> tuple[torch.Tensor, ...]:
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    if limit is not None:
        x, y = x[:limit], y[:limit]
    split = int(0.8 * len(y))
    return x[:split], y[:split], x[split:], y[split:]


def train(
    model: torch.nn.Module, compiled: bool, data: tuple[torch.Tensor, ...], epochs: int
) -> float:
    """Train with SGD + momentum; return the test accuracy."""
    x_train, y_train, x_test, y_test = data
    run = torch.compile(model, backend="opgraph") if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batch = 64
    for epoch in range(epochs):
        order = torch.randperm(len(y_train), generator=torch.Generator().manual_seed(epoch))
        for start in range(0, len(order) - batch + 1, batch):  # full batches: one shape
            rows = order[start : start + batch]
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(run(x_train[rows]), y_train[rows])
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        predicted = run(x_test).argmax(1)
    return float((predicted == y_test).float().mean())


def main(epochs: int = 8, limit: int | None = None) -> tuple[float, float]:
    torch.manual_seed(0)
    data = load(limit)
    model = DigitsCNN()
    reference = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        accuracy = train(model, True, data, epochs)
    eager = train(reference, False, data, epochs)
    print(f"opgraph: test accuracy {accuracy:.4f}")
    print(f"eager:   test accuracy {eager:.4f}")
    with torch.no_grad():
        drift = max(
            float((p - q).abs().max())
            for p, q in zip(model.parameters(), reference.parameters(), strict=True)
        )
    print(f"largest parameter difference after training: {drift:.2e}")
    return accuracy, eager


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--limit", type=int, default=None, help="use only this many images")
    arguments = parser.parse_args()
    main(arguments.epochs, arguments.limit)
