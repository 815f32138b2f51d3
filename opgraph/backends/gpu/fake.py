"""A fake device: the GPU backend's runtime interface over numpy, for machines without a GPU.

Device memory is numpy byte arrays at made-up addresses (high, 256-byte aligned, with a gap
after each allocation), so pointers are plain integers as on CUDA and the executable's
address arithmetic runs for real. Every access a kernel launch or a GEMM makes is resolved
from its pointer and checked against the allocation it points into (an out-of-bounds view
raises :class:`FakeDeviceError`). Transfers are explicit copies between host arrays and
device arrays, counted in :attr:`FakeDevice.stats`.

What a kernel computes comes from its ``spec``, not its CUDA source: a fused loop kernel is
interpreted with the reference kernels (:mod:`opgraph.backends.gpu.interpret`), an im2col,
pooling or integer product by numpy. So the fake device tests placement, transfers, the
memory plan on both sides, kernel parameters and launch shapes, and the call path — and not
the CUDA source (the golden and nvcc tests do that) nor timing, streams or concurrency on a
real device.
"""

from __future__ import annotations

import bisect
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import opgraph.backends.gpu.interpret as interpret
from opgraph.backends.fused.program import LoopKernel
from opgraph.backends.fused.views import static_all
from opgraph.backends.gpu.blas import Operand, plan_gemm
from opgraph.backends.gpu.cuda.kernel import CudaKernel, Im2Col, IntGemm, Pool
from opgraph.backends.gpu.device import Strided, TransferStats, cuda_array_interface
from opgraph.core import element_type
from opgraph.core.element_type import ElementType
from opgraph.core.errors import ExecutionError, OpgraphError
from opgraph.core.registry import Registry

_BASE = 0x7F00_0000_0000
_ALIGN = 256


class FakeDeviceError(OpgraphError, RuntimeError):
    """The fake device caught a bad access (a GPU backend bug)."""


class FakeBuffer:
    """Fake device memory: ``ptr`` and a numpy byte array behind it."""

    __slots__ = ("__weakref__", "data", "nbytes", "ptr")

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.data = np.zeros(max(nbytes, 1), np.uint8)


@dataclass(frozen=True)
class FakeModule:
    """A "compiled" module: its source and kernel names."""

    source: str
    names: tuple[str, ...]


class FakeArray:
    """A device array handed out by :meth:`FakeDevice.array` (exposes
    ``__cuda_array_interface__``, as a CuPy array does)."""

    def __init__(self, buffer: FakeBuffer, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.buffer = buffer
        self.shape = shape
        self.dtype = dtype

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.buffer.ptr, False),
            "strides": None,
            "version": 3,
        }


#: How the fake device computes each kind of kernel: ``run(kernel, arrays_by_parameter)``.
FAKE_KERNELS: Registry[type, Callable[[CudaKernel, dict[str, np.ndarray]], None]] = Registry(
    "fake-device kernel"
)


