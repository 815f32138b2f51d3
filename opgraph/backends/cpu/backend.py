"""The CPU backend: lower, fuse, plan memory, generate C, compile once, run natively."""

from __future__ import annotations

from opgraph.backends.cpu.codegen.module import generate
from opgraph.backends.cpu.compiler import Toolchain
from opgraph.backends.cpu.config import CpuConfig, default_config
from opgraph.backends.cpu.executable import CpuExecutable
from opgraph.backends.fused.builder import build_program
from opgraph.backends.fused.epilogues import fuse_epilogues
from opgraph.backends.fused.fusion import Kind, classify
from opgraph.backends.fused.memory import plan_memory
from opgraph.backends.fused.pipeline import lower_for_cpu
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.errors import UnsupportedOpError
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
        lowered = lower_for_cpu(function, self.config)
        missing = sorted(
            {
                n.op.name
                for n in lowered.ops
                if classify(n) is Kind.FALLBACK and type(n.op) not in KERNELS
            }
        )
        if missing:
            raise UnsupportedOpError(
                f"CPU has no kernel for: {', '.join(missing)} (in {function.name})"
            )
        self.toolchain.require_compiler()
        program = build_program(lowered, self.config.num_threads)
        fuse_epilogues(program)
        plan = plan_memory(program)
        generated = generate(program, plan, self.config, function.name, profile)
        compiled = self.toolchain.build(generated.source, generated.needs)
        return CpuExecutable(function, lowered, program, plan, generated, compiled, profile)
