"""The CUDA device runtime, through CuPy: memory from CuPy's pool, streams, NVRTC compilation
of generated modules (``cupy.RawModule``), launches, and cuBLAS products (``cupy.matmul``).

Importing this module does not import CuPy; constructing :class:`CupyDevice` does (and fails
with :class:`~opgraph.backends.gpu.device.GpuUnavailableError` when it cannot). One
CupyDevice per CUDA device is shared by every executable (:func:`cupy_device`), so they
share its memory pool and compiled-module cache.

Run on an NVIDIA H200 (2026-11-26): see ``docs/gpu.md``, "Verified on a GPU".
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.backends.gpu.blas import GemmPlan, plan_gemm
from opgraph.backends.gpu.cuda.kernel import CudaKernel
from opgraph.backends.gpu.device import (
    GpuUnavailableError,
    Strided,
    TransferStats,
    cuda_array_interface,
    extent,
)
from opgraph.core.errors import OpgraphError

#: Blocks per multiprocessor a grid-stride kernel launches at most.
BLOCKS_PER_SM = 32


class GpuCompileError(OpgraphError, RuntimeError):
    """NVRTC rejected a generated module (a GPU backend bug)."""


class CupyBuffer:
    """Device memory from CuPy's pool (returned to the pool when dropped)."""

    __slots__ = ("memory", "nbytes", "ptr")

    def __init__(self, memory: Any, nbytes: int) -> None:
        self.memory = memory
        self.nbytes = nbytes
        self.ptr = int(memory.ptr)


