"""Rows of a panel GEMM's left operand moved off 4 KiB multiples (``unalias_rows``).

The panel GEMM (``GemmStep.panel`` 32; the CPU's ``og_gemm_panels``) reads, at every step of
the inner dimension, one float from each of a tile's 12 rows of ``a``. When those rows are a
multiple of 4 KiB apart (1024 f32: BERT's FFN 2 reads rows of 3072), the 12 lines fall in
one set of a 4 KiB-aliased L1 (8-way on Zen 4 and recent Intel cores) and evict one another
at every cache line of ``a``: the product ran at 100-102 GFLOP/s per core against 112-116
with the rows 64 bytes further apart (C harness over ``og_gemm_panels``, one thread,
128 x 1024/2048/3072 x 768; 2 KiB apart, two sets of six, measured no slower). The lowering
then copies ``a`` once into a scratch buffer whose rows are :data:`PAD` floats longer, a
stream of ``rows x inner`` floats (0.03-0.1 ms for 128 x 3072) against the ~10 % of the
product it saves.

Targets whose tile reads 6 rows (AVX2's half panels, ``TargetFeatures.panel_halves``) leave
the feature off (``TargetFeatures.padded_rows``; ``CpuBackend``): six lines share a set
without evicting one another, and the copy cost more than it saved (BERT's FFN 2, 128 x 3072
x 768 under ``isa="avx2"``, one thread, five alternating pairs on Zen 5: 5.37-5.53 ms per
call in place against 5.49-5.66 with the copy; the AVX-512 12-row tile in place 3.21-3.63
against 2.90-3.36 with it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opgraph.backends.fused import views
from opgraph.backends.fused.views import Operand, View
from opgraph.core import element_type as et

if TYPE_CHECKING:
    from opgraph.backends.fused.builder import ProgramBuilder
    from opgraph.backends.fused.program import GemmStep

#: Row strides (in f32 elements) that alias: multiples of 4 KiB.
ALIASING = 1024
#: Floats added to each copied row: one 64-byte cache line.
PAD = 16
#: Rows below which a product is one tile or less (the rows are then read a few times only).
MIN_ROWS = 13


def unalias_rows(builder: ProgramBuilder, left: View, source: Operand | None = None) -> View:
    """``left`` (rows x inner f32, rows contiguous), or its copy with padded rows when its
    row stride is a multiple of :data:`ALIASING` and it has more than one tile of rows.

    ``source``: the operand that ``left`` re-views as a matrix; the copy then runs in its
    shape, so that the pointwise kernel computing it (BERT's FFN 1 bias and GELU) merges with
    the copy (``epilogues.merge_pointwise_steps`` wants equal shapes) and, as the product's
    epilogue, writes the padded rows itself: no step of its own."""
    rows, inner = left.shape
    stride = left.strides[0]
    if not builder.features.padded_rows:
        return left
    if left.element_type is not et.f32 or left.strides[1] != 1:
        return left
    if type(rows) is not int or type(inner) is not int or type(stride) is not int:
        return left
    if rows < MIN_ROWS or inner < ALIASING or stride % ALIASING != 0:
        return left
    padded = builder.scratch(et.f32, (rows, inner + PAD))
    target = View(padded.buffer, et.f32, (rows, inner), (inner + PAD, 1), padded.offset)
    copied, into = _in_source_shape(left, target, source)
    builder.materialize(copied, into=into)
    return target


def _in_source_shape(left: View, target: View, source: Operand | None) -> tuple[Operand, View]:
    """The copy's source and target in ``source``'s shape when ``left`` is ``source``
    re-viewed (same buffer, same elements), else ``left`` and ``target`` as they are."""
    if isinstance(source, View) and views.reshape(source, left.shape) == left:
        shaped = views.reshape(target, source.shape)
        if isinstance(shaped, View):
            return source, shaped
    return left, target


def padded_output(step: GemmStep, store: View) -> View | None:
    """``store``, an epilogue's result in :func:`unalias_rows`' padded rows (its copy merged
    into the kernel), as the product's own output when ``step`` is a single f32 panel
    product (the CPU's ``og_gemm_panels`` takes the rows' stride): the product then writes
    the padded rows and the epilogue updates them in place, so the product needs no dense
    buffer of its own. None for any other layout (a slice of a concatenation, say)."""
    out = step.out
    if out is None or not step.panel or len(step.batch) != 1 or step.grid:
        return None
    if out.element_type is not et.f32 or store.element_type is not et.f32 or not out.is_dense:
        return None
    rows, cols = out.shape
    shaped = views.reshape(store, out.shape)
    if not isinstance(shaped, View) or shaped.offset != 0 or type(cols) is not int:
        return None
    return shaped if shaped.strides == (cols + PAD, 1) and rows != 1 else None


__all__ = ["ALIASING", "PAD", "padded_output", "unalias_rows"]
