"""torch.optim updates as opgraph graphs, in torch's own formulas and operation order.

``torch.optim.SGD`` (momentum, dampening, Nesterov, weight decay, maximize), ``Adam`` and
``AdamW`` (weight decay, maximize; not amsgrad) follow torch's single-tensor CPU code path
(``_single_tensor_sgd``/``_single_tensor_adam``) operation by operation; the per-step
factors torch computes in Python double (``lr / (1 - β₁ᵗ)``, ``√(1 - β₂ᵗ)``,
``1 - lr·weight_decay``) are computed the same way each step and passed in as run-time
scalars, so schedulers that change ``lr`` work. Results are not bitwise equal to torch's:
its vectorized kernels fuse multiply-adds (``lerp``, ``addcmul``) where opgraph rounds twice.

Optimizer state lives in ``optimizer.state`` under torch's own keys (``momentum_buffer``,
``exp_avg``, ``exp_avg_sq``, ``step``), so a run can switch between the compiled step and
``optimizer.step()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.errors import ConversionError
from opgraph.core.literals import parameter
from opgraph.core.node import Output


@dataclass
class Update:
    """One parameter's update, in graph values.

    Attributes:
        param: the new parameter value.
        state: the new value of each state tensor, by torch's state key.
    """

    param: Output
    state: dict[str, Output]


class Rule(ABC):
    """How one torch optimizer class updates a parameter group."""

    #: Names of the per-step scalars :meth:`scalars` computes for a group.
    scalar_names: tuple[str, ...] = ()

    @abstractmethod
    def check(self, group: dict[str, Any]) -> None:
        """Raise ConversionError for options the rule does not implement."""

    @abstractmethod
    def state_keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        """The state tensors kept per parameter of ``group`` (torch's keys), zeros at first."""

    @abstractmethod
    def scalars(self, group: dict[str, Any], step: int) -> tuple[float, ...]:
        """The run-time scalars for update number ``step`` (1-based), in Python double."""

    @abstractmethod
    def update(
        self,
        group: dict[str, Any],
        p: Output,
        g: Output,
        state: dict[str, Output],
        scalars: dict[str, Output],
    ) -> Update:
        """The update of ``p`` with gradient ``g``; ``scalars`` are rank-0 values of ``p``'s
        element type."""


def _scaled(value: Output | float, x: Output) -> Output:
    """``value`` (a rank-0 value or a Python number) broadcast to ``x``'s shape."""
    if isinstance(value, Output):
        return ops.broadcast_to(value, x.shape)
    return ops.scalar_like(value, x)


def _add(x: Output, y: Output, alpha: Output | float = 1.0) -> Output:
    """``torch.add(x, y, alpha=alpha)``: ``x + alpha·y`` (``x + y`` when alpha is 1)."""
    if not isinstance(alpha, Output) and alpha == 1.0:
        return ops.add(x, y)
    return ops.add(x, ops.multiply(_scaled(alpha, y), y))


class SGDRule(Rule):
    scalar_names = ("neg_lr", "first")

    def check(self, group: dict[str, Any]) -> None:
        if group.get("nesterov") and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ConversionError("SGD: Nesterov momentum requires a momentum and zero dampening")

    def state_keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def scalars(self, group: dict[str, Any], step: int) -> tuple[float, ...]:
        return (-float(group["lr"]), 1.0 if step == 1 else 0.0)

    def update(
        self,
        group: dict[str, Any],
        p: Output,
        g: Output,
        state: dict[str, Output],
        scalars: dict[str, Output],
    ) -> Update:
        if group.get("maximize"):
            g = ops.negative(g)
        if group["weight_decay"] != 0:
            g = _add(g, p, float(group["weight_decay"]))
        new_state: dict[str, Output] = {}
        momentum = float(group["momentum"])
        if momentum != 0:
            buf = state["momentum_buffer"]
            later = _add(
                ops.multiply(buf, _scaled(momentum, buf)), g, 1 - float(group["dampening"])
            )
            first = ops.broadcast(
                ops.convert(scalars["first"], et.boolean), g.shape, tuple(range(g.rank))
            ) if g.rank else ops.convert(scalars["first"], et.boolean)  # fmt: skip
            buf = ops.select(first, g, later)  # torch clones the gradient on the first step
            new_state["momentum_buffer"] = buf
            g = _add(g, buf, momentum) if group.get("nesterov") else buf
        return Update(_add(p, g, scalars["neg_lr"]), new_state)


class AdamRule(Rule):
    scalar_names = ("neg_step_size", "bias_correction2_sqrt", "decay")

    def __init__(self, decoupled: bool) -> None:
        self.decoupled = decoupled

    def check(self, group: dict[str, Any]) -> None:
        for option in ("amsgrad", "capturable", "differentiable", "fused"):
            if group.get(option):
                raise ConversionError(f"Adam: {option}=True is not supported by the step")

    def state_keys(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def scalars(self, group: dict[str, Any], step: int) -> tuple[float, ...]:
        lr, (beta1, beta2) = float(group["lr"]), group["betas"]
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        decay = 1 - lr * float(group["weight_decay"])
        return (-(lr / bias_correction1), bias_correction2**0.5, decay)

    def update(
        self,
        group: dict[str, Any],
        p: Output,
        g: Output,
        state: dict[str, Output],
        scalars: dict[str, Output],
    ) -> Update:
        beta1, beta2 = (float(b) for b in group["betas"])
        weight_decay = float(group["weight_decay"])
        if group.get("maximize"):
            g = ops.negative(g)
        if weight_decay != 0:
            if self.decoupled:
                p = ops.multiply(p, _scaled(scalars["decay"], p))
            else:
                g = _add(g, p, weight_decay)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m = _lerp(m, g, 1 - beta1)
        v = ops.add(
            ops.multiply(v, _scaled(beta2, v)),
            ops.multiply(ops.multiply(_scaled(1 - beta2, g), g), g),
        )
        denominator = ops.add(
            ops.divide(ops.sqrt(v), _scaled(scalars["bias_correction2_sqrt"], v)),
            _scaled(float(group["eps"]), v),
        )
        new_p = ops.add(
            p, ops.multiply(_scaled(scalars["neg_step_size"], p), ops.divide(m, denominator))
        )
        return Update(new_p, {"exp_avg": m, "exp_avg_sq": v})


def _lerp(start: Output, end: Output, weight: float) -> Output:
    """``torch.lerp`` with a scalar weight, in ATen's two-sided form."""
    if abs(weight) < 0.5:
        return ops.add(start, ops.multiply(_scaled(weight, start), ops.subtract(end, start)))
    return ops.subtract(end, ops.multiply(ops.subtract(end, start), _scaled(1 - weight, start)))


_RULES: dict[type, Callable[[], Rule]] = {
    torch.optim.SGD: SGDRule,
    torch.optim.Adam: lambda: AdamRule(decoupled=False),
    torch.optim.AdamW: lambda: AdamRule(decoupled=True),
}


def rule_for(optimizer: torch.optim.Optimizer) -> Rule:
    """The rule for ``optimizer``'s class, its groups' options checked."""
    make = _RULES.get(type(optimizer))
    if make is None:
        known = ", ".join(f"torch.optim.{cls.__name__}" for cls in _RULES)
        raise ConversionError(
            f"compile_train_step supports {known}; got {type(optimizer).__name__}"
        )
    rule = make()
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            raise ConversionError("compile_train_step needs a Python float learning rate")
        rule.check(group)
    if isinstance(rule, AdamRule):
        for group in optimizer.param_groups:
            if group.get("decoupled_weight_decay"):
                rule.decoupled = True
    return rule


def scalar_inputs(rule: Rule, prefix: str) -> dict[str, Output]:
    """One f64 rank-0 Parameter per scalar of ``rule``."""
    return {name: parameter(et.f64, (), name=f"{prefix}.{name}") for name in rule.scalar_names}


def as_type(scalars: dict[str, Output], like: Output) -> dict[str, Output]:
    """The f64 scalars converted to ``like``'s element type (as torch casts a Python
    double to the tensor's type)."""
    if like.element_type == et.f64:
        return scalars
    return {k: ops.convert(v, like.element_type) for k, v in scalars.items()}


def zero_state(like: torch.Tensor) -> torch.Tensor:
    """A state tensor before the first step."""
    return torch.zeros_like(like, memory_format=torch.contiguous_format)
