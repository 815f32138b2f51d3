"""GPU: the CPU backend's fused programs as CUDA kernels, cuBLAS products and a hybrid
placement between the GPU and the host (see ``docs/gpu.md``).

Importing this package registers ``og.backend("GPU")`` only when CuPy imports and a CUDA
device is present (:func:`available`); CuPy itself is imported only then. Tests use
``GpuBackend(device=FakeDevice())`` to run the whole backend on numpy.
"""

from opgraph.backends.gpu.availability import available, unavailable_reason
from opgraph.backends.gpu.backend import GpuBackend
from opgraph.backends.gpu.config import GpuConfig
from opgraph.backends.gpu.device import GpuUnavailableError
from opgraph.backends.gpu.executable import GpuExecutable
from opgraph.backends.gpu.fake import FakeDevice
from opgraph.backends.gpu.tensor import DeviceTensor
from opgraph.runtime.backend import backends, register_backend, register_unavailable

if available() and "GPU" not in backends():
    register_backend("GPU", GpuBackend)
elif not available():
    register_unavailable("GPU", unavailable_reason)

__all__ = [
    "DeviceTensor",
    "FakeDevice",
    "GpuBackend",
    "GpuConfig",
    "GpuExecutable",
    "GpuUnavailableError",
    "available",
    "unavailable_reason",
]
