"""The training step as one Function, and a runner that feeds it back on tensors created once.

:func:`training_step` composes a loss Function, its gradients (:func:`opgraph.autodiff.backprop`)
and an optimizer's update into a single Function, so one compiled call does the forward pass,
the backward pass and the update. :class:`Trainer` compiles it and calls it once per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.autodiff.grad import backprop
from opgraph.core.errors import GraphError, NotDifferentiableError
from opgraph.core.function import Function
from opgraph.core.literals import parameter
from opgraph.core.node import Output
from opgraph.optim.optimizers import Optimizer
from opgraph.runtime.backend import Backend, Executable, backend
from opgraph.runtime.tensor import Tensor

LEARNING_RATE = "learning_rate"
"""The name of the step Function's learning-rate Parameter (``learning_rate_input=True``)."""


def trainable_parameters(loss_fn: Function, params: Sequence[Output] | int) -> list[Output]:
    """``params`` as a list of ``loss_fn``'s Parameters (an int ``n`` means its first ``n``)."""
    if isinstance(params, int):
        if not 0 < params <= len(loss_fn.parameters):
            raise GraphError(
                f"training_step: {loss_fn.name} has {len(loss_fn.parameters)} parameter(s), "
                f"cannot train the first {params}"
            )
        return list(loss_fn.parameters[:params])
    chosen = list(params)
    if not chosen:
        raise GraphError("training_step: no parameters to train")
    declared = set(loss_fn.parameters)
    for i, p in enumerate(chosen):
        if p not in declared:
            raise GraphError(f"training_step: params[{i}] is not a parameter of {loss_fn.name}")
    if len(set(chosen)) != len(chosen):
        raise GraphError("training_step: a parameter is listed twice")
    return chosen


def training_step(
    loss_fn: Function,
    params: Sequence[Output] | int,
    optimizer: Optimizer,
    *,
    learning_rate_input: bool = False,
    name: str | None = None,
) -> Function:
    """One training step as a Function: loss, gradients and the optimizer's update.

    Args:
        loss_fn: a Function with one scalar floating-point result, the loss, computed from the
            trainable parameters and the batch inputs (its other parameters).
        params: the trainable parameters of ``loss_fn`` (in the order the step takes them), or
            an int ``n`` for its first ``n`` parameters.
        optimizer: the update rule, e.g. ``Adam(lr=1e-3)``.
        learning_rate_input: add a scalar Parameter named ``"learning_rate"`` (of the first
            trainable parameter's element type) as the last argument; it replaces
            ``optimizer.lr`` and allows a schedule without recompiling.
        name: the step Function's name (default ``"<loss name>_step"``).

    Returns:
        A Function whose parameters are the trainable parameters, the optimizer state
        (``optimizer.state_specs`` order), the batch inputs (``loss_fn``'s remaining parameters
        in their order), then the learning rate if requested; and whose results are the loss
        (before the update), the new parameters and the new state, in the same orders.

    Raises:
        GraphError: ``params`` are not parameters of ``loss_fn``.
        NotDifferentiableError: the loss is not one scalar float, a trainable parameter is not
            floating-point, or the gradient must pass through an op without an adjoint.
    """
    trainable = trainable_parameters(loss_fn, params)
    if len(loss_fn.results) != 1:
        raise NotDifferentiableError(
            f"training_step: {loss_fn.name} must have exactly one result, the loss; it has "
            f"{len(loss_fn.results)}"
        )
    grad_fn = backprop(loss_fn, wrt=trainable)
    loss, grads = grad_fn.results[0], list(grad_fn.results[1:])
    specs = optimizer.state_specs(trainable)
    state = [parameter(s.type.element_type, s.type.shape, name=s.name) for s in specs]
    chosen = set(trainable)
    batch = [p for p in grad_fn.parameters if p not in chosen]
    extra: list[Output] = []
    lr: Output | None = None
    if learning_rate_input:
        lr = parameter(trainable[0].element_type, (), name=LEARNING_RATE)
        extra.append(lr)
    new_params, new_state = optimizer.update(trainable, grads, state, lr)
    return Function(
        [loss, *new_params, *new_state],
        [*trainable, *state, *batch, *extra],
        name=name if name is not None else f"{loss_fn.name}_step",
    )


