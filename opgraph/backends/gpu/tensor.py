"""Device tensors, and the call checks for calls that mix host and device tensors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.backends.gpu.device import DeviceBuffer, DeviceRuntime
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import AliasingError, CallTypeError, GraphError
from opgraph.core.shape import as_shape
from opgraph.core.tensor_type import TensorType
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import validate_call


class DeviceTensor(Tensor):
    """A tensor in device memory (``GpuBackend.create_tensor``): ``write`` copies from the
    host, ``read`` back to it. It has no host ``buffer``. Executables read and write it in
    place; it is exported zero-copy through ``__cuda_array_interface__``."""

    __slots__ = ("_memory", "ptr", "runtime")

    def __init__(
        self,
        runtime: DeviceRuntime,
        element_type: Any,
        shape: Any,
        memory: DeviceBuffer | None = None,
        ptr: int | None = None,
        keep_alive: Any = None,
    ) -> None:
        element = as_element_type(element_type)
        dims = as_shape(shape)
        self.type = TensorType(element, dims)
        self.runtime = runtime
        if ptr is None:
            memory = memory or runtime.allocate(self.type.nbytes)
            ptr = memory.ptr
            runtime.zero(ptr, self.type.nbytes, None)
        self._memory = memory if memory is not None else keep_alive
        self.ptr = ptr

    @property
    def buffer(self) -> np.ndarray:  # type: ignore[override]
        raise GraphError(
            f"{self!r} lives in device memory and has no host buffer; read() copies it"
        )

    @property
    def nbytes(self) -> int:
        return self.type.nbytes

    def write(self, value: Any) -> None:
        """Copy ``value`` (an array of exactly this type) from the host to the device."""
        staging = Tensor(self.element_type, self.shape)
        staging.write(value)
        self.runtime.upload(staging.buffer, self.ptr, None)

    def read(self) -> np.ndarray:
        """A host copy of the contents."""
        host = np.empty(self.shape, self.element_type.dtype)
        self.runtime.download(self.ptr, host, None)
        return host

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": self.element_type.dtype.str,
            "data": (self.ptr, False),
            "strides": None,
            "version": 3,
        }

    def __repr__(self) -> str:
        return f"<DeviceTensor {self.type} on {self.runtime.name}>"


def wrap_device_array(
    runtime: DeviceRuntime, element_type: ElementType, shape: Any, obj: Any
) -> DeviceTensor:
    """A DeviceTensor over a caller's C-contiguous device array, zero-copy."""
    ptr, found_shape, dtype, keep = runtime.foreign(obj)
    dims = as_shape(shape)
    if dtype.itemsize != element_type.itemsize or (
        dtype != element_type.dtype and element_type.dtype.kind != "V"
    ):
        raise CallTypeError(
            f"create_tensor: device array dtype {dtype} does not match element type "
            f"{element_type.name} ({element_type.dtype})"
        )
    if int(np.prod(found_shape)) != int(np.prod(dims)):
        raise GraphError(
            f"create_tensor: device array shape {list(found_shape)} does not match {list(dims)}"
        )
    return DeviceTensor(runtime, element_type, dims, ptr=ptr, keep_alive=keep)


def check_call(
    outputs: Sequence[Tensor],
    inputs: Sequence[Tensor],
    result_types: Sequence[TensorType],
    parameter_types: Sequence[TensorType],
    fn_name: str,
) -> None:
    """The checks of ``runtime.validation.validate_call``, for host and device tensors:
    counts, types and shapes, then aliasing (device tensors by address range)."""
    device = [t for t in (*outputs, *inputs) if isinstance(t, DeviceTensor)]
    if not device:
        validate_call(outputs, inputs, result_types, parameter_types, fn_name)
        return
    host = [t for t in (*outputs, *inputs) if not isinstance(t, DeviceTensor)]
    _check_types(outputs, result_types, "output", "result", fn_name)
    _check_types(inputs, parameter_types, "input", "parameter", fn_name)
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
    del host


def _check_types(
    tensors: Sequence[Tensor], types: Sequence[TensorType], what: str, role: str, fn_name: str
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


def _overlap(a: Tensor, b: Tensor) -> bool:
    if a is b:
        return True
    a_dev, b_dev = isinstance(a, DeviceTensor), isinstance(b, DeviceTensor)
    if a_dev != b_dev:
        return False
    if a_dev and b_dev:
        assert isinstance(a, DeviceTensor) and isinstance(b, DeviceTensor)
        if a.runtime is not b.runtime or not a.nbytes or not b.nbytes:
            return False
        return a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes
    if a.buffer.size == 0 or b.buffer.size == 0:
        return False
    return bool(np.may_share_memory(a.buffer, b.buffer))
