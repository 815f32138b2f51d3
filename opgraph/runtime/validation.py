"""The checks every ``Executable.call`` makes before it writes anything (DESIGN.md §2).

Every check is linear in the number of tensors (the overlap test sorts address ranges once),
so a Function with 100,000 results validates in a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.core.errors import AliasingError, CallTypeError, GraphError
from opgraph.core.tensor_type import TensorType
from opgraph.runtime.tensor import HOST, Tensor

#: Up to this many tensors, overlap is tested pair by pair (cheaper than sorting few spans).
PAIRWISE_LIMIT = 8


def validate_call(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    result_types: Sequence[TensorType],
    parameter_types: Sequence[TensorType],
    fn_name: str,
    device: object | None = None,
) -> None:
    """Counts, element types, shapes, storage and aliasing of a call; raises before any write.

    One path for every backend: each tensor checks its own storage
    (:meth:`Tensor.check_storage`) and gives its address range (:meth:`Tensor.memory_range`),
    host and device tensors alike.

    Args:
        device: the address space, besides host memory, whose tensors this executable reads
            and writes in place (a GPU executable's device runtime); None for host only.

    Raises:
        CallTypeError: ``outputs``/``inputs`` are not lists of Tensors, an element type is
            wrong, a buffer is not a C-contiguous array of exactly the declared dtype and
            byte size (writeable, for results), or a tensor lives in memory this executable
            cannot address.
        GraphError: a count or shape is wrong.
        AliasingError: a result tensor overlaps another result or an argument.
    """
    check_lists(outputs, inputs, fn_name)
    check_types(outputs, result_types, "output", "result", fn_name)
    check_types(inputs, parameter_types, "input", "parameter", fn_name)
    ranges: list[tuple[object, int, int]] = []
    for what, tensors, writeable in (("input", inputs, False), ("output", outputs, True)):
        for i, tensor in enumerate(tensors):
            tensor.check_storage(f"{fn_name}: {what} {i}", writeable)
            memory = tensor.memory_range()
            if memory[0] is not HOST and memory[0] is not device:
                raise CallTypeError(
                    f"{fn_name}: {what} {i} is {tensor!r}, in memory this executable cannot "
                    "address; read() copies it to the host, or use the backend that made it"
                )
            ranges.append(memory)
    check_aliasing(outputs, inputs, ranges, fn_name)


def check_lists(outputs: Any, inputs: Any, fn_name: str) -> None:
    """``outputs`` and ``inputs`` must be sequences (lists or tuples) of tensors."""
    for what, value in (("outputs", outputs), ("inputs", inputs)):
        if isinstance(value, Tensor | np.ndarray | str | bytes) or not isinstance(value, Sequence):
            raise CallTypeError(
                f"{fn_name}: call(outputs, inputs) takes two lists of Tensors (outputs first); "
                f"{what} is a {type(value).__name__}. Wrap single tensors in lists: "
                "exe.call([out], [x])"
            )


def check_types(
    tensors: Sequence[Tensor],
    types: Sequence[TensorType],
    what: str,
    role: str,
    fn_name: str,
) -> None:
    """Count, class, element type and shape of each tensor against ``types``."""
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


def check_aliasing(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    ranges: Sequence[tuple[object, int, int]],
    fn_name: str,
) -> None:
    """Raise AliasingError when a result tensor overlaps another result or an argument.

    ``ranges`` holds each tensor's ``(space, address, bytes)`` (:meth:`Tensor.memory_range`),
    the inputs then the outputs: only ranges in the same address space can overlap."""
    positions: dict[int, int] = {}
    tensors = (*inputs, *outputs)
    for k, tensor in enumerate(tensors):
        earlier = positions.setdefault(id(tensor), k)
        if earlier != k and k >= len(inputs):  # the same tensor twice, empty ones included
            _raise_aliasing(earlier, k, len(inputs), fn_name)
    num_inputs = len(inputs)
    groups: dict[object, list[int]] = {}
    for k, (space, _, _) in enumerate(ranges):
        groups.setdefault(space, []).append(k)
    for members in groups.values():  # each in increasing order: its inputs come first
        inputs_here = sum(1 for k in members if k < num_inputs)
        spans = [(ranges[k][1], ranges[k][2]) for k in members]
        pair = overlapping_pair(spans, inputs_here)
        if pair is not None:
            _raise_aliasing(members[pair[0]], members[pair[1]], num_inputs, fn_name)


def overlapping_pair(spans: Sequence[tuple[int, int]], first_output: int) -> tuple[int, int] | None:
    """Positions ``(j, k)``, ``j < k``, of two overlapping non-empty spans at least one of
    which is an output (position ``>= first_output``), or None.

    Few spans are compared pairwise; more are sorted by address and swept once, keeping the
    farthest end seen so far (over all spans, and over outputs): O(n log n)."""
    n = len(spans)
    if n <= PAIRWISE_LIMIT:
        for k in range(first_output, n):
            p, size = spans[k]
            for j in range(k):
                q, other = spans[j]
                if size and other and p < q + other and q < p + size:
                    return j, k
        return None
    order = sorted((start, k) for k, (start, size) in enumerate(spans) if size)
    end_all, at_all, end_out, at_out = -1, -1, -1, -1
    for start, k in order:
        is_output = k >= first_output
        if start < end_all and is_output:
            return min(at_all, k), max(at_all, k)
        if start < end_out:
            return min(at_out, k), max(at_out, k)
        end = start + spans[k][1]
        if end > end_all:
            end_all, at_all = end, k
        if is_output and end > end_out:
            end_out, at_out = end, k
    return None


def _raise_aliasing(j: int, k: int, num_inputs: int, fn_name: str) -> None:
    if j >= num_inputs:
        raise AliasingError(
            f"{fn_name}: outputs {j - num_inputs} and {k - num_inputs} share memory; each result "
            "needs its own tensor"
        )
    if k < num_inputs:  # pragma: no cover - inputs may overlap each other
        return
    raise AliasingError(
        f"{fn_name}: output {k - num_inputs} shares memory with input {j}; an argument tensor "
        "may not also receive a result"
    )
