"""What the generators of one C module share: buffer addresses, helpers and math functions
in use (the run-time checks of each step are :class:`~opgraph.backends.fused.loops.Check` s)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.fused.loops import Check as Check  # re-exported for the kernels
from opgraph.core.dim import Dim
from opgraph.core.element_type import ElementType


def static_dim(d: Dim) -> str:
    """A static dimension as a C ``long`` literal."""
    if not isinstance(d, int):
        raise TypeError(f"a static module has no symbolic dimension, got {d}")
    return f"{d}L"


def panel_unit(panel_halves: bool, resident: bool) -> str:
    """The library unit a module's ``og_gemm_panels`` comes from: AVX2's half panels
    (``panel_halves``), else whole panels with the next-slice prefetch, or without it where
    the module's panels stay in L3 (``resident``: ``dialect.RESIDENT_BYTES``)."""
    if panel_halves:
        return "gemm_half_panels"
    return "gemm_panels_resident" if resident else "gemm_panels"


@dataclass
class ModuleContext:
    """Shared state of one generated module.

    Attributes:
        base: the C expression of a buffer's first byte (``char*``), by buffer id.
        num_threads: threads of parallel regions.
        parallel_threshold: work below which a step runs serially.
        dim: a dimension (size, stride, offset in elements) as a C ``long`` expression;
            static modules have only ints (``768L``); a symbolic module's renders its
            expressions over the call's symbol values (``codegen/dims.py``).
        symbolic: whether the module's sizes may be expressions.
        panel_halves: the 32-column panels ``og_gemm_panels`` reads are stored as two
            16-column halves (``TargetFeatures.panel_halves``; ``CpuConfig.panel_halves()``).
        vector_lanes: the f32 lanes of the kernels' vectors (``CpuConfig.vector_lanes()``).
        panels_resident: the module's buffers fit :data:`~dialect.RESIDENT_BYTES`, so its
            whole panels stay in L3 between calls (``og_gemm_panels`` without the prefetch).
    """

    base: Callable[[int], str]
    num_threads: int
    parallel_threshold: int
    helpers: dict[str, None] = field(default_factory=dict)
    math: set[tuple[str, ElementType]] = field(default_factory=set)
    uses_pool: bool = False
    stream_bytes: int = 0  # results at least this large are written with streaming stores
    sizes: dict[int, Dim] = field(default_factory=dict)  # result buffers: bytes
    dim: Callable[[Dim], str] = static_dim
    symbolic: bool = False
    panel_halves: bool = False
    vector_lanes: int = 16
    panels_resident: bool = False

    def streamable(self, buffer: int) -> bool:
        size = self.sizes.get(buffer, 0)
        if type(size) is not int:  # symbolic: streaming only pays for large results
            return False
        return bool(self.stream_bytes) and size >= self.stream_bytes

    uses_blas: bool = False

    def helper(self, name: str) -> None:
        self.helpers.setdefault(name, None)

    def gemm_panels(self) -> None:
        """Call ``og_gemm_panels``: the unit made for this module's panel layout (and, for
        whole panels, for where they come from: ``panels_resident``)."""
        self.helper(panel_unit(self.panel_halves, self.panels_resident))

    def use_math(self, name: str, t: ElementType) -> None:
        self.math.add((name, t))

    def helper_code(self) -> str:
        return "\n".join(dialect.C.helper_code(name) for name in self.helpers)
