"""Staged CPU execution of a Function with data-dependent nodes: the target-neutral
:class:`~opgraph.backends.fused.staged.StagedExecutable` (shared with the GPU backend), each
stage compiled once by the CPU backend (one native module, :mod:`opgraph.backends.cpu.symbolic`)."""

from __future__ import annotations

from opgraph.backends.fused.staged import (
    Stage,
    StageCompiler,
    StagedExecutable,
    build_stage,
    is_data_dependent,
    lower_for_stages,
    stage_levels,
)
from opgraph.core.function import Function

__all__ = [
    "Stage",
    "StageCompiler",
    "StagedCpuExecutable",
    "build_stage",
    "is_data_dependent",
    "lower_for_stages",
    "stage_levels",
]


class StagedCpuExecutable(StagedExecutable):
    """A data-dependent Function on CPU (see :mod:`opgraph.backends.fused.staged`)."""

    def __init__(self, function: Function, compile_stage: StageCompiler, profile: bool) -> None:
        super().__init__(function, compile_stage, profile, "CPU")
