"""Device tensors, and the call checks for calls that mix host and device tensors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.backends.gpu.device import DeviceBuffer, DeviceRuntime
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import CallTypeError, GraphError
from opgraph.core.shape import as_shape
from opgraph.core.tensor_type import TensorType
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import (
    check_aliasing,
    check_buffer,
    check_lists,
    check_types,
    host_span,
    validate_call,
)


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
    def buffer(self) -> np.ndarray:
        raise GraphError(
            f"{self!r} lives in device memory and has no host buffer; read() copies it"
        )

    @buffer.setter
    def buffer(self, array: np.ndarray) -> None:
        raise GraphError(f"{self!r} lives in device memory; write() copies an array into it")

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
    counts, types and shapes, host buffers, then aliasing (by address range within host
    memory and within each device; linear in the number of tensors)."""
    check_lists(outputs, inputs, fn_name)
    if not any(isinstance(t, DeviceTensor) for t in (*outputs, *inputs)):
        validate_call(outputs, inputs, result_types, parameter_types, fn_name)
        return
    check_types(outputs, result_types, "output", "result", fn_name)
    check_types(inputs, parameter_types, "input", "parameter", fn_name)
    for what, tensors, writeable in (("input", inputs, False), ("output", outputs, True)):
        for i, tensor in enumerate(tensors):
            if not isinstance(tensor, DeviceTensor):
                check_buffer(tensor, tensor.type, f"{fn_name}: {what} {i}", writeable)
    spans: list[tuple[int, int]] = []
    spaces: list[object] = []
    for tensor in (*inputs, *outputs):
        if isinstance(tensor, DeviceTensor):
            spans.append((tensor.ptr, tensor.nbytes))
            spaces.append(tensor.runtime)
        else:
            spans.append(host_span(tensor))
            spaces.append(None)
    check_aliasing(outputs, inputs, spans, fn_name, spaces)
