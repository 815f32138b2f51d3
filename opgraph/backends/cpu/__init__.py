"""CPU: the optimized backend (fused generated C kernels, BLAS, a static memory plan).

Importing this package registers it as ``og.backend("CPU")``. See ``docs/cpu.md``.
"""

from opgraph.backends.cpu.backend import CpuBackend, unavailable_reason
from opgraph.backends.cpu.cache import CacheError, CacheWarning
from opgraph.backends.cpu.compiler import CompilerError
from opgraph.backends.cpu.config import CpuConfig, CpuConfigError, default_config
from opgraph.backends.cpu.executable import CpuExecutable
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.runtime.backend import register_backend

register_backend("CPU", CpuBackend, unavailable=unavailable_reason)

__all__ = [
    "CacheError",
    "CacheWarning",
    "CompilerError",
    "CpuBackend",
    "CpuConfig",
    "CpuConfigError",
    "CpuExecutable",
    "MemoryPlan",
    "default_config",
    "unavailable_reason",
]
