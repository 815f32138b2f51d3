"""Optimizers: a rule from :mod:`opgraph.optim.rules` plus the state it carries between steps.

An optimizer describes its state as :class:`StateSpec` s (name and type, all starting at zero)
and builds the update from graph values. :func:`opgraph.optim.training_step` turns the state
into parameters and results of the step Function, so the caller feeds it back each step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.tensor_type import TensorType
from opgraph.ops.elementwise import add
from opgraph.optim.rules import Hyper, adam, momentum, sgd


@dataclass(frozen=True, slots=True)
class StateSpec:
    """One optimizer state tensor: a name (for printing) and a type. It starts at zero."""

    name: str
    type: TensorType

    def initial(self) -> np.ndarray:
        """The state's value before the first step (zeros)."""
        return np.zeros(self.type.shape, self.type.element_type.dtype)


def _label(p: Output, i: int) -> str:
    return p.node.name or f"param{i}"


def _per_parameter(params: Sequence[Output], slot: str) -> list[StateSpec]:
    return [StateSpec(f"{_label(p, i)}.{slot}", p.tensor_type) for i, p in enumerate(params)]


class Optimizer(ABC):
    """An update rule with its hyperparameters and the layout of its state."""

    lr: float

    @abstractmethod
    def state_specs(self, params: Sequence[Output]) -> list[StateSpec]:
        """The state this optimizer keeps for ``params``, in the order ``update`` takes it."""

    @abstractmethod
    def update(
        self,
        params: Sequence[Output],
        grads: Sequence[Output],
        state: Sequence[Output],
        lr: Hyper | None = None,
    ) -> tuple[list[Output], list[Output]]:
        """Build the update.

        Args:
            params: the current parameters.
            grads: one gradient per parameter.
            state: values typed like :meth:`state_specs`.
            lr: overrides the learning rate (e.g. a scalar Parameter for a schedule).

        Returns:
            ``(new_params, new_state)``, the state in :meth:`state_specs` order.
        """

    def initial_state(self, params: Sequence[Output]) -> list[np.ndarray]:
        """Zeros for every state tensor, in :meth:`state_specs` order."""
        return [spec.initial() for spec in self.state_specs(params)]


@dataclass(frozen=True)
class SGD(Optimizer):
    """Plain gradient descent (see :func:`opgraph.optim.sgd`); no state."""

    lr: float = 0.01

    def state_specs(self, params: Sequence[Output]) -> list[StateSpec]:
        return []

    def update(
        self,
        params: Sequence[Output],
        grads: Sequence[Output],
        state: Sequence[Output],
        lr: Hyper | None = None,
    ) -> tuple[list[Output], list[Output]]:
        return sgd(params, grads, self.lr if lr is None else lr), []


@dataclass(frozen=True)
class Momentum(Optimizer):
    """Heavy-ball momentum (see :func:`opgraph.optim.momentum`); state: one velocity per
    parameter."""

    lr: float = 0.01
    beta: float = 0.9

    def state_specs(self, params: Sequence[Output]) -> list[StateSpec]:
        return _per_parameter(params, "velocity")

    def update(
        self,
        params: Sequence[Output],
        grads: Sequence[Output],
        state: Sequence[Output],
        lr: Hyper | None = None,
    ) -> tuple[list[Output], list[Output]]:
        return momentum(params, grads, state, self.lr if lr is None else lr, self.beta)


@dataclass(frozen=True)
class Adam(Optimizer):
    """Adam with bias correction (see :func:`opgraph.optim.adam`).

    State: the first moments (one per parameter), the second moments (one per parameter), then
    ``step``, an ``i64`` scalar counting the updates already made (the update it builds is
    number ``step + 1`` and returns ``step + 1`` as the new count).
    """

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def state_specs(self, params: Sequence[Output]) -> list[StateSpec]:
        step = StateSpec("adam.step", TensorType(et.i64, ()))
        return [*_per_parameter(params, "m"), *_per_parameter(params, "v"), step]

    def update(
        self,
        params: Sequence[Output],
        grads: Sequence[Output],
        state: Sequence[Output],
        lr: Hyper | None = None,
    ) -> tuple[list[Output], list[Output]]:
        n = len(params)
        if len(state) != 2 * n + 1:
            raise OpTypeError(
                f"Adam: {n} parameter(s) need {2 * n + 1} state values, got {len(state)}"
            )
        step = add(state[-1], constant(1, state[-1].element_type))
        rate = self.lr if lr is None else lr
        hyper = (rate, self.beta1, self.beta2, self.eps)
        new_params, m, v = adam(params, grads, state[:n], state[n : 2 * n], step, *hyper)
        return new_params, [*m, *v, step]
