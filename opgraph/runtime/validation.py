"""The checks every ``Executable.call`` makes before it writes anything (DESIGN.md §2)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from opgraph.core.errors import AliasingError, CallTypeError, GraphError
from opgraph.core.tensor_type import TensorType
from opgraph.runtime.tensor import Tensor


def validate_call(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    result_types: Sequence[TensorType],
    parameter_types: Sequence[TensorType],
    fn_name: str,
) -> None:
    """Counts, element types, shapes and aliasing of a call; raises before any write."""
    _check_list(outputs, result_types, "output", "result", fn_name)
    _check_list(inputs, parameter_types, "input", "parameter", fn_name)
    _check_aliasing(outputs, inputs, fn_name)


def _check_list(
    tensors: Sequence[Tensor],
    types: Sequence[TensorType],
    what: str,
    role: str,
    fn_name: str,
) -> None:
    if len(tensors) != len(types):
        raise GraphError(f"{fn_name}: expected {len(types)} {what} tensor(s), got {len(tensors)}")
    for i, (tensor, expected) in enumerate(zip(tensors, types, strict=True)):
        if not isinstance(tensor, Tensor):
            raise CallTypeError(
                f"{fn_name}: {what} {i} must be a Tensor from backend.create_tensor, got "
                f"{type(tensor).__name__}"
            )
        if tensor.element_type is not expected.element_type:
            raise CallTypeError(
                f"{fn_name}: {what} {i} has element type {tensor.element_type.name}, {role} {i} "
                f"has {expected.element_type.name}"
            )
        if tensor.shape != expected.shape:
            raise GraphError(
                f"{fn_name}: {what} {i} has shape {list(tensor.shape)}, {role} {i} has "
                f"{list(expected.shape)}"
            )


def _check_aliasing(outputs: Sequence[Tensor], inputs: Sequence[Tensor], fn_name: str) -> None:
    for i, out in enumerate(outputs):
        for j in range(i):
            if _overlap(out, outputs[j]):
                raise AliasingError(
                    f"{fn_name}: outputs {j} and {i} share memory; each result needs its own tensor"
                )
        for j, arg in enumerate(inputs):
            if _overlap(out, arg):
                raise AliasingError(
                    f"{fn_name}: output {i} shares memory with input {j}; an argument tensor "
                    "may not also receive a result"
                )


def _overlap(a: Tensor, b: Tensor) -> bool:
    if a is b:
        return True
    if a.buffer.size == 0 or b.buffer.size == 0:
        return False
    # Tensors are C-contiguous, so bounds overlap is exact.
    return bool(np.may_share_memory(a.buffer, b.buffer))
