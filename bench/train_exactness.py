"""How close one training step's gradients are to exact, for eager, Inductor and opgraph.

    python bench/train_exactness.py [--workload resnet|mlp|bert] [--batch 8] [--skip inductor]

Each runtime computes the gradients of every parameter for one batch, in f32, from the same
initial model (training mode). The reference is eager PyTorch in f64 on the same model. For
each runtime the table gives the largest error over the parameters, each parameter's error
being ``max|g - g64| / max|g64|`` (the denominator floored at 1e-3 of the largest over the
parameters), and the same measure against eager f32. On a deep model the
f32 runtimes differ from each other by about as much as eager differs from f64: that is the
floor for any "matches eager to N digits" statement.
"""

from __future__ import annotations

import copy
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
from collections.abc import Callable

import torch
from torch import nn

import opgraph.frontends.torch  # noqa: F401  (registers backend="opgraph")
from bench.torch_bench import MLP, BertLayer, ResNet18

Grads = dict[str, torch.Tensor]


def _inputs(workload: str, batch: int) -> tuple[nn.Module, torch.Tensor, Callable[..., object]]:
    if workload == "resnet":
        return ResNet18(), torch.randn(batch, 3, 32, 32), _cross_entropy
    if workload == "mlp":
        return MLP(), torch.randn(batch, 784), _cross_entropy
    return BertLayer(), torch.randn(batch, 128, 768), _mean_square


def _cross_entropy(output: torch.Tensor) -> torch.Tensor:
    target = torch.arange(output.shape[0]) % output.shape[-1]
    return nn.functional.cross_entropy(output, target)


def _mean_square(output: torch.Tensor) -> torch.Tensor:
    return output.square().mean()


def _grads(
    model: Callable[..., object], inputs: torch.Tensor, loss: Callable[..., object]
) -> Grads:
    assert isinstance(model, nn.Module)
    model.zero_grad()
    value = loss(model(inputs))
    assert isinstance(value, torch.Tensor)
    value.backward()
    named = model.named_parameters()
    return {
        n.removeprefix("_orig_mod."): p.grad.detach().double()
        for n, p in named
        if p.grad is not None
    }


def _error(got: Grads, want: Grads) -> tuple[float, str]:
    """The largest error over the parameters, each measured against its own largest exact
    gradient, floored at 1e-3 of the model's largest (a gradient that is zero in exact
    arithmetic, like a key projection's bias under softmax, has only rounding noise)."""
    floor = 1e-3 * max(float(w.abs().max()) for w in want.values())
    errors = {
        n: float((got[n] - w).abs().max()) / max(float(w.abs().max()), floor)
        for n, w in want.items()
    }
    worst = max(errors, key=errors.__getitem__)
    return errors[worst], worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="resnet", choices=["resnet", "mlp", "bert"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--skip", default="", help="comma-separated runtimes to leave out")
    args = parser.parse_args()
    torch.manual_seed(0)
    base, inputs, loss = _inputs(args.workload, args.batch)
    base.train()
    exact = _grads(copy.deepcopy(base).double(), inputs.double(), loss)
    makers: dict[str, Callable[[nn.Module], Callable[..., object]]] = {
        "eager": lambda m: m,
        "inductor": lambda m: torch.compile(m),
        "opgraph": lambda m: torch.compile(m, backend="opgraph"),
    }
    skip = set(filter(None, args.skip.split(",")))
    found = {
        k: _grads(make(copy.deepcopy(base)), inputs, loss)
        for k, make in makers.items()
        if k not in skip
    }
    print("| runtime | against f64 eager | worst parameter | against f32 eager |")
    print("|---|---|---|---|")
    for name, grads in found.items():
        to_exact, worst = _error(grads, exact)
        to_eager = _error(grads, found["eager"])[0] if "eager" in found else float("nan")
        print(f"| {name} | {to_exact:.2e} | {worst} | {to_eager:.2e} |")


if __name__ == "__main__":
    main()