class Trainer:
    """Compiles a training step and runs it once per batch on tensors created once.

    Parameters and optimizer state live in two sets of tensors: a call reads one set and writes
    the other (an argument tensor may not also receive a result), then the sets swap, so no
    value is copied between steps.

    Example::

        trainer = Trainer(loss_fn, 4, Adam(lr=1e-2), initial, backend="INTERPRETER")
        for x, y in batches:
            loss = trainer.step(x, y)
        weights = trainer.parameter_values()
    """

    def __init__(
        self,
        loss_fn: Function,
        params: Sequence[Output] | int,
        optimizer: Optimizer,
        initial_values: Sequence[np.ndarray],
        backend: Backend | str = "INTERPRETER",
        *,
        learning_rate_input: bool = False,
        profile: bool = False,
    ) -> None:
        """Build and compile the step, and load the initial parameters (state starts at zero).

        Args:
            loss_fn: see :func:`training_step`.
            params: see :func:`training_step`.
            optimizer: see :func:`training_step`.
            initial_values: one array per trainable parameter, of its exact type.
            backend: a Backend or a registered backend's name.
            learning_rate_input: see :func:`training_step`; then :meth:`step` needs
                ``learning_rate``.
            profile: compile with performance counters.
        """
        trainable = trainable_parameters(loss_fn, params)
        self.optimizer = optimizer
        self.function = training_step(
            loss_fn, trainable, optimizer, learning_rate_input=learning_rate_input
        )
        self.backend = _as_backend(backend)
        self.executable: Executable = self.backend.compile(self.function, profile=profile)
        self.num_parameters = len(trainable)
        self.num_state = len(optimizer.state_specs(trainable))
        self.learning_rate_input = learning_rate_input
        self.steps = 0
        types = self.function.parameter_types
        carried = self.num_parameters + self.num_state
        self._current = [self._tensor(t) for t in types[:carried]]
        self._next = [self._tensor(t) for t in types[:carried]]
        self._inputs = [self._tensor(t) for t in types[carried:]]
        self._loss = self._tensor(self.function.flat_result_types[0])
        if len(initial_values) != self.num_parameters:
            raise GraphError(
                f"Trainer: {len(initial_values)} initial value(s) for {self.num_parameters} "
                "parameter(s)"
            )
        for tensor, value in zip(
            self._current, [*initial_values, *optimizer.initial_state(trainable)], strict=True
        ):
            tensor.write(value)

    def _tensor(self, t: Any) -> Tensor:
        return self.backend.create_tensor(t.element_type, t.shape)

    def step(self, *batch: np.ndarray, learning_rate: float | None = None) -> float:
        """Run one step on ``batch`` (arrays of the batch inputs' exact types); returns the loss
        computed before the update."""
        expected = len(self._inputs) - int(self.learning_rate_input)
        if len(batch) != expected:
            raise GraphError(f"Trainer.step: expected {expected} batch array(s), got {len(batch)}")
        for tensor, value in zip(self._inputs[:expected], batch, strict=True):
            tensor.write(value)
        if self.learning_rate_input:
            if learning_rate is None:
                raise GraphError("Trainer.step: this step takes a learning_rate")
            rate = self._inputs[-1]
            rate.write(np.asarray(learning_rate, dtype=rate.element_type.dtype))
        elif learning_rate is not None:
            raise GraphError("Trainer.step: compiled without learning_rate_input")
        self.executable.call([self._loss, *self._next], [*self._current, *self._inputs])
        self._current, self._next = self._next, self._current
        self.steps += 1
        return float(self._loss.read())  # a copy: the tensor may live in device memory

    @property
    def parameter_tensors(self) -> list[Tensor]:
        """The tensors holding the current parameters (valid until the next step); pass them
        to another Executable, e.g. an evaluation Function, without copying."""
        return self._current[: self.num_parameters]

    def parameter_values(self) -> list[np.ndarray]:
        """Copies of the current parameters."""
        return [t.read() for t in self.parameter_tensors]

    def state_values(self) -> list[np.ndarray]:
        """Copies of the current optimizer state, in ``optimizer.state_specs`` order."""
        return [t.read() for t in self._current[self.num_parameters :]]


def _as_backend(value: Backend | str) -> Backend:
    return backend(value) if isinstance(value, str) else value
