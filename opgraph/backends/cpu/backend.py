"""The CPU backend: lower, fuse, plan memory, generate C, compile once, run natively."""

from __future__ import annotations

from opgraph.backends.cpu.codegen.module import generate
from opgraph.backends.cpu.compiler import Toolchain
from opgraph.backends.cpu.config import CpuConfig, default_config
from opgraph.backends.cpu.executable import CpuExecutable
from opgraph.backends.fused.pipeline import compile_program
from opgraph.core.function import Function
from opgraph.runtime.backend import Backend


class CpuBackend(Backend):
    """The optimized CPU backend (``og.backend("CPU")``).

    Args:
        config: compiler, cache directory, threads…; default: :func:`default_config`.
    """

    name = "CPU"

    def __init__(self, config: CpuConfig | None = None) -> None:
        self.config = config or default_config()
        self.toolchain = Toolchain(self.config)

    def compile(self, function: Function, profile: bool = False) -> CpuExecutable:
        """Compile ``function``.

        Raises:
            UnsupportedOpError: an op has neither a CPU lowering nor a reference kernel.
            CompilerError: no C compiler (use INTERPRETER), or it failed.
        """
        fused = compile_program(function, self.name, self.config.optimize, self.config.num_threads)
        self.toolchain.require_compiler()
        generated = generate(fused.program, fused.plan, self.config, function.name, profile)
        compiled = self.toolchain.build(generated.source, generated.needs)
        return CpuExecutable(
            function, fused.lowered, fused.program, fused.plan, generated, compiled, profile
        )
