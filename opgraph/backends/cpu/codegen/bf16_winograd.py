"""bf16 Winograd F(2x2, 3x3) whose input transform writes the ``vdpbf16ps`` pair panels.

The plain bf16 Winograd (:class:`~opgraph.backends.cpu.codegen.bf16.Bf16WinogradEmitter`)
keeps the f32 step's transforms and calls ``og_sgemm_bf16`` for its 16 products: the
transformed tiles ``V`` are written in f32 (four times the input), then read again and
rounded to bf16 pairs panel by panel inside every product, and the output transform runs
scalar (its stores to every other output column kept GCC from vectorizing it). Here:

1. the input transform computes one tile row of two channels (``2q`` and ``2q + 1``) into
   two small f32 rows (L1), then rounds and interleaves them straight into the layout the
   micro-kernel reads: per transform position ``ξ``, per 32-tile panel, ``ceil(C/2)`` rows of
   32 (even, odd) channel pairs. ``V`` is half the bytes and nothing repacks it;
2. ``og_bf16_wgemm`` runs the shared 12 x 32 ``vdpbf16ps`` micro-kernels on those panels and
   the bf16 filter rows (``U[ξ]``, packed at compile time by :func:`bf16.to_bf16`);
3. the output transform computes a tile row's four outputs per tile into four f32 rows
   (vectorized across tiles), then interleaves them into the two output rows.

The arithmetic is the plain bf16 Winograd's: the transformed tiles and filters are rounded
to bf16 once each, products are exact in f32 and summed in f32, so its results are the
same up to the order of the f32 sums. ``V``'s panels need ``ceil(C/2) * ceil(tiles/32) * 32``
words where the f32 step's scratch holds ``C * tiles``: a step whose units have too few
tiles for that (fewer than 16) keeps the plain emitter (:func:`fits`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.bf16 import (
    DEPTH,
    Bf16WinogradEmitter,
    Bf16WinogradStep,
    Emitted,
    switch_cases,
)
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.winograd import _transform, image_loop
from opgraph.backends.fused.lowering.winograd_tiles import plane_stride
from opgraph.backends.fused.program import WinogradStep
from opgraph.backends.fused.views import static_all


def output_sums(load: Callable[[int], str]) -> list[str]:
    """The first half of F(2x2, 3x3)'s output transform ``Aᵀ M A`` of one tile, as C lines:
    its 16 values ``m{a}{b}`` (``load(4a + b)``, an expression) and the rows of ``Aᵀ M``,
    ``r{i}{b}`` (``i`` < 2, ``b`` < 4)."""
    loads = [f"const float m{a}{b} = {load(a * 4 + b)};" for a in range(4) for b in range(4)]
    rows = [
        f"const float r0{b} = m0{b} + m1{b} + m2{b}; const float r1{b} = m1{b} - m2{b} - m3{b};"
        for b in range(4)
    ]
    return loads + rows


def output_row(
    i: int, ow: int, tw: int, even: Callable[[str], str], odd: Callable[[str], str]
) -> list[str]:
    """The second half of F(2x2, 3x3)'s output transform, as C lines: output row ``y_{i}``
    interleaved from each tile's even and odd column (``even(tc)``, ``odd(tc)``: expressions
    of the tile column ``tc``), the last column alone when ``ow`` is odd."""
    tail = [f"y_{i}[{ow - 1}L] = {even(f'{tw - 1}L')};"] if ow % 2 else []
    return [
        f"for (long tc = 0; tc < {ow // 2}L; ++tc) {{",
        f"  y_{i}[2 * tc] = {even('tc')}; y_{i}[2 * tc + 1] = {odd('tc')};",
        "}",
        *tail,
    ]


def _unit_tiles(step: WinogradStep) -> set[int]:
    """Every tile count a unit of ``step`` can have (full and last image groups, balanced
    row blocks); empty when the batch is symbolic."""
    assert step.x is not None and step.out is not None
    n = step.x.shape[0]
    if type(n) is not int:
        return set()
    oh, ow = static_all(step.out.shape[2:])
    th, tw = -(-oh // 2), -(-ow // 2)
    images = {step.images, n - (-(-n // step.images) - 1) * step.images}
    blocks = -(-th // step.block_rows)  # balanced: th * b // blocks is block b's first row
    rows = {th * (b + 1) // blocks - th * b // blocks for b in range(blocks)}
    return {i * r * tw for i in images for r in rows}


def fits(step: WinogradStep) -> bool:
    """Whether ``step``'s scratch holds its transformed tiles as pair panels in every unit:
    ``ceil(C/2) * ceil(tiles/32) * 32 <= C * tiles`` (the f32 layout's size)."""
    assert step.x is not None
    c = static_all(step.x.shape[1:2])[0]
    tiles = _unit_tiles(step)
    pairs = -(-c // 2)
    return bool(tiles) and all(pairs * -(-t // 32) * 32 <= c * t for t in tiles)


class Bf16PairWinogradEmitter(Bf16WinogradEmitter):
    """A :class:`Bf16WinogradStep` whose transformed tiles are written as bf16 pair panels
    (see the module docstring)."""

    def emit(self) -> str:
        self.module.helper("gemm_bf16")
        self.module.helper("bf16_wgemm")
        s = self.step
        n = self.x.shape[0]
        c, h, w = static_all(self.x.shape[1:])
        o, oh, ow = static_all(self.out.shape[1:])
        th, tw = -(-oh // 2), -(-ow // 2)
        blocks = -(-th // s.block_rows)
        part = -(-o // s.channel_blocks)
        # the lowering's rows (``scratch_per_thread``): 16 planes of pair panels, no more
        # than the f32 planes (fits), and 16 of products, each padded by plane_stride
        per_thread = int(static_all(self.scratch.shape[1:2])[0])
        groups = -(-n // s.images) if type(n) is int else n
        head = [f"/* {self.name}: bf16 Winograd F(2x2,3x3), pair panels: "]
        head[0] += s.label.replace("*/", "* /") + " */"
        head += self.step_head(w)
        self.share(blocks, th, tw)
        if self.shared:  # the transform once, by <name>_in: this unit's products only
            tiles = [
                f"    uint32_t* V = (uint32_t*)({self.shared_row('rest')});",
                f"    float* M = scratch + (long)og_worker_index() * {per_thread}L;",
                *self.pair_planes(c),
            ]
            head += self.shared_pairs(c, h, w, tw)
        else:
            tiles = [
                f"    float* V0 = scratch + (long)og_worker_index() * {per_thread}L;",
                "    uint32_t* V = (uint32_t*)V0;",
                *self.pair_planes(c),
                "    float* M = V0 + 16L * vs;",
                *self._pair_images(c, h, w, tw, "0L", "pairs"),
            ]
        body = [
            *self.unit_opening(),
            f"  float t0[{16 * tw}], t1[{16 * tw}];",
            f"  float e00[{tw}], e01[{tw}], e10[{tw}], e11[{tw}];",
            "  for (long unit = lo; unit < hi; ++unit) {",
            *self._unit_head(n, o, th, blocks, part, tw),
            *tiles,
            f"    long ms = {plane_stride('op * tb')};  /* the products' planes */",
            "    for (int xi = 0; xi < 16; ++xi)",
            f"      og_bf16_wgemm(u0 + xi * {o * c}L + o0 * {c}L, {c}L, V + xi * vs, "
            f"pairs, M + xi * ms, tb, op, tb, {c}L);",
            *self.unit_tail(o, oh, ow, tw, groups * blocks * s.channel_blocks),
        ]
        return "\n".join(head + body)

    def share(self, blocks: int, th: int, tw: int) -> None:
        """Transform the input once for every output-channel block (``<name>_in``) where the
        lowering planned the shared rows (``WinogradStep.shared``; the scratch's rows past
        the threads' rows each hold one block of tiles' transformed values)."""
        s = self.step
        n = self.x.shape[0]
        if not s.shared or s.channel_blocks < 2 or type(n) is not int:
            return
        last = (
            "img0 + 1"
            if s.images == 1
            else f"img0 + {s.images}L < {n}L ? img0 + {s.images}L : {n}L"
        )
        self.shared = s.shared
        self.layout = (blocks, last, th, tw, int(static_all(self.scratch.shape[1:2])[0]))

    @staticmethod
    def pair_planes(c: int) -> list[str]:
        """C: the pair panels' 32-tile width ``tbp``, the channel pairs, and the stride ``vs``
        of the transformed planes (pair panels): an odd number of cache lines apart
        (``winograd_tiles.plane_stride``), as the f32 step's."""
        return [
            f"    long tbp = (tb + 31L) / 32L * 32L, pairs = {-(-c // 2)}L;",
            f"    long vs = {plane_stride('pairs * tbp')};",
        ]

    def _pair_images(self, c: int, h: int, w: int, tw: int, q0: str, q1: str) -> list[str]:
        """The unit's images' tiles of channel pairs ``q0`` to ``q1`` into ``V``."""
        return image_loop(tw, self.pair_transform(c, h, w, tw, q0, q1), self.x.strides[0], "    ")

    def chunks(self, c: int) -> int:
        """Channel-pair chunks per block of tiles in ``<name>_in`` (its units)."""
        return min(-(-c // 2), 4 * self.module.num_threads)

    def shared_pairs(self, c: int, h: int, w: int, tw: int) -> list[str]:
        """``<name>_in`` of the pair panels: each unit transforms its chunk of channel pairs
        of its block of tiles into the block's shared row."""
        chunks = self.chunks(c)
        return [
            *self.shared_head(c),
            f"    float t0[{16 * tw}], t1[{16 * tw}];",
            f"    uint32_t* V = (uint32_t*)({self.shared_row('rest')});",
            *self.pair_planes(c),
            f"    long q0 = pairs * chunk / {chunks}L, q1 = pairs * (chunk + 1) / {chunks}L;",
            *self._pair_images(c, h, w, tw, "q0", "q1"),
            "  }",
            "  return err;",
            "}",
        ]

    def _unit_head(self, n: Any, o: int, th: int, blocks: int, part: int, tw: int) -> list[str]:
        """The unit's images, tile rows and output channels (as the f32 step's)."""
        s = self.step
        last = (
            "img0 + 1"
            if s.images == 1
            else f"img0 + {s.images}L < {n}L ? img0 + {s.images}L : {n}L"
        )
        return [
            f"    long cb = unit % {s.channel_blocks}L, rest = unit / {s.channel_blocks}L;",
            f"    long img0 = (rest / {blocks}L) * {s.images}L, blk = rest % {blocks}L;",
            f"    long img1 = {last};",
            f"    long o0 = cb * {part}L, o1 = o0 + {part}L < {o}L ? o0 + {part}L : {o}L;",
            # blocks of tile rows balanced, as the f32 step's (none over block_rows)
            f"    long tr0 = {th}L * blk / {blocks}L, tr1 = {th}L * (blk + 1) / {blocks}L;",
            f"    long tb = (img1 - img0) * (tr1 - tr0) * {tw}L, op = o1 - o0;",
        ]

    def _row(self, h: int, w: int, tw: int, dest: str) -> list[str]:
        """One tile row of channel ``ch`` transformed into ``dest[ab * tw + tc]``."""
        s = self.step
        xs = self.x.strides
        pt, pl = s.padding
        lo = max(0, -(-pl // 2))
        hi = max(lo, min(tw, (w - 4 + pl) // 2 + 1))
        store = [f"{dest}[{a * 4 + b} * {tw}L + tc] = v{a}{b};" for a in range(4) for b in range(4)]
        interior = [
            f"const float d{a}{b} = r{a}[(2 * tc - {pl}L + {b}) * {xs[3]}L];"
            for a in range(4)
            for b in range(4)
        ]
        edge = [
            f"const float d{a}{b} = (iw + {b} >= 0 && iw + {b} < {w}L) ? "
            f"r{a}[(iw + {b}) * {xs[3]}L] : 0.0f;"
            for a in range(4)
            for b in range(4)
        ]
        transform = _transform("v", "d")
        return [
            f"const float* xc = x + ch * {xs[1]}L;",
            *[
                f"long ih{a} = 2 * tr - {pt}L + {a};\n"
                f"const float* r{a} = (ih{a} >= 0 && ih{a} < {h}L) ? xc + ih{a} * {xs[2]}L "
                f": {self.name}_zero + 4;"
                for a in range(4)
            ],
            "#pragma omp simd",
            f"for (long tc = {lo}L; tc < {hi}L; ++tc) {{",
            *[f"  {line}" for line in interior + transform + store],
            "}",
            f"for (long tc = 0; tc < {tw}L; ++tc) {{",
            f"  if (tc >= {lo}L && tc < {hi}L) continue;",
            f"  long iw = 2 * tc - {pl}L;",
            *[f"  {line}" for line in edge + transform + store],
            "}",
        ]

    def pair_transform(
        self, c: int, h: int, w: int, tw: int, q0: str = "0L", q1: str = "pairs"
    ) -> list[str]:
        """The image's tiles of channels ``2q``, ``2q + 1`` (``q0 <= q < q1``) into ``V``'s
        pair panels."""
        second = [f"  {line}" for line in self._row(h, w, tw, "t1")]
        return [
            f"  for (long q = {q0}; q < {q1}; ++q) {{",
            "    for (long tr = tr0; tr < tr1; ++tr) {",
            f"      long base = base0 + (tr - tr0) * {tw}L;",
            "      {",
            "        long ch = 2 * q;",
            *[f"        {line}" for line in self._row(h, w, tw, "t0")],
            "      }",
            f"      if (2 * q + 1 < {c}L) {{",
            "        long ch = 2 * q + 1;",
            *[f"      {line}" for line in second],
            "      } else {",
            f"        for (long j = 0; j < {16 * tw}L; ++j) t1[j] = 0.0f;",
            "      }",
            f"      for (long s0 = 0; s0 < {tw}L;) {{",
            "        long col = base + s0, room = 32L - (col & 31L);",
            f"        long len = {tw}L - s0 < room ? {tw}L - s0 : room;",
            "        uint32_t* d = V + (col >> 5) * pairs * 32L + q * 32L + (col & 31L);",
            "        for (int ab = 0; ab < 16; ++ab) {",
            "          uint32_t* dd = d + ab * vs;",
            f"          const float* a0 = t0 + ab * {tw}L + s0;",
            f"          const float* a1 = t1 + ab * {tw}L + s0;",
            "          #pragma omp simd",
            "          for (long j = 0; j < len; ++j)",
            "            dd[j] = og_bf16_bits(a0[j]) | og_bf16_bits(a1[j]) << 16;",
            "        }",
            "        s0 += len;",
            "      }",
            "    }",
            "  }",
        ]

    def output_transform(self, oh: int, ow: int, tw: int) -> list[str]:
        """``Aᵀ M A`` of a tile row into four f32 rows (vectorized across tiles), then
        interleaved into the two output rows."""
        ys = self.out.strides
        sums = output_sums(lambda x: f"M[{x} * ms + (oc - o0) * tb + col]")
        outs = [
            f"e{i}0[tc] = r{i}0 + r{i}1 + r{i}2; e{i}1[tc] = r{i}1 - r{i}2 - r{i}3;"
            for i in range(2)
        ]

        def interleave(i: int) -> list[str]:
            return output_row(i, ow, tw, lambda t: f"e{i}0[{t}]", lambda t: f"e{i}1[{t}]")

        return [
            "    for (long oc = o0; oc < o1; ++oc) {",
            f"      float* yc = y0 + img * {ys[0]}L + oc * {ys[1]}L;",
            "      for (long tr = tr0; tr < tr1; ++tr) {",
            f"        long base = base0 + (tr - tr0) * {tw}L;",
            f"        float* y_0 = yc + (2 * tr) * {ys[2]}L;",
            f"        float* y_1 = yc + (2 * tr + 1) * {ys[2]}L;",
            "        #pragma omp simd",
            f"        for (long tc = 0; tc < {tw}L; ++tc) {{",
            "          long col = base + tc;",
            *[f"          {line}" for line in sums + outs],
            "        }",
            *[f"        {line}" for line in interleave(0)],
            f"        if (2 * tr + 1 < {oh}L) {{",
            *[f"          {line}" for line in interleave(1)],
            "        }",
            "      }",
            "    }",
        ]


@dialect.helper("bf16_wgemm")
def _bf16_wgemm() -> str:
    cases = switch_cases("OG_WMK")
    return f"""/* C (M x N f32, rows ldc apart) = A (M x K bf16 rows, lda apart, one readable
   element after the last) times P (K x N as pair panels: per 32 columns, `pairs` rows of
   32 pairs). */
static void og_bf16_wgemm(const uint16_t* restrict A, long lda, const uint32_t* restrict P,
                          long pairs, float* restrict C, long ldc, long M, long N, long K) {{
  for (long k0 = 0; k0 < K; k0 += {DEPTH}) {{
    long k1 = k0 + {DEPTH} < K ? k0 + {DEPTH} : K, kp = (k1 - k0 + 1) / 2;
    long tile = og_bf16_tile(M);
    for (long nb = 0; nb * 32 < N; ++nb) {{
      long valid = N - nb * 32 < 32 ? N - nb * 32 : 32;
      const uint32_t* b = P + (nb * pairs + k0 / 2) * 32;
      for (long m = 0; m < M; m += tile) {{
        int rows = M - m < tile ? (int)(M - m) : (int)tile;
#define OG_WMK(R) og_bf16_mk##R(A + m * lda + k0, lda, b, kp, C + m * ldc + nb * 32, ldc, \\
                                valid, k0 > 0)
        switch (rows) {{ {cases} default: break; }}
#undef OG_WMK
      }}
    }}
  }}
}}"""


def _emit(step: Bf16WinogradStep, i: int, module: ModuleContext) -> Emitted:
    checks: list[Check] = []
    cls = Bf16PairWinogradEmitter if fits(step) else Bf16WinogradEmitter
    text = cls(step, f"g{i}", module, checks).emit()
    return text, f"if ((e = g{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


#: Replaces bf16.EMITTERS' entry for the Winograd step (``module.STEP_EMITTERS``).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], Emitted]] = {
    Bf16WinogradStep: _emit,
}
