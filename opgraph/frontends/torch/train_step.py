"""``compile_train_step``: forward, backward and the optimizer update in one opgraph call.

The model and loss are exported (``torch.export``, training mode) and converted with the
parameters and buffers as Parameters; opgraph's reverse-mode autodiff differentiates the loss;
the optimizer's update (:mod:`opgraph.frontends.torch.optimizers`) is appended; one Function
returns the loss, the new parameters, the new buffers (batch-norm running statistics) and the
new optimizer state. Each call writes those into a second set of buffers and swaps them into
the parameters (``param.data``), the module's buffers and ``optimizer.state``: the tensors
keep their identity, nothing is copied, and gradients are never materialized in ``.grad``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.export.graph_signature import InputKind, OutputKind

from opgraph.autodiff import gradients
from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.literals import constant, parameter
from opgraph.core.node import Output
from opgraph.frontends.torch.dynamo import default_backend
from opgraph.frontends.torch.importer import convert_program
from opgraph.frontends.torch.optimizers import Rule, as_type, rule_for, scalar_inputs, zero_state
from opgraph.frontends.torch.types import as_numpy, from_torch, to_torch
from opgraph.passes.transpose_products import transpose_products
from opgraph.runtime.backend import Backend, Executable
from opgraph.runtime.backend import backend as get_backend
from opgraph.runtime.host_threads import withdraw_host_openmp
from opgraph.runtime.tensor import Tensor

_MUTATION = (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION)


class _WithLoss(torch.nn.Module):
    def __init__(self, model: torch.nn.Module, loss_fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, inputs: Any, target: Any) -> torch.Tensor:
        args = inputs if isinstance(inputs, tuple) else (inputs,)
        return self.loss_fn(self.model(*args), target)


def compile_train_step(
    model: torch.nn.Module,
    loss_fn: Callable[..., torch.Tensor],
    optimizer: torch.optim.Optimizer,
    *,
    backend: str | None = None,
) -> TrainStep:
    """One compiled training step: ``loss = step(inputs, target)``.

    The step computes ``loss_fn(model(inputs), target)``, its gradients and the optimizer's
    update in one opgraph call, and updates the model's parameters, its buffers and the
    optimizer's state in place. It compiles on the first call and again for new input shapes.

    Args:
        model: the module (its training/eval mode at the call is used).
        loss_fn: ``loss_fn(output, target) -> scalar tensor``.
        optimizer: a ``torch.optim.SGD``, ``Adam`` or ``AdamW`` over ``model``'s parameters;
            its ``lr`` may change between calls (schedulers work).
        backend: the opgraph backend ("CPU" when registered, else "INTERPRETER").

    Raises:
        ConversionError: an unsupported optimizer or option, an op opgraph cannot convert
            (training-mode dropout, for one), or an optimizer parameter the model lacks.

    Example:
        >>> step = compile_train_step(model, torch.nn.functional.cross_entropy, optimizer)
        >>> for x, y in batches:
        ...     loss = step(x, y)
    """
    return TrainStep(model, loss_fn, optimizer, backend or default_backend())


@dataclass
class _Program:
    """One compiled step for one input signature.

    Attributes:
        executable: the compiled step Function.
        weights: the state-dict name of each parameter or buffer the Function reads, after
            the user inputs, in its parameter order.
        states: ``(optimizer state dict, key)`` of each state tensor it reads next.
        groups: the param-group index of each block of run-time scalars it reads last.
        targets: ``(owner, key)`` of each result after the loss: what it replaces.
        spares: the buffers the next call writes those results into.
    """

    executable: Executable | None
    weights: list[str]
    states: list[tuple[dict[str, Any], str]]
    groups: list[int]
    targets: list[tuple[Any, str]]
    spares: list[torch.Tensor | None]


class TrainStep:
    """The callable :func:`compile_train_step` returns."""

    def __init__(
        self,
        model: torch.nn.Module,
        loss_fn: Callable[..., torch.Tensor],
        optimizer: torch.optim.Optimizer,
        backend: str,
    ) -> None:
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.rule: Rule = rule_for(optimizer)
        self.backend: Backend = get_backend(backend)
        self._programs: dict[tuple[Any, ...], _Program] = {}
        self._wrapped: dict[tuple[int, torch.dtype, tuple[int, ...]], Tensor] = {}

    def __call__(self, inputs: Any, target: torch.Tensor) -> torch.Tensor:
        flat = [*(inputs if isinstance(inputs, tuple) else (inputs,)), target]
        if not all(isinstance(t, torch.Tensor) for t in flat):
            raise ConversionError("compile_train_step: inputs and target must be tensors")
        withdraw_host_openmp()  # no torch op inside the step: opgraph's own pool (threads.py)
        key = (self.model.training, *((t.shape, t.dtype) for t in flat))
        program = self._programs.get(key)
        if program is None:
            program = self._programs[key] = self._build(inputs, target)
        return self._run(program, flat)

    # ---------------------------------------------------------------------- building
    def _build(self, inputs: Any, target: torch.Tensor) -> _Program:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            exported = torch.export.export(_WithLoss(self.model, self.loss_fn), (inputs, target))
            exported = exported.run_decompositions()
        converted = convert_program(
            exported, params_as_parameters=True, keep_mutations=True, name="train_step"
        )
        function = converted.function
        names = _weight_names(exported)
        n_user = len(function.parameters) - len(names)
        weights = dict(zip(names, function.parameters[n_user:], strict=True))
        loss = function.results[0]
        if converted.user_outputs != 1 or loss.shape != ():
            raise ConversionError(
                f"compile_train_step: the loss must be one scalar, got {loss.type}"
            )
        trainable = self._trainable(weights)
        one = constant(np.ones((), loss.element_type.dtype), loss.element_type)
        grads = gradients([loss], [weights[name] for _, name, _ in trainable], [one])
        program = _Program(None, names, [], [], [], [])
        params, results = list(function.parameters), [loss]
        for index, group in enumerate(self.optimizer.param_groups):
            members = [(i, t) for i, t in enumerate(trainable) if t[2] == index]
            if not members:
                continue
            scalars = scalar_inputs(self.rule, f"group{index}")
            for i, (param, name, _) in members:
                state = self._state(param, name, group)
                params.extend(state.values())
                program.states.extend((self.optimizer.state[param], k) for k in state)
                update = self.rule.update(
                    group, weights[name], grads[i], state, as_type(scalars, weights[name])
                )
                results.append(update.param)
                program.targets.append((param, "data"))
                for k in state:
                    results.append(update.state[k])
                    program.targets.append((self.optimizer.state[param], k))
            params.extend(scalars.values())
            program.groups.append(index)
        mutations = function.results[converted.user_outputs :]
        for value, name in zip(mutations, _mutation_targets(exported), strict=True):
            results.append(value)
            program.targets.append(_buffer_owner(self.model, name))
        # Linear weights' gradients in the weights' layout (x @ w.T differentiates to a
        # transposed product): the update then reads them contiguously, on every backend.
        step = transpose_products(Function(results, params, name="train_step"))
        program.executable = self.backend.compile(step)
        program.spares = [None] * len(program.targets)
        return program

    def _trainable(self, weights: dict[str, Output]) -> list[tuple[torch.nn.Parameter, str, int]]:
        names = {id(p): f"model.{n}" for n, p in self.model.named_parameters()}
        found = []
        for index, group in enumerate(self.optimizer.param_groups):
            for param in group["params"]:
                name = names.get(id(param))
                if name is None or name not in weights:
                    raise ConversionError(
                        "compile_train_step: an optimizer parameter is not a parameter the "
                        f"model's forward reads (shape {list(param.shape)})"
                    )
                if param.requires_grad:
                    found.append((param, name, index))
        return found

    def _state(
        self, param: torch.nn.Parameter, name: str, group: dict[str, Any]
    ) -> dict[str, Output]:
        state = self.optimizer.state[param]
        keys = self.rule.state_keys(group)
        # an optimizer that already stepped eagerly has its state (but SGD keeps no count)
        state.setdefault("step", torch.tensor(1.0 if state else 0.0))
        for key in keys:
            if not isinstance(state.get(key), torch.Tensor):
                state[key] = zero_state(param)
        element_type = from_torch(param.dtype, name)
        return {
            key: parameter(element_type, tuple(param.shape), name=f"{name}.{key}") for key in keys
        }

    # ----------------------------------------------------------------------- running
    def _run(self, program: _Program, flat: list[torch.Tensor]) -> torch.Tensor:
        exe = program.executable
        assert exe is not None
        found = dict(self.model.named_parameters()) | dict(self.model.named_buffers())
        weights = [found[name.removeprefix("model.")].detach() for name in program.weights]
        states = [owner[key] for owner, key in program.states]
        scalars: list[float] = []
        for index in program.groups:
            group = self.optimizer.param_groups[index]
            step = int(self.optimizer.state[group["params"][0]]["step"]) + 1
            scalars.extend(self.rule.scalars(group, step))
        loss = torch.empty((), dtype=to_torch(exe.result_types[0].element_type))
        for i, (owner, key) in enumerate(program.targets):
            if program.spares[i] is None:
                program.spares[i] = torch.empty_like(_read(owner, key))
        inputs = [t.detach().contiguous() for t in flat] + weights + states
        outputs = [loss, *(t for t in program.spares if t is not None)]
        values = np.array(scalars, np.float64)  # each element one rank-0 f64 argument
        if not _call_direct(exe, inputs, values, outputs):
            args = [self._wrap(t, i >= len(flat)) for i, t in enumerate(inputs)]
            args += [
                self.backend.create_tensor(t.element_type, (), buffer=values[i : i + 1].reshape(()))
                for i, t in enumerate(exe.parameter_types[len(args) :])
            ]
            exe.call([self._wrap(t, i > 0) for i, t in enumerate(outputs)], args)
        for i, (owner, key) in enumerate(program.targets):
            old = _read(owner, key)
            _write(owner, key, program.spares[i])
            program.spares[i] = old
        for index in program.groups:
            for param in self.optimizer.param_groups[index]["params"]:
                self.optimizer.state[param]["step"] += 1
        return loss

    def _wrap(self, tensor: torch.Tensor, cache: bool) -> Tensor:
        key = (tensor.data_ptr(), tensor.dtype, tuple(tensor.shape))
        wrapped = self._wrapped.get(key) if cache else None
        if wrapped is None:
            element_type = from_torch(tensor.dtype, "a training-step tensor")
            wrapped = self.backend.create_tensor(
                element_type, tuple(tensor.shape), buffer=as_numpy(tensor)
            )
            if cache:
                if len(self._wrapped) > 4096:  # replaced tensors: drop the stale wrappers
                    self._wrapped.clear()
                self._wrapped[key] = wrapped
        return wrapped


def _call_direct(
    exe: Executable, inputs: list[torch.Tensor], scalars: np.ndarray, outputs: list[torch.Tensor]
) -> bool:
    """Run ``exe`` on the tensors' addresses (``call_addresses``) after checking here what
    ``Executable.call`` would: each tensor's dtype, shape and contiguity, and that no output
    shares memory with another tensor. False (nothing run) when a check fails or the
    executable has no address call: then the caller takes the validated path."""
    call = getattr(exe, "call_addresses", None)
    if call is None:
        return False
    types = [*exe.parameter_types[: len(inputs)], *exe.result_types]
    tensors = [*inputs, *outputs]
    for t, expected in zip(tensors, types, strict=True):
        if (
            t.dtype != to_torch(expected.element_type)
            or t.shape != expected.shape
            or not t.is_contiguous()
            or t.numel() == 0
        ):
            return False
    read = {t.untyped_storage().data_ptr() for t in inputs}
    written = [t.untyped_storage().data_ptr() for t in outputs]
    if len(set(written)) != len(written) or read.intersection(written):
        return False
    base = scalars.ctypes.data
    extra = [base + scalars.itemsize * i for i in range(scalars.size)]
    call([*(t.data_ptr() for t in inputs), *extra, *(t.data_ptr() for t in outputs)])
    return True


def _read(owner: Any, key: str) -> torch.Tensor:
    value = owner.data if key == "data" else owner[key]
    assert isinstance(value, torch.Tensor)
    return value


def _write(owner: Any, key: str, value: torch.Tensor | None) -> None:
    if key == "data":
        owner.data = value
    else:
        owner[key] = value


def _weight_names(program: torch.export.ExportedProgram) -> list[str]:
    kinds = (InputKind.PARAMETER, InputKind.BUFFER)
    return [str(s.target) for s in program.graph_signature.input_specs if s.kind in kinds]


def _mutation_targets(program: torch.export.ExportedProgram) -> list[str]:
    return [str(s.target) for s in program.graph_signature.output_specs if s.kind in _MUTATION]


def _buffer_owner(model: torch.nn.Module, name: str) -> tuple[Any, str]:
    path = name.removeprefix("model.").rsplit(".", 1)
    module = model.get_submodule(path[0]) if len(path) == 2 else model
    return module._buffers, path[-1]
