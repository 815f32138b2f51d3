"""Host tensors: typed, shaped, row-major buffers that Executables read and write."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.core.element_type import ElementType, as_element_type
from opgraph.core.errors import CallTypeError, GraphError
from opgraph.core.literals import check_fits
from opgraph.core.shape import Shape, as_shape
from opgraph.core.tensor_type import TensorType

#: The address space of host memory in :meth:`Tensor.memory_range` (a device's is its runtime).
HOST = "host"


class Tensor:
    """A host tensor. ``buffer`` is a C-contiguous, writeable numpy array of exactly the
    element type's dtype and the tensor's shape; it is owned by the tensor or wraps the
    caller's array zero-copy.

    The tensor keeps its own *view* of the array, which cannot be resized (it does not own its
    data), so the memory it points at stays put. Assigning ``buffer`` runs the checks of
    ``create_tensor``; the array's flags and metadata can still be changed in place, so every
    ``Executable.call`` checks each buffer again (``runtime.validation``) before any write.
    """

    __slots__ = ("_buffer", "type")

    type: TensorType
    _buffer: np.ndarray

    def __init__(self, element_type: Any, shape: Any, buffer: np.ndarray | None = None) -> None:
        et = as_element_type(element_type)
        dims = as_shape(shape)
        self.type = TensorType(et, dims)
        if buffer is None:
            self._buffer = np.zeros(dims, et.dtype).view()
        else:
            self._buffer = _wrap(buffer, et, dims, "create_tensor")

    @property
    def buffer(self) -> np.ndarray:
        """The array holding the values (zero-copy: writes to it change the tensor)."""
        return self._buffer

    @buffer.setter
    def buffer(self, array: np.ndarray) -> None:
        # Validated like create_tensor: a short, strided, read-only or wrongly typed array
        # would otherwise let a backend write past it or into immutable memory.
        self._buffer = _wrap(array, self.element_type, self.shape, "Tensor.buffer")

    @property
    def element_type(self) -> ElementType:
        return self.type.element_type

    @property
    def shape(self) -> Shape:
        return self.type.shape  # type: ignore[return-value]  # a tensor's shape is static

    def write(self, value: Any) -> None:
        """Copy ``value`` (an array of this tensor's shape) into the tensor.

        Raises:
            CallTypeError: the array's dtype differs from the element type's (no conversion).
            GraphError: the shape differs.
        """
        array = np.asarray(value)
        if not isinstance(value, np.ndarray | np.generic):
            array = _from_python(value, self.element_type)
        if array.dtype != self.element_type.dtype:
            raise CallTypeError(
                f"Tensor.write: array dtype {array.dtype} does not match element type "
                f"{self.element_type.name} ({self.element_type.dtype}); convert it first"
            )
        if array.shape != self.shape:
            raise GraphError(
                f"Tensor.write: array shape {list(array.shape)} does not match tensor shape "
                f"{list(self.shape)}"
            )
        np.copyto(self.buffer, array)

    def read(self) -> np.ndarray:
        """A copy of the contents as a numpy array."""
        return self.buffer.copy()

    def check_storage(self, where: str, writeable: bool) -> None:
        """Raise ``CallTypeError`` unless the storage holds exactly this tensor's type and can
        be read (and written, when ``writeable``) in place by a backend.

        For a host tensor: its buffer is a C-contiguous numpy array of exactly the type's
        dtype, shape and byte size, writeable for results. The array's metadata and flags can
        be changed in place after the tensor was made, hence a check on every call."""
        buffer = getattr(self, "_buffer", None)
        expected = self.type
        dtype = expected.element_type.dtype
        if not isinstance(buffer, np.ndarray):
            raise CallTypeError(
                f"{where}: its buffer must be a numpy array, found {type(buffer).__name__}"
            )
        if buffer.dtype != dtype:
            raise CallTypeError(
                f"{where}: buffer dtype is {buffer.dtype}, the tensor's type {expected} needs "
                f"{dtype}"
            )
        if buffer.shape != expected.shape or buffer.nbytes != expected.nbytes:
            raise CallTypeError(
                f"{where}: buffer is {list(buffer.shape)} ({buffer.nbytes} bytes), the tensor's "
                f"type {expected} needs {list(expected.shape)} ({expected.nbytes} bytes)"
            )
        if not buffer.flags.c_contiguous:
            raise CallTypeError(
                f"{where}: buffer is not C-contiguous (strides {buffer.strides}); wrap a "
                "contiguous array (np.ascontiguousarray)"
            )
        if writeable and not buffer.flags.writeable:
            raise CallTypeError(
                f"{where}: buffer is read-only, and a result tensor must be writeable"
            )

    def memory_range(self) -> tuple[object, int, int]:
        """``(space, address, bytes)`` of the storage, after :meth:`check_storage`: two
        tensors share memory exactly when their ranges overlap within one address space
        (``HOST`` here; a device tensor's runtime). Host buffers are C-contiguous, so the
        range is exact, as ``np.may_share_memory`` would find."""
        buffer = self._buffer
        return HOST, buffer.__array_interface__["data"][0], buffer.nbytes

    def __repr__(self) -> str:
        return f"<Tensor {self.type}>"


def _from_python(value: Any, et: ElementType) -> np.ndarray:

    array = np.asarray(value)
    check_fits(array, et)
    return array.astype(et.dtype)


def _wrap(buffer: Any, et: ElementType, shape: Shape, where: str) -> np.ndarray:
    """A view of ``buffer`` with ``shape`` after checking it can back a tensor of that type."""
    if not isinstance(buffer, np.ndarray):
        raise CallTypeError(f"{where}: buffer must be a numpy array, got {type(buffer).__name__}")
    if buffer.dtype != et.dtype:
        raise CallTypeError(
            f"{where}: buffer dtype {buffer.dtype} does not match element type {et.name} "
            f"({et.dtype})"
        )
    if not buffer.flags.c_contiguous:
        raise GraphError(f"{where}: buffer must be C-contiguous (use np.ascontiguousarray)")
    if not buffer.flags.writeable:
        raise GraphError(f"{where}: buffer must be writeable")
    if buffer.shape != shape and buffer.size != int(np.prod(shape)):
        raise GraphError(f"{where}: buffer shape {list(buffer.shape)} does not match {list(shape)}")
    # A view (still zero-copy) that cannot be resized, so its data address never changes.
    return buffer.reshape(shape)
