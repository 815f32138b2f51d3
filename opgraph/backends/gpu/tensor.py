"""Device tensors: device memory that answers the call checks as host tensors do."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.gpu.device import DeviceBuffer, DeviceRuntime
from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import CallTypeError, GraphError
from opgraph.core.shape import as_shape
from opgraph.core.tensor_type import TensorType
from opgraph.runtime.tensor import Tensor


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

    def check_storage(self, where: str, writeable: bool) -> None:
        """Nothing to check: the device memory was allocated for exactly this type, or a
        caller's device array was checked against it when wrapped, and neither can change."""

    def memory_range(self) -> tuple[object, int, int]:
        """``(runtime, address, bytes)``: device tensors overlap only within one device."""
        return self.runtime, self.ptr, self.nbytes

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
