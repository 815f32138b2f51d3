"""bf16 1x1 convolutions whose input is compacted first (:class:`Bf16CompactPointwiseStep`).

A :class:`PointwiseConvStep` with ``compact`` set (ResNet's stride-2 1x1 downsample
convolutions) copies the pixels its filters read into a dense (N, C, P) block of its scratch
before the products; ``pointwise._to_bf16`` keeps such steps in f32. Here, in bf16 mode:

1. ``<name>_compact`` writes the pixels straight as the ``vdpbf16ps`` pair panels (per
   image, per 32 pixels, ``C/2`` rows of 32 (channel ``2q``, ``2q + 1``) pairs, the last
   panel's missing pixels zero), in the space the f32 copy took;
2. the units (image, block of output channels) run ``og_bf16_wgemm`` (``bf16_winograd.py``)
   with the filters, bf16 rows packed at compile time, as the left operand, writing the
   output rows (N, O, P) in place; the fused epilogue then runs on them.

Both operands are rounded to bf16 once and the products summed in f32, as every bf16 product.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen import bf16, pointwise
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.pointwise import PointwiseConvEmitter
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.fused.lowering.pointwise import PANEL, ROWS, TAIL, PointwiseConvStep
from opgraph.backends.fused.program import Buffer, BufferKind, Step
from opgraph.backends.fused.views import View, static_all
from opgraph.core import element_type as et


@dataclasses.dataclass(eq=False)
class Bf16CompactPointwiseStep(PointwiseConvStep):
    """A compact :class:`PointwiseConvStep` whose ``w`` (shape (C, O) as before) holds the
    filters as bf16 rows ``W`` (O x C, rows C apart, one zero after the last)."""


def applies(step: PointwiseConvStep) -> bool:
    """A compact, unpadded 1x1 step with an even channel count, a static batch, and at
    least 16 pixels (the pair panels then fit where the f32 copy was)."""
    if not step.compact or step.w is None or step.kernel != (1, 1) or any(step.padding):
        return False
    c, _ = static_all(step.w.shape)
    pixels = step.images[1] * step.images[2]
    batch = step.images[0]
    return type(batch) is int and c % 2 == 0 and -(-pixels // 32) * 16 <= pixels


def _to_bf16(step: PointwiseConvStep, buffers: list[Buffer]) -> Step:
    """``step`` as a :class:`Bf16CompactPointwiseStep` when it :func:`applies`; else the
    other pointwise conversion (``pointwise._to_bf16``)."""
    assert step.w is not None
    buffer = buffers[step.w.buffer]
    if not applies(step) or buffer.kind is not BufferKind.CONST or buffer.data is None:
        return pointwise._to_bf16(step, buffers)
    c, o = static_all(step.w.shape)
    width = PANEL if step.channels_first else ROWS
    packed = np.asarray(buffer.data, np.float32).reshape(-1, c, width)
    matrix = packed.transpose(0, 2, 1).reshape(-1, c)[:o]  # W (O x C)
    if not np.isfinite(matrix).all():
        return step
    data = bf16._left_matrix(matrix)
    w = View(bf16._add_constant(buffers, data, f"{buffer.label} (bf16)"), et.bf16, (c, o),
             (1, c), 0)  # fmt: skip
    return Bf16CompactPointwiseStep(**{**bf16._fields(step), "w": w})


class Bf16CompactPointwiseEmitter(PointwiseConvEmitter):
    """A :class:`Bf16CompactPointwiseStep` (module docstring)."""

    def emit(self) -> str:
        self.module.helper("gemm_bf16")
        self.module.helper("bf16_wgemm")
        s = self.step
        head = [f"/* {self.name}: bf16 pointwise convolution: {s.label.replace('*/', '* /')} */"]
        if s.epilogue is not None:
            head.append(self.epilogue_loop())
        blocks = max(1, min(-(-self.o // ROWS), 2 * self.threads if self.parallel else 1))
        run = [
            f"static int {self.name}_run(void* const* T, char* A) {{",
            "  int err = 0;",
            self.phase(f"{self.name}_compact", self.n * (self.c // 2)),
            self.phase(self.name, self.n * blocks),
            "  return err;",
            "}",
        ]
        return "\n".join(head + self.pair_compact() + self.products(blocks) + run)

    def epilogue_loop(self) -> str:
        assert self.step.epilogue is not None
        label = "epilogue of " + self.name
        ep = CLoopEmitter(self.step.epilogue, f"{self.name}_ep", self.module, label, self.checks)
        stream, self.module.stream_bytes = self.module.stream_bytes, 0
        try:
            return ep.emit()
        finally:
            self.module.stream_bytes = stream

    def panels_at(self) -> int:
        """Where the pair panels start in the scratch (floats): the f32 copy's place."""
        return self.module.num_threads * self.c * TAIL

    def pair_compact(self) -> list[str]:
        """``<name>_compact``: units (image, channel pair); the pixels the filters read as
        pair panels, zero past the last pixel."""
        _, oh, ow = self.step.images
        sh, sw = self.step.strides
        xs = self.x.strides
        p, pairs = self.pixels, self.c // 2
        per_image = -(-p // 32) * 32 * pairs
        return [
            f"static int {self.name}_compact(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.scratch, "scratch", False),
            f"  uint32_t* V0 = (uint32_t*)(scratch + {self.panels_at()}L);",
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {pairs}L, q = u % {pairs}L;",
            f"    const float* lo_ = x0 + img * {xs[0]}L + 2 * q * {xs[1]}L;",
            f"    const float* hi_ = lo_ + {xs[1]}L;",
            f"    uint32_t* V = V0 + img * {per_image}L + q * 32L;",
            f"    for (long i = 0; i < {oh}L; ++i)",
            f"      for (long j = 0; j < {ow}L; ++j) {{",
            f"        long px = i * {ow}L + j, at = i * {sh * xs[2]}L + j * {sw * xs[3]}L;",
            f"        V[(px >> 5) * {pairs * 32}L + (px & 31L)] = og_bf16_bits(lo_[at]) |",
            "            og_bf16_bits(hi_[at]) << 16;",
            "      }",
            f"    for (long px = {p}L; px < {-(-p // 32) * 32}L; ++px)",
            f"      V[(px >> 5) * {pairs * 32}L + (px & 31L)] = 0u;",
            "  }",
            "  return 0;",
            "}",
        ]

    def products(self, blocks: int) -> list[str]:
        """``<name>``: units (image, block of output channels), the product into the output
        rows, then the epilogue on them."""
        c, o, p, pairs = self.c, self.o, self.pixels, self.c // 2
        per_image = -(-p // 32) * 32 * pairs
        return [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, self.scratch, "scratch", False),
            f"  const uint32_t* V0 = (const uint32_t*)(scratch + {self.panels_at()}L);",
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {blocks}L, cb = u % {blocks}L;",
            f"    long o0 = {o}L * cb / {blocks}L, o1 = {o}L * (cb + 1) / {blocks}L;",
            f"    float* y = y0 + img * {o * p}L;",
            f"    og_bf16_wgemm(w0 + o0 * {c}L, {c}L, V0 + img * {per_image}L, {pairs}L, "
            f"y + o0 * {p}L, {p}L, o1 - o0, {p}L, {c}L);",
            *self.epilogue("o0", "o1", "0L", f"{p}L"),
            "  }",
            "  return err;",
            "}",
        ]


def _emit(
    step: Bf16CompactPointwiseStep, i: int, module: ModuleContext
) -> tuple[str, str, tuple[Check, ...]]:
    checks: list[Check] = []
    text = Bf16CompactPointwiseEmitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


bf16.CONVERSIONS[PointwiseConvStep] = _to_bf16

#: The C generator of :class:`Bf16CompactPointwiseStep` (``codegen/module.py``).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], tuple[str, str, tuple[Check, ...]]]] = {
    Bf16CompactPointwiseStep: _emit,
}
