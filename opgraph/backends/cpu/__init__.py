"""CPU: the optimized backend (fused generated C kernels, BLAS, a static memory plan).

Importing this package registers it as ``og.backend("CPU")``. See ``docs/cpu.md``.
"""

from opgraph.backends.cpu.backend import CpuBackend
from opgraph.backends.cpu.compiler import CompilerError
from opgraph.backends.cpu.config import CpuConfig, default_config
from opgraph.backends.cpu.executable import CpuExecutable
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.runtime.backend import register_backend

register_backend("CPU", CpuBackend)

__all__ = [
    "CompilerError",
    "CpuBackend",
    "CpuConfig",
    "CpuExecutable",
    "MemoryPlan",
    "default_config",
]