class FakeDevice:
    """The device runtime interface (:class:`~opgraph.backends.gpu.device.DeviceRuntime`)
    on numpy.

    Args:
        unsupported: step classes the device pretends to lack (their steps go to the host).
        max_blocks: the grid limit kernels are launched with.
    """

    name = "fake"

    def __init__(self, unsupported: Iterable[type] = (), max_blocks: int = 8) -> None:
        self.unsupported = frozenset(unsupported)
        self._max_blocks = max_blocks
        self.stats = TransferStats()
        self.launches: list[tuple[str, int, int]] = []  # (kernel, grid, block)
        self.gemms = 0
        self.modules: list[FakeModule] = []
        self._lock = threading.RLock()  # weakref callbacks may run while it is held
        self._next = _BASE
        self._starts: list[int] = []
        self._live: dict[int, weakref.ref[FakeBuffer]] = {}

    @property
    def max_blocks(self) -> int:
        return self._max_blocks

    def supports(self, step_class: type) -> bool:
        return step_class not in self.unsupported

    # ------------------------------------------------------------------------ memory
    def allocate(self, nbytes: int) -> FakeBuffer:
        with self._lock:
            ptr = self._next
            self._next += (max(nbytes, 1) + 2 * _ALIGN - 1) // _ALIGN * _ALIGN  # and a gap
            buffer = FakeBuffer(ptr, nbytes)
            bisect.insort(self._starts, ptr)
            self._live[ptr] = weakref.ref(buffer, self._forget(ptr))
            return buffer

    def _forget(self, ptr: int) -> Callable[[Any], None]:
        def forget(_: Any) -> None:
            with self._lock:
                self._live.pop(ptr, None)
                at = bisect.bisect_left(self._starts, ptr)
                if at < len(self._starts) and self._starts[at] == ptr:
                    del self._starts[at]

        return forget

    def buffer_at(self, ptr: int) -> FakeBuffer:
        """The live allocation containing address ``ptr`` (or ending exactly there)."""
        with self._lock:
            at = bisect.bisect_right(self._starts, ptr) - 1
            ref = self._live.get(self._starts[at]) if at >= 0 else None
        buffer = ref() if ref is not None else None
        if buffer is None or ptr > buffer.ptr + buffer.nbytes:
            raise FakeDeviceError(f"address {ptr:#x} is in no live device allocation")
        return buffer

    def view(self, s: Strided) -> np.ndarray:
        """The numpy view of strided device array ``s`` (bounds-checked)."""
        buffer = self.buffer_at(s.ptr)
        try:
            return np.ndarray(
                s.shape,
                s.element_type.dtype,
                buffer=buffer.data[: buffer.nbytes],
                offset=s.ptr - buffer.ptr,
                strides=s.byte_strides,
            )
        except (ValueError, TypeError) as error:
            raise FakeDeviceError(
                f"{s.element_type.name}{list(s.shape)} with strides {list(s.strides)} at "
                f"{s.ptr:#x} reaches outside its allocation ({buffer.nbytes} bytes at "
                f"{buffer.ptr:#x}): {error}"
            ) from None

    def bytes_at(self, ptr: int, nbytes: int) -> np.ndarray:
        return self.view(Strided(ptr, _U8, (nbytes,), (1,)))

    def array(self, data: np.ndarray) -> FakeArray:
        """A device copy of ``data`` (for tests handing the backend device arrays)."""
        data = np.ascontiguousarray(data)
        buffer = self.allocate(data.nbytes)
        buffer.data[: data.nbytes] = data.reshape(-1).view(np.uint8)
        return FakeArray(buffer, data.shape, data.dtype)

    def foreign(self, obj: Any) -> tuple[int, tuple[int, ...], np.dtype[Any], Any]:
        ptr, shape, dtype = cuda_array_interface(obj)
        return ptr, shape, dtype, obj

    # --------------------------------------------------------------------- transfers
    def new_stream(self) -> object:
        return object()

    def synchronize(self, stream: Any) -> None:
        return None

    def upload(self, host: np.ndarray, ptr: int, stream: Any) -> None:
        self.stats.count(True, host.nbytes)
        self.bytes_at(ptr, host.nbytes)[...] = host.reshape(-1).view(np.uint8)

    def download(self, ptr: int, host: np.ndarray, stream: Any) -> None:
        self.stats.count(False, host.nbytes)
        host.reshape(-1).view(np.uint8)[...] = self.bytes_at(ptr, host.nbytes)

    def copy(self, target: int, source: int, nbytes: int, stream: Any) -> None:
        self.bytes_at(target, nbytes)[...] = self.bytes_at(source, nbytes)

    def zero(self, ptr: int, nbytes: int, stream: Any) -> None:
        self.bytes_at(ptr, nbytes)[...] = 0

    # ----------------------------------------------------------------------- kernels
    def compile(self, source: str, names: Sequence[str]) -> FakeModule:
        for name in names:
            if not re.search(
                rf'extern "C" __global__ void __launch_bounds__\(\d+\) {name}\(', source
            ):
                raise FakeDeviceError(f"kernel {name} is not defined in the module source")
        module = FakeModule(source, tuple(names))
        self.modules.append(module)
        return module

    def launch(
        self, module: Any, kernel: CudaKernel, grid: int, args: Sequence[int], stream: Any
    ) -> None:
        if kernel.name not in module.names:
            raise FakeDeviceError(f"kernel {kernel.name} is not in the module")
        expected = len(kernel.params) + (1 if kernel.checks else 0)
        if len(args) != expected or not 1 <= grid <= self._max_blocks:
            raise FakeDeviceError(f"bad launch of {kernel.name}: {len(args)} args, grid {grid}")
        self.launches.append((kernel.name, grid, kernel.block))
        arrays = {
            p.name: self.view(
                Strided(
                    ptr,
                    p.view.element_type,
                    static_all(p.view.shape),
                    static_all(p.view.strides),
                )
            )
            for p, ptr in zip(kernel.params, args, strict=False)
        }
        try:
            FAKE_KERNELS[type(kernel.spec)](kernel, arrays)
        except ExecutionError as error:
            if not kernel.checks:
                raise
            self._flag(kernel, args[-1], str(error))

    def _flag(self, kernel: CudaKernel, err_ptr: int, message: str) -> None:
        """A reference kernel refused a value: set the bit of the matching check, as the
        CUDA kernel's ``og_flag`` would."""
        bit = next((i for i, c in enumerate(kernel.checks) if c.message in message), 0)
        word = self.view(Strided(err_ptr, _I32, (1,), (1,)))
        word[0] |= np.int32(1 << bit)

    def gemm(self, a: Strided, b: Strided, c: Strided, stream: Any) -> None:
        """The cuBLAS call :func:`~opgraph.backends.gpu.blas.plan_gemm` plans, run on numpy
        with cuBLAS's column-major meaning (``matmul`` on the operands where it has none)."""
        self.gemms += 1
        plan = plan_gemm(a, b, c)
        if plan is None:
            interpret.matmul(self.view(a), self.view(b), self.view(c))
            return
        t = c.element_type
        first = self._column_major(plan.a, t, (plan.m, plan.k), plan.batch)
        second = self._column_major(plan.b, t, (plan.k, plan.n), plan.batch)
        out = self.view(
            Strided(plan.c_ptr, t, (plan.batch, plan.m, plan.n), (plan.c_stride, 1, plan.ldc))
        )
        interpret.matmul(first, second, out)

    def _column_major(
        self, operand: Operand, t: ElementType, shape: tuple[int, int], batch: int
    ) -> np.ndarray:
        """``op(X)`` of a cuBLAS operand whose result is ``shape`` (rows, cols)."""
        rows, cols = shape[::-1] if operand.trans else shape
        stored = self.view(
            Strided(operand.ptr, t, (batch, rows, cols), (operand.stride, 1, operand.ld))
        )
        return stored.transpose(0, 2, 1) if operand.trans else stored