class CupyDevice:
    """The :class:`~opgraph.backends.gpu.device.DeviceRuntime` of one CUDA device.

    Args:
        device_id: the CUDA device ordinal.

    Raises:
        GpuUnavailableError: CuPy is missing or the device cannot be used.
    """

    def __init__(self, device_id: int = 0) -> None:
        try:
            # deferred: cupy is an optional dependency (and slow to import)
            import cupy
        except ImportError as error:
            raise GpuUnavailableError(
                "the GPU backend needs CuPy (pip install 'opgraph[gpu]')"
            ) from error
        self.cp: Any = cupy
        try:
            self.device = cupy.cuda.Device(device_id)
            properties = cupy.cuda.runtime.getDeviceProperties(device_id)
        except Exception as error:  # CUDARuntimeError: no device, driver too old, …
            raise GpuUnavailableError(f"CUDA device {device_id} is not usable: {error}") from error
        raw_name = properties.get("name", b"CUDA device")
        self.name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
        self._max_blocks = int(properties.get("multiProcessorCount", 1)) * BLOCKS_PER_SM
        self.stats = TransferStats()
        self._modules: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.options = _compile_options(cupy)
        self._cublas = _cublas_module()
        #: (one, zero) host scalars for cuBLAS's alpha and beta, per (f32, f64)
        self._scalars = {
            double: (np.ones(1, dtype), np.zeros(1, dtype))
            for double, dtype in ((False, np.float32), (True, np.float64))
        }

    @property
    def max_blocks(self) -> int:
        return self._max_blocks

    def supports(self, step_class: type) -> bool:
        return True

    # ------------------------------------------------------------------------ memory
    def allocate(self, nbytes: int) -> CupyBuffer:
        with self.device:
            return CupyBuffer(self.cp.cuda.alloc(max(nbytes, 1)), nbytes)

    def new_stream(self) -> Any:
        """A blocking stream: it orders itself after work on the legacy default stream (where
        CuPy arrays a caller passes in were computed), and calls on different streams still
        overlap."""
        with self.device:
            return self.cp.cuda.Stream(non_blocking=False)

    def upload(self, host: np.ndarray, ptr: int, stream: Any) -> None:
        host = np.ascontiguousarray(host)
        self.stats.count(True, host.nbytes)
        if host.nbytes:
            runtime = self.cp.cuda.runtime
            runtime.memcpyAsync(
                ptr, host.ctypes.data, host.nbytes, runtime.memcpyHostToDevice, _ptr(stream)
            )
            self.synchronize(stream)  # the host array may be reused at once

    def download(self, ptr: int, host: np.ndarray, stream: Any) -> None:
        assert host.flags.c_contiguous
        self.stats.count(False, host.nbytes)
        if host.nbytes:
            runtime = self.cp.cuda.runtime
            runtime.memcpyAsync(
                host.ctypes.data, ptr, host.nbytes, runtime.memcpyDeviceToHost, _ptr(stream)
            )
            self.synchronize(stream)

    def copy(self, target: int, source: int, nbytes: int, stream: Any) -> None:
        if nbytes:
            runtime = self.cp.cuda.runtime
            runtime.memcpyAsync(target, source, nbytes, runtime.memcpyDeviceToDevice, _ptr(stream))

    def zero(self, ptr: int, nbytes: int, stream: Any) -> None:
        if nbytes:
            self.cp.cuda.runtime.memsetAsync(ptr, 0, nbytes, _ptr(stream))
            if stream is None:  # outside a call (a new tensor): done when this returns
                self.synchronize(None)

    def synchronize(self, stream: Any) -> None:
        if stream is None:
            with self.device:
                self.cp.cuda.Stream.null.synchronize()
        else:
            stream.synchronize()

    def foreign(self, obj: Any) -> tuple[int, tuple[int, ...], np.dtype[Any], Any]:
        """A CUDA array interface object, or a DLPack capsule producer (converted by
        ``cupy.from_dlpack`` without a copy)."""
        if not hasattr(obj, "__cuda_array_interface__") and hasattr(obj, "__dlpack__"):
            obj = self.cp.from_dlpack(obj)
        ptr, shape, dtype = cuda_array_interface(obj)
        return ptr, shape, dtype, obj

    # ----------------------------------------------------------------------- kernels
    def compile(self, source: str, names: Sequence[str]) -> dict[str, Any]:
        """Compile with NVRTC (CuPy also caches the binary on disk) and load ``names``."""
        key = hashlib.sha256("\0".join([source, *self.options]).encode()).hexdigest()
        with self._lock:
            found = self._modules.get(key)
        if found is not None:
            return found
        with self.device:
            try:
                module = self.cp.RawModule(code=source, options=self.options)
                functions = {name: module.get_function(name) for name in names}
            except self.cp.cuda.compiler.CompileException as error:
                raise GpuCompileError(
                    f"NVRTC failed on a generated module (a GPU backend bug):\n{error}"
                ) from error
        with self._lock:
            self._modules[key] = functions
        return functions

    def launch(
        self, module: Any, kernel: CudaKernel, grid: int, args: Sequence[int], stream: Any
    ) -> None:
        function = module[kernel.name]
        with self.device, _current(stream):
            function((grid,), (kernel.block,), tuple(np.uint64(a) for a in args))

    def gemm(self, a: Strided, b: Strided, c: Strided, stream: Any) -> None:
        """One cuBLAS (strided-batched) GEMM call as :func:`~opgraph.backends.gpu.blas.plan_gemm`
        plans it; ``cupy.matmul`` for layouts it has no plan for."""
        plan = plan_gemm(a, b, c) if self._cublas is not None else None
        if plan is None:
            self._matmul(a, b, c, stream)
            return
        with self.device, _current(stream):  # CuPy's bindings run on its current stream
            self._cublas_gemm(plan)

    def _cublas_gemm(self, plan: GemmPlan) -> None:
        cublas = self._cublas
        handle = self.cp.cuda.device.get_cublas_handle()
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        one, zero = (x.ctypes.data for x in self._scalars[plan.double])
        a, b = plan.a, plan.b
        op_a = cublas.CUBLAS_OP_T if a.trans else cublas.CUBLAS_OP_N
        op_b = cublas.CUBLAS_OP_T if b.trans else cublas.CUBLAS_OP_N
        sizes = (handle, op_a, op_b, plan.m, plan.n, plan.k, one)
        if plan.batch == 1:
            call = cublas.dgemm if plan.double else cublas.sgemm
            call(*sizes, a.ptr, a.ld, b.ptr, b.ld, zero, plan.c_ptr, plan.ldc)
        else:
            call = cublas.dgemmStridedBatched if plan.double else cublas.sgemmStridedBatched
            call(
                *sizes,
                *(a.ptr, a.ld, a.stride, b.ptr, b.ld, b.stride, zero),
                *(plan.c_ptr, plan.ldc, plan.c_stride, plan.batch),
            )

    def _matmul(self, a: Strided, b: Strided, c: Strided, stream: Any) -> None:
        """``cupy.matmul`` over CuPy arrays viewing the operands."""
        with self.device, _current(stream):
            left, right, out = self._array(a), self._array(b), self._array(c)
            if out.flags.c_contiguous:
                self.cp.matmul(left, right, out=out)
            else:
                out[...] = self.cp.matmul(left, right)

    def _array(self, s: Strided) -> Any:
        """A CuPy array over existing device memory (no copy, no ownership)."""
        low, high = extent(s)
        memory = self.cp.cuda.UnownedMemory(s.ptr + low, max(high - low, 1), self, self.device.id)
        pointer = self.cp.cuda.MemoryPointer(memory, -low)
        return self.cp.ndarray(s.shape, s.element_type.dtype, pointer, s.byte_strides)


def _ptr(stream: Any) -> int:
    return 0 if stream is None else int(stream.ptr)


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _current(stream: Any) -> Any:
    """``with stream:`` (the stream CuPy launches on), or nothing for the default stream."""
    return stream if stream is not None else _NullContext()


def _cublas_module() -> Any:
    """CuPy's cuBLAS bindings (None where this CuPy has none: ``cupy.matmul`` then)."""
    try:
        # deferred: part of CuPy, an optional dependency
        from cupy_backends.cuda.libs import cublas
    except ImportError:
        return None
    return cublas


def _compile_options(cupy: Any) -> tuple[str, ...]:
    """NVRTC options: C++17, and the toolkit's include directory when CuPy knows it (for
    ``cuda_fp16.h`` / ``cuda_bf16.h``)."""
    options = ["--std=c++17"]
    try:
        root = cupy.cuda.get_cuda_path()
    except Exception:  # no toolkit found: CuPy's own header search applies
        root = None
    if root and os.path.exists(os.path.join(root, "include", "cuda_fp16.h")):
        options.append("-I" + os.path.join(root, "include"))
    return tuple(options)


@functools.cache
def cupy_device(device_id: int = 0) -> CupyDevice:
    """The shared runtime of CUDA device ``device_id``."""
    return CupyDevice(device_id)
