"""Configuration of the GPU backend (explicit; nothing here reads the environment)."""

from __future__ import annotations

from dataclasses import dataclass

from opgraph.core.errors import GraphError


@dataclass(frozen=True)
class GpuConfig:
    """How the GPU backend compiles and runs.

    Attributes:
        device_id: the CUDA device ordinal.
        block: threads per block of element-wise and thread-per-row kernels, and the most
            threads of a block-per-row kernel (a multiple of 32, at most 1024).
        host_kernel_limit: a loop step of at most this many elements whose inputs come from
            host steps and whose results only host steps read runs on the host (saving the
            transfers around it); 0 keeps every loop step on the device.
        optimize: run the default optimization pipeline while lowering (as the CPU backend).
    """

    device_id: int = 0
    block: int = 256
    host_kernel_limit: int = 4096
    optimize: bool = True

    def __post_init__(self) -> None:
        if self.block % 32 or not 32 <= self.block <= 1024:
            raise GraphError(
                f"GpuConfig.block must be a multiple of 32 in [32, 1024], got {self.block}"
            )
