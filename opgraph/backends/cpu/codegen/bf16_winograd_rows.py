"""bf16 Winograd F(2x2, 3x3) with the tiles as the product's rows (:class:`Bf16RowWinogradStep`).

The pair-panel Winograd (``codegen/bf16_winograd.py``) multiplies ``U[ξ]`` (output channels
as rows) by the transformed tiles as 32-tile pair panels: a 14x14 plane's 49 tiles fill two
panels, so 23 % of its products are by padding columns, and every 12-row tile of ``U[ξ]``
is read again for each panel. Here the product is turned around, as in a Linear layer:

1. the input transform writes ``V[ξ]`` as bf16 rows, one per tile, its ``C`` channels
   contiguous (channel pairs ``2q, 2q + 1`` side by side: the left operand the shared
   micro-kernels read);
2. ``og_gemm_bf16_rowsp`` (BERT's ``og_gemm_bf16_rows`` prefetching the next panel slice,
   and after the last the next position's first, into L2: the filters of the late stages are
   not in L2 when the step starts) multiplies them by ``U[ξ]`` packed at compile time as pair
   panels of 32 output channels (``C/2`` rows of 32 pairs): each panel slice serves every
   tile of the unit (49 tiles: rows of 10, 10, 10, 10, 9), so no product is by padding and
   the filters are read once per call;
3. the output transform reads ``M[ξ]`` (tiles x channels), 16 output channels per vector,
   into a small buffer, then writes each channel's two output rows.

The arithmetic is the other bf16 Winograds': the transformed tiles and filters are rounded
to bf16 once each, their products are exact in f32 and summed in f32, so the results are
the same up to the order of the f32 sums. Taken for F(2x2) steps with a static batch, an even
channel count and output-channel blocks of whole panels, where a unit's tiles leave a large
part of the last 32-tile panel empty (:func:`applies`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen import bf16
from opgraph.backends.cpu.codegen.bf16_units import even_units
from opgraph.backends.cpu.codegen.bf16_winograd import (
    Bf16PairWinogradEmitter,
    _unit_tiles,
    fits,
    output_row,
    output_sums,
)
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.winograd import _transform, image_loop
from opgraph.backends.fused.program import Buffer, Step, WinogradStep
from opgraph.backends.fused.views import View, static_all
from opgraph.core import element_type as et

#: Output channels per vector of the output transform (one zmm of f32).
LANES = 16
#: The least share of a unit's 32-tile panels that would multiply padding for the tiles to
#: be turned into rows (ResNet-18's 14x14 plane: 49 tiles in 64 columns, 0.23).
MIN_WASTE = 0.1


@dataclasses.dataclass(eq=False)
class Bf16RowWinogradStep(bf16.Bf16WinogradStep):
    """A :class:`~opgraph.backends.cpu.codegen.bf16.Bf16WinogradStep` whose ``u`` holds,
    per transform position, ``U[ξ]ᵀ`` (C x O) as bf16 pair panels of 32 output channels."""


def waste(step: WinogradStep) -> float:
    """The largest share of padding columns in the 32-tile panels of one of ``step``'s
    units (1.0 when the batch is symbolic)."""
    tiles = _unit_tiles(step)
    if not tiles:
        return 1.0
    return max(1.0 - t / (-(-t // 32) * 32) for t in tiles)


def applies(step: WinogradStep) -> bool:
    """Whether ``step`` runs with its tiles as rows: F(2x2), a static batch, an even channel
    count, output channels in whole 32-channel panels per unit, and at least
    :data:`MIN_WASTE` of some unit's tile panels padding."""
    if step.x is None or step.u is None or step.out is None or step.tile != 2 or step.flipped:
        return False
    if not _unit_tiles(step):
        return False
    c, o = static_all(step.x.shape[1:2])[0], static_all(step.out.shape[1:2])[0]
    part = -(-o // step.channel_blocks)
    whole = c % 32 == 0 and o % 32 == 0 and part % 32 == 0
    return whole and scratch_need(step) <= scratch_stride(step) and waste(step) >= MIN_WASTE


def scratch_stride(step: WinogradStep) -> int:
    """f32 elements of one thread's scratch, as the lowering planned it."""
    assert step.scratch is not None
    return int(static_all(step.scratch.shape[1:2])[0])


def scratch_need(step: WinogradStep) -> int:
    """f32 elements a thread's unit uses: its tiles' bf16 rows (8 per tile and channel), its
    products (16 per tile and output channel), and its input rows channels last (2 rows + 2
    of 2 columns + 2)."""
    assert step.x is not None and step.out is not None
    c = static_all(step.x.shape[1:2])[0]
    o, ow = static_all(step.out.shape[1:2])[0], static_all(step.out.shape[3:])[0]
    part = -(-o // step.channel_blocks)
    rows, tw = step.block_rows, -(-ow // 2)
    most = step.images * rows * tw
    return (8 * c + 16 * part) * most + (2 * rows + 2) * (2 * tw + 2) * c


def _to_bf16(step: WinogradStep, buffers: list[Buffer]) -> Step:
    """``step`` as a :class:`Bf16RowWinogradStep` when it :func:`applies` and its
    transformed filters are a finite constant; else the other bf16 Winograd conversion."""
    step = even_units(step, lambda other: _form(other) == _form(step))
    if not applies(step):
        return bf16._winograd(step, buffers)
    assert step.u is not None
    values = bf16._constant(buffers, step.u)
    if values is None:
        return step
    taps, o, c = values.shape
    data = np.concatenate([bf16._pair_panels(values[xi].T, 32) for xi in range(taps)])
    label = f"{buffers[step.u.buffer].label} (bf16 pairs by output channel)"
    u = View(bf16._add_constant(buffers, data, label), et.bf16, step.u.shape, (o * c, c, 1), 0)
    return Bf16RowWinogradStep(**{**bf16._fields(step), "u": u})


def _form(step: WinogradStep) -> str:
    """Which bf16 Winograd emitter ``step`` gets: the tiles as rows, pair panels or plain."""
    return "rows" if applies(step) else "pairs" if fits(step) else "plain"


class Bf16RowWinogradEmitter(Bf16PairWinogradEmitter):
    """A :class:`Bf16RowWinogradStep` (module docstring)."""

    def emit(self) -> str:
        self.module.helper("gemm_bf16")
        self.module.helper("gemm_bf16_ahead")  # og_gemm_bf16_rowsp, after what it uses
        s = self.step
        n = self.x.shape[0]
        c, h, w = static_all(self.x.shape[1:])
        o, oh, ow = static_all(self.out.shape[1:])
        th, tw = -(-oh // 2), -(-ow // 2)
        blocks = -(-th // s.block_rows)
        part = -(-o // s.channel_blocks)
        most = s.images * s.block_rows * tw  # tiles of a unit at most
        per_thread = scratch_stride(s)  # applies(): scratch_need(s) fits in it
        groups = -(-n // s.images) if type(n) is int else n
        panel = c * -(-o // 32) * 32  # bf16 elements of one U[ξ]'s panels
        head = [f"/* {self.name}: bf16 Winograd F(2x2,3x3), tiles as rows: "]
        head[0] += s.label.replace("*/", "* /") + " */"
        head += self.step_head(w)
        self.share(blocks, th, tw)
        if self.shared:  # the transform once, by <name>_in: this unit's products only
            head += self.shared_rows(c, h, w, tw)
            tiles = [
                f"    uint32_t* V = (uint32_t*)({self.shared_row('rest')});",
                f"    float* M = scratch + (long)og_worker_index() * {per_thread}L;",
                f"    long pairs = {c // 2}L;",
            ]
        else:
            tiles = [
                f"    float* V0 = scratch + (long)og_worker_index() * {per_thread}L;",
                "    uint32_t* V = (uint32_t*)V0;",
                f"    float* M = V0 + {8 * c}L * tb;",
                f"    long pairs = {c // 2}L;",
                # the input rows, channels last
                f"    float* P = V0 + {(8 * c + 16 * part) * most}L;",
                *self._row_images(c, h, w, tw, "0L", f"{c}L"),
            ]
        body = [
            *self.unit_opening(),
            f"  float vt[{16 * 32}], e[{4 * tw * LANES}];",
            "  for (long unit = lo; unit < hi; ++unit) {",
            *self._unit_head(n, o, th, blocks, part, tw),
            *tiles,
            "    for (int xi = 0; xi < 16; ++xi)",
            "      og_gemm_bf16_rowsp((const uint16_t*)(V + xi * tb * pairs), 2 * pairs, "
            f"u0 + xi * {panel}L, M + xi * tb * op - o0, op, tb, {c}L, o0, o1, "
            f"xi < 15 ? u0 + (xi + 1) * {panel}L + o0 / 32 * pairs * 64 : 0);",
            *self.unit_tail(o, oh, ow, tw, groups * blocks * s.channel_blocks),
        ]
        return "\n".join(head + body)

    def chunks(self, c: int) -> int:
        """32-channel chunks per block of tiles in ``<name>_in`` (its units)."""
        return min(c // 32, 4 * self.module.num_threads)

    def shared_rows(self, c: int, h: int, w: int, tw: int) -> list[str]:
        """``<name>_in`` of the tiles as rows: each unit transforms its chunk of 32-channel
        groups of its block of tiles into the block's shared row, through input rows in its
        thread's scratch."""
        chunks, groups = self.chunks(c), c // 32
        return [
            *self.shared_head(c),
            f"    float vt[{16 * 32}];",
            f"    uint32_t* V = (uint32_t*)({self.shared_row('rest')});",
            f"    float* P = scratch + (long)og_worker_index() * {self.layout[4]}L;",
            f"    long ca = 32L * ({groups}L * chunk / {chunks}L);",
            f"    long cb = 32L * ({groups}L * (chunk + 1) / {chunks}L);",
            *self._row_images(c, h, w, tw, "ca", "cb"),
            "  }",
            "  return err;",
            "}",
        ]

    def _row_images(self, c: int, h: int, w: int, tw: int, ca: str, cb: str) -> list[str]:
        """The unit's images' tiles of channels ``ca`` to ``cb`` into ``V``."""
        return image_loop(tw, self.row_transform(c, h, w, tw, ca, cb), self.x.strides[0], "    ")

    def row_transform(
        self, c: int, h: int, w: int, tw: int, ca: str = "0L", cb: str = ""
    ) -> list[str]:
        """The image's input rows of the unit, channels ``ca`` to ``cb`` (all by default)
        last and zero outside the image, in ``P``; then each tile's 16 transformed values,
        32 channels at a time (vectorized across channels), rounded by ``og_bf16_row`` into
        the tile's row of each ``V[ξ]``."""
        cb = cb or f"{c}L"
        part = f"(unsigned long)({cb} - {ca}) * 4UL"
        whole = (ca, cb) == ("0L", f"{c}L")
        outside = (
            [f"      __builtin_memset(pr, 0, {(2 * tw + 2) * c * 4}UL);"]
            if whole
            else [
                f"      for (long col = 0; col < {2 * tw + 2}L; ++col)",
                f"        __builtin_memset(pr + col * {c}L + {ca}, 0, {part});",
            ]
        )
        pt, pl = self.step.padding
        wide = 2 * tw + 2
        loads = [
            f"const float d{a}{b} = p[{(a * wide + b) * c}L + c0 + j];"
            for a in range(4)
            for b in range(4)
        ]
        stores = [f"vt[{a * 4 + b} * 32 + j] = v{a}{b};" for a in range(4) for b in range(4)]
        return [
            "  for (long r = 0; r < 2 * (tr1 - tr0) + 2; ++r) {",
            f"    long ih = 2 * tr0 - {pt}L + r;",
            f"    float* pr = P + r * {wide * c}L;",
            f"    if (ih < 0 || ih >= {h}L) {{",
            *outside,
            "      continue;",
            "    }",
            f"    for (long col = 0; col < {wide}L; ++col)",
            f"      if (col < {pl}L || col >= {w + pl}L) __builtin_memset(pr + col * {c}L + {ca}, "
            f"0, {part});",
            *self._channels_last(c, w, wide, ca, cb),
            "  }",
            "  for (long tr = tr0; tr < tr1; ++tr) {",
            f"    long base = base0 + (tr - tr0) * {tw}L;",
            f"    for (long tc = 0; tc < {tw}L; ++tc) {{",
            f"      const float* p = P + (2 * (tr - tr0) * {wide}L + 2 * tc) * {c}L;",
            f"      uint16_t* v = (uint16_t*)V + (base + tc) * {c}L;",
            f"      for (long c0 = {ca}; c0 < {cb}; c0 += 32) {{",
            "        #pragma omp simd",
            "        for (long j = 0; j < 32; ++j) {",
            *[f"          {line}" for line in loads + _transform("v", "d") + stores],
            "        }",
            "        for (int ab = 0; ab < 16; ++ab)",
            f"          og_bf16_row(vt + ab * 32, v + ab * tb * {c}L + c0, 32);",
            "      }",
            "    }",
            "  }",
        ]

    def _channels_last(self, c: int, w: int, wide: int, ca: str, cb: str) -> list[str]:
        """Input row ``ih``'s channels ``ca`` to ``cb`` into ``pr``, channels last: by
        ``og_cb_in``'s in-register 16 x 16 transposes where the row is contiguous and the
        channels come in 16s (one thread, ResNet-18's 56x56 step: the scalar loop's strided
        stores were 15 % of it by ``perf``), else element by element."""
        xs = self.x.strides
        pl = self.step.padding[1]
        cols = min(wide, w + pl) - pl
        if xs[3] == 1 and c % 16 == 0:
            self.module.helper("dw_blocked")
            return [
                f"    for (long ch = {ca}; ch < {cb}; ch += 16)",
                f"      og_cb_in(pr + {pl * c}L + ch, x + ch * {xs[1]}L + ih * {xs[2]}L, "
                f"{xs[1]}L, {cols}L, 1L, {c // 16}L, 16L);",
            ]
        return [
            f"    for (long ch = {ca}; ch < {cb}; ++ch) {{",
            f"      const float* xr = x + ch * {xs[1]}L + ih * {xs[2]}L - {pl * xs[3]}L;",
            f"      for (long col = {pl}L; col < {pl + cols}L; ++col)",
            f"        pr[col * {c}L + ch] = xr[col * {xs[3]}L];",
            "    }",
        ]

    def output_transform(self, oh: int, ow: int, tw: int) -> list[str]:
        """``Aᵀ M A`` of a tile row, :data:`LANES` output channels at a time into ``e``
        (output (i, j) of tile ``tc`` at ``e[(i * 2 tw + 2 tc + j) * LANES]``: each output
        row's pixels in order, a pixel's channels contiguous), then each channel's two
        output rows from ``e``: by ``og_cb_out``'s in-register 16 x 16 transposes where the
        output rows are contiguous (scalar stores were 13 % of the 28x28 step by ``perf``),
        else element by element."""
        ys = self.out.strides
        sums = output_sums(lambda x: f"mt[{x}L * tb * op + j]")
        outs = [
            f"e[({i * 2 * tw}L + 2 * tc) * {LANES} + j] = r{i}0 + r{i}1 + r{i}2; "
            f"e[({i * 2 * tw + 1}L + 2 * tc) * {LANES} + j] = r{i}1 - r{i}2 - r{i}3;"
            for i in range(2)
        ]
        return [
            "    for (long tr = tr0; tr < tr1; ++tr) {",
            f"      long base = base0 + (tr - tr0) * {tw}L;",
            f"      for (long oc0 = o0; oc0 < o1; oc0 += {LANES}L) {{",
            f"        for (long tc = 0; tc < {tw}L; ++tc) {{",
            "          const float* mt = M + (base + tc) * op + (oc0 - o0);",
            "          #pragma omp simd",
            f"          for (long j = 0; j < {LANES}L; ++j) {{",
            *[f"            {line}" for line in sums + outs],
            "          }",
            "        }",
            f"        float* yc = y0 + img * {ys[0]}L + oc0 * {ys[1]}L + (2 * tr) * {ys[2]}L;",
            *self._rows_out(oh, ow, tw),
            "      }",
            "    }",
        ]

    def _rows_out(self, oh: int, ow: int, tw: int) -> list[str]:
        """The two output rows of :data:`LANES` channels from ``e`` (``yc``: the first
        channel's first row)."""
        ys = self.out.strides
        last = f"        if (2 * tr + 1 < {oh}L)"
        if ys[3] == 1:
            self.module.helper("dw_blocked")
            return [
                f"        og_cb_out(yc, e, {ys[1]}L, {ow}L, {LANES}L);",
                last,
                f"          og_cb_out(yc + {ys[2]}L, e + {2 * tw * LANES}L, {ys[1]}L, {ow}L, "
                f"{LANES}L);",
            ]

        def column(i: int, odd: int) -> Callable[[str], str]:
            return lambda t: f"e[({i * 2 * tw + odd}L + 2 * {t}) * {LANES} + j]"

        rows = [output_row(i, ow, tw, column(i, 0), column(i, 1)) for i in range(2)]
        return [
            f"        for (long j = 0; j < {LANES}L; ++j) {{",
            f"          float* y_0 = yc + j * {ys[1]}L;",
            f"          float* y_1 = y_0 + {ys[2]}L;",
            *[f"          {line}" for line in rows[0]],
            f"          if (2 * tr + 1 < {oh}L) {{",
            *[f"            {line}" for line in rows[1]],
            "          }",
            "        }",
        ]


def _emit(
    step: Bf16RowWinogradStep, i: int, module: ModuleContext
) -> tuple[str, str, tuple[Check, ...]]:
    checks: list[Check] = []
    text = Bf16RowWinogradEmitter(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


bf16.CONVERSIONS[WinogradStep] = _to_bf16

#: The C generator of :class:`Bf16RowWinogradStep` (``codegen/module.py`` STEP_EMITTERS).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], tuple[str, str, tuple[Check, ...]]]] = {
    Bf16RowWinogradStep: _emit,
}
