"""Run a compiled opgraph Executable on torch tensors, zero-copy both ways.

Inputs are wrapped through ``Tensor.numpy()`` (a contiguous copy is made only for a
non-contiguous input); results are allocated as torch tensors and the Executable writes into
their memory, so no result is copied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from opgraph.core.errors import GraphError
from opgraph.core.shape import static_shape
from opgraph.core.tensor_type import TensorType
from opgraph.frontends.torch.types import as_numpy, to_torch
from opgraph.runtime.backend import Backend, Executable
from opgraph.runtime.tensor import Tensor


def wrap(backend: Backend, tensor: Any, expected: TensorType, index: int) -> Tensor:
    """An opgraph tensor sharing memory with ``tensor`` (made contiguous first if needed);
    a Python number (a run-time scalar) becomes a rank-0 tensor."""
    if not isinstance(tensor, torch.Tensor):
        value = np.array(tensor, dtype=expected.element_type.dtype)
        return backend.create_tensor(expected.element_type, expected.shape, buffer=value)
    if tensor.device.type != "cpu":
        raise GraphError(f"argument {index}: opgraph runs on the CPU, got a {tensor.device} tensor")
    if tensor.requires_grad:
        tensor = tensor.detach()
    if tensor.is_neg() or tensor.is_conj():
        tensor = tensor.resolve_neg().resolve_conj()
    if not tensor.is_contiguous():
        tensor = tensor.contiguous()
    return backend.create_tensor(expected.element_type, expected.shape, buffer=as_numpy(tensor))


class ExecutableModule(torch.nn.Module):
    """A ``torch.nn.Module`` that runs an Executable (one fused partition of a graph).

    Args:
        backend: the opgraph backend the Executable came from (it creates the tensors).
        executable: the compiled Function.
        inputs: for each ``forward`` argument, the index of the Function parameter it feeds,
            or None when the argument was folded into the Function (a frozen weight, a
            specialised Python scalar).
        single: return one tensor instead of a tuple (the partition has one output).
    """

    def __init__(
        self,
        backend: Backend,
        executable: Executable,
        inputs: Sequence[int | None],
        single: bool,
    ) -> None:
        super().__init__()
        self.backend = backend
        self.executable = executable
        self.inputs = list(inputs)
        self.single = single
        self._params = list(executable.parameter_types)
        self._results = [
            (static_shape(r.shape), to_torch(r.element_type)) for r in executable.result_types
        ]

    def forward(self, *args: Any) -> Any:
        tensors: list[Tensor | None] = [None] * len(self._params)
        for arg, slot in zip(args, self.inputs, strict=True):
            if slot is not None:
                tensors[slot] = wrap(self.backend, arg, self._params[slot], slot)
        results = [torch.empty(shape, dtype=dtype) for shape, dtype in self._results]
        outputs = [
            self.backend.create_tensor(t.element_type, t.shape, buffer=as_numpy(r))
            for t, r in zip(self.executable.result_types, results, strict=True)
        ]
        self.executable.call(outputs, [t for t in tensors if t is not None])
        return results[0] if self.single else tuple(results)
