"""The device runtime interface: what the GPU executable needs from a device.

Two implementations: :class:`~opgraph.backends.gpu.cupy_device.CupyDevice` (CUDA through
CuPy: memory pool, streams, NVRTC, cuBLAS) and :class:`~opgraph.backends.gpu.fake.FakeDevice`
(numpy memory at made-up addresses, for the tests on machines without a GPU). Device memory
is addressed by plain integers, as CUDA addresses it; a runtime owns every allocation it
hands out until the returned :class:`DeviceBuffer` is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from opgraph.backends.gpu.cuda.kernel import CudaKernel
from opgraph.core.element_type import ElementType
from opgraph.core.errors import GraphError, OpgraphError


class GpuUnavailableError(OpgraphError, RuntimeError):
    """The GPU backend cannot run here (no CuPy, no CUDA device, or a driver error)."""


class DeviceBuffer(Protocol):
    """Device memory: ``ptr`` is the address of its first byte; alive while referenced."""

    @property
    def ptr(self) -> int: ...

    @property
    def nbytes(self) -> int: ...


@dataclass(frozen=True)
class Strided:
    """A strided device array: ``ptr`` is element 0; strides are in elements."""

    ptr: int
    element_type: ElementType
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @property
    def byte_strides(self) -> tuple[int, ...]:
        return tuple(s * self.element_type.itemsize for s in self.strides)


@dataclass
class TransferStats:
    """Host↔device copies made by a runtime (thread-safe counters)."""

    h2d: int = 0
    h2d_bytes: int = 0
    d2h: int = 0
    d2h_bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, to_device: bool, nbytes: int) -> None:
        with self.lock:
            if to_device:
                self.h2d += 1
                self.h2d_bytes += nbytes
            else:
                self.d2h += 1
                self.d2h_bytes += nbytes

    def snapshot(self) -> tuple[int, int, int, int]:
        """(h2d, h2d_bytes, d2h, d2h_bytes)."""
        with self.lock:
            return self.h2d, self.h2d_bytes, self.d2h, self.d2h_bytes


class DeviceRuntime(Protocol):
    """A device the GPU executable can run on."""

    name: str
    stats: TransferStats

    @property
    def max_blocks(self) -> int:
        """The most blocks a grid-stride kernel should launch (a few per multiprocessor)."""

    def supports(self, step_class: type) -> bool:
        """Whether steps of this class may be placed on the device."""

    def allocate(self, nbytes: int) -> DeviceBuffer:
        """Device memory of ``nbytes`` bytes (at least 256-byte aligned)."""

    def new_stream(self) -> Any:
        """A stream for one call context."""

    def upload(self, host: np.ndarray, ptr: int, stream: Any) -> None:
        """Copy the C-contiguous ``host`` array to device address ``ptr`` (counted)."""

    def download(self, ptr: int, host: np.ndarray, stream: Any) -> None:
        """Copy device bytes at ``ptr`` into the C-contiguous ``host`` array (counted); when
        this returns, ``host`` holds the data."""

    def copy(self, target: int, source: int, nbytes: int, stream: Any) -> None:
        """Copy device to device."""

    def zero(self, ptr: int, nbytes: int, stream: Any) -> None:
        """Set device bytes to zero."""

    def compile(self, source: str, names: Sequence[str]) -> Any:
        """Compile a CUDA module and load the kernels ``names`` (cached by source)."""

    def launch(
        self, module: Any, kernel: CudaKernel, grid: int, args: Sequence[int], stream: Any
    ) -> None:
        """Launch ``kernel``: ``args`` are its pointer parameters (and error word)."""

    def gemm(self, a: Strided, b: Strided, c: Strided, stream: Any) -> None:
        """``c = a @ b`` for f32/f64 matrices (2-D) or batches of them (3-D, equal batch
        sizes; a batch stride of 0 broadcasts that operand)."""

    def synchronize(self, stream: Any) -> None:
        """Wait until the stream's work is done."""

    def foreign(self, obj: Any) -> tuple[int, tuple[int, ...], np.dtype[Any], Any]:
        """(address, shape, dtype, keep-alive) of a C-contiguous device array object
        (``__cuda_array_interface__``, or DLPack where the runtime supports it)."""


def cuda_array_interface(obj: Any) -> tuple[int, tuple[int, ...], np.dtype[Any]]:
    """Address, shape and dtype from an object's ``__cuda_array_interface__`` (version 2 or
    3); raises unless the array is C-contiguous."""

    info = getattr(obj, "__cuda_array_interface__", None)
    if not isinstance(info, dict):
        raise GraphError(
            f"create_tensor: {type(obj).__name__} is neither a numpy array nor a device array "
            "(no __cuda_array_interface__)"
        )
    shape = tuple(int(d) for d in info["shape"])
    dtype = np.dtype(info["typestr"])
    strides = info.get("strides")
    dense = _dense_strides(shape, dtype.itemsize)
    if strides is not None and tuple(strides) != dense and int(np.prod(shape)) > 1:
        raise GraphError("create_tensor: the device array must be C-contiguous")
    return int(info["data"][0]), shape, dtype


def _dense_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return tuple(reversed(strides))


def extent(s: Strided) -> tuple[int, int]:
    """(lowest, highest + 1) byte offsets from ``s.ptr`` that ``s`` touches."""
    if any(d == 0 for d in s.shape):
        return 0, 0
    low = sum(min(0, (d - 1) * b) for d, b in zip(s.shape, s.byte_strides, strict=True))
    high = sum(max(0, (d - 1) * b) for d, b in zip(s.shape, s.byte_strides, strict=True))
    return low, high + s.element_type.itemsize