def _fake_loop(kernel: CudaKernel, arrays: dict[str, np.ndarray]) -> None:
    assert isinstance(kernel.spec, LoopKernel)
    interpret.run_loop_kernel(kernel.spec, arrays)


def _fake_im2col(kernel: CudaKernel, arrays: dict[str, np.ndarray]) -> None:
    assert isinstance(kernel.spec, Im2Col)
    interpret.run_im2col(kernel.spec, arrays["p0"], arrays["q0"])


def _fake_pool(kernel: CudaKernel, arrays: dict[str, np.ndarray]) -> None:
    assert isinstance(kernel.spec, Pool)
    interpret.run_pool(kernel.spec, arrays["p0"], arrays["q0"])


def _fake_int_gemm(kernel: CudaKernel, arrays: dict[str, np.ndarray]) -> None:
    assert isinstance(kernel.spec, IntGemm)
    interpret.run_int_gemm(kernel.spec, arrays["p0"], arrays["p1"], arrays["q0"])


FAKE_KERNELS.add(LoopKernel, _fake_loop)
FAKE_KERNELS.add(Im2Col, _fake_im2col)
FAKE_KERNELS.add(Pool, _fake_pool)
FAKE_KERNELS.add(IntGemm, _fake_int_gemm)


def _element(name: str) -> ElementType:

    return element_type.from_name(name)


_U8 = _element("u8")
_I32 = _element("i32")
