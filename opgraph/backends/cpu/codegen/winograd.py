"""Generate the C of a Winograd F(2x2, 3x3) or F(4x4, 3x3) convolution step (``WinogradStep``;
``tile`` 4: the transforms of ``codegen/winograd_f4.py``, 36 products per 6x6 tile).

Each 2x2 block of outputs is computed from a 4x4 input tile with 16 products instead of 36:
``Y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A`` (Lavin & Gray). The filter transform ``U = G g Gᵀ`` is done at
compile time (a constant of shape (16, O, C)). A unit is one block of tile rows of one image,
or all tile rows of a few images (small planes: the batch folds into the products' columns),
and one block of output channels (``WinogradStep.channel_blocks``):

1. input transform of the block's tiles into this thread's scratch, ``V[ξ][c][tile]`` (the
   planes ``V[ξ]`` and ``M[ξ]`` ``winograd_tiles.plane_stride`` apart, not packed);
2. 16 GEMMs ``M[ξ] = U[ξ] (O' x C) · V[ξ] (C x tiles)`` (OpenBLAS) for the unit's O' channels;
3. output transform ``Aᵀ M A`` into the output rows, then the epilogue on them.

Interior tiles load without bounds tests (rows outside the data read a zero row), so the
transforms vectorize across tiles; edge tiles test each tap.
"""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.cpu.codegen import winograd_f4
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.cpu.config import l2_cache_bytes
from opgraph.backends.fused.lowering.winograd_tiles import (
    FLIPPED_POINTS,
    padded_row,
    plane_stride,
    scratch_per_thread,
)
from opgraph.backends.fused.program import WinogradStep
from opgraph.backends.fused.views import static, static_all
from opgraph.core.dim import Dim

# (Bᵀ d) then (·) B, for the four rows/columns of a tile.
_BT = ("{0} - {2}", "{1} + {2}", "{2} - {1}", "{1} - {3}")


def _transform(prefix: str, source: str) -> list[str]:
    """``{prefix}[a][b] = (Bᵀ {source} B)[a][b]`` as straight-line C."""
    lines = []
    for a in range(4):  # t[a][b] = (Bᵀ d)[a][b]
        for b in range(4):
            rows = [f"{source}{r}{b}" for r in range(4)]
            lines.append(f"const float t{a}{b} = {_BT[a].format(*rows)};")
    for a in range(4):
        for b in range(4):
            cols = [f"t{a}{c}" for c in range(4)]
            lines.append(f"const float {prefix}{a}{b} = {_BT[b].format(*cols)};")
    return lines


def image_loop(
    tw: int, body: list[str], x_stride: Dim | None = None, indent: str = "  "
) -> list[str]:
    """A unit's loop over its images ``img0`` to ``img1``: ``base0`` (the image's first tile
    of the unit's ``tw``-wide tile rows) and, given the input's image stride, the image's
    input ``x``; ``body`` indented by ``indent`` more."""
    image = [f"      const float* x = x0 + img * {x_stride}L;"] if x_stride is not None else []
    return [
        "    for (long img = img0; img < img1; ++img) {",
        *image,
        f"      long base0 = (img - img0) * (tr1 - tr0) * {tw}L;",
        *[f"{indent}{line}" for line in body],
        "    }",
    ]


#: Input channels per OpenBLAS call of a unit's products ``M[ξ] = U[ξ] · V[ξ]`` (f32; each
#: call after the first adds to ``M[ξ]``, ``beta`` 1), where the unit has more and each call
#: stays within :data:`PRODUCT_DEPTH_WORK`. The whole depth in one call read its ``U[ξ]`` rows
#: and ``V[ξ]`` block past L1 (64 x 256 + 256 x 49 floats, 114 KB, for ResNet's 14x14 layers
#: against a 48 KiB L1d). C loop over 16 operand sets, one thread, thread CPU, shapes
#: alternated in 41 rounds, Intel Xeon model 207 (AVX-512, 48 KiB L1d, 2 MiB L2), SkylakeX
#: kernels, GF/s median, one call / blocks of 128: 64x49x256 102.6 / 116.2, 104.7 / 116.5,
#: 87.8 / 92.3, 101.6 / 103.9; 128x49x256 (the one-thread build's) 79.0 / 103.1, 86.3 / 112.9;
#: 64x49x512 73.7 / 88.7, 74.3 / 91.3; 64x98x256 82.9 / 101.4, 82.4 / 95.2; blocks of 64 were
#: slower for K = 128 (126.5 -> 121.9, 124.8 -> 118.7). Only in builds of
#: :data:`PRODUCT_DEPTH_LANES` f32 lanes (AVX-512: OpenBLAS' AVX-512 kernels): an AVX2 build
#: loads its Haswell kernels, where the same loop measured the split level to 7 % slower
#: (64x49x256 48.9 / 48.8 and 52.1 / 48.5, 128x49x256 52.1 / 49.2). The sums change rounding:
#: two partial sums added instead of one running sum (docs/performance.md, 2026-11-28, h140).
PRODUCT_DEPTH = 128
#: The vector lanes (``ModuleContext.vector_lanes``) of builds that split the depth.
PRODUCT_DEPTH_LANES = 16
#: Multiply-adds (rows x tiles x depth) of one unit's product up to which its depth is split
#: (:data:`PRODUCT_DEPTH`): the largest products measured were 1.6 M.
PRODUCT_DEPTH_WORK = 1 << 21

#: Filters (all planes, bytes) above which an f32 step's products prefetch into L2, before each
#: product call, the unit's filter slice of the next call (``prefetcht1``, the slice's rows
#: line by line), in a module that does not keep its buffers in L3 (``panels_resident``:
#: ``dialect.RESIDENT_BYTES``). Each unit reads its block of filters once a call, from memory
#: in such a module (ResNet-18: 45-55 MB of weights), and OpenBLAS then waits on every line
#: of it; filters within half the L2 (:func:`~opgraph.backends.cpu.config.l2_cache_bytes`)
#: are read again by the thread's other units, and the prefetch only costs there (ResNet-18's
#: 64 x 56x56 F(4x4) layers, 0.59 MB of filters: +2-3 % with it). ResNet-18 b1 in one process
#: against the build without it, Intel Xeon model 207 (2 MiB L2), per-step minima: one
#: thread, the 256 x 14x14 F(2x2) layers (4.2 MB) -4 to -5.5 %, the 128 x 28x28 F(4x4) layers
#: (2.4 MB) -3.5 to -5 %; two threads, the 14x14 layers -3 to -7 % (docs/performance.md,
#: 2026-11-28, h149). A hint: outputs bitwise equal.
PREFETCH_FILTER_BYTES = l2_cache_bytes() // 2


def product_depth(rows: int, tiles: int, depth: int) -> int:
    """Input channels per call of a Winograd unit's f32 products of ``rows`` output channels
    by ``tiles`` tiles over ``depth`` input channels (:data:`PRODUCT_DEPTH`; ``depth``: one
    call)."""
    if depth <= PRODUCT_DEPTH or rows * tiles * depth > PRODUCT_DEPTH_WORK:
        return depth
    return PRODUCT_DEPTH


class WinogradEmitter:
    """``static int <name>(T, A, lo, hi)`` over (image, tile-row block) units."""

    gemm = "scipy_cblas_sgemm"  # the bf16 variant calls its own (codegen/bf16.py)
    #: Whether the products split their depth (:func:`product_depth`; f32 OpenBLAS only).
    splits_depth = True
    #: Whether a step split into output-channel blocks transforms its input once for all of
    #: them (``WinogradStep.shared``); the bf16 and symbolic-batch variants transform per unit.
    shares_transform = True

    def __init__(
        self,
        step: WinogradStep,
        name: str,
        module: ModuleContext,
        checks: list[Check] | None = None,
    ) -> None:
        assert step.x is not None and step.u is not None and step.out is not None
        assert step.scratch is not None
        self.step, self.name, self.module = step, name, module
        self.checks: list[Check] = checks if checks is not None else []
        self.x, self.u, self.out, self.scratch = step.x, step.u, step.out, step.scratch
        self.m = step.tile  # outputs per tile side: F(2x2, 3x3) or F(4x4, 3x3)
        self.t = step.tile + 2  # inputs per tile side
        self.shared = 0  # blocks of tiles transformed once by <name>_in (emit sets it)
        self.layout = (1, "", 1, 1, 0)  # (blocks, img1, tile rows, tile columns, per thread)

    def emit(self) -> str:
        self.module.uses_blas = True
        s = self.step
        n = self.x.shape[0]
        c, h, w = static_all(self.x.shape[1:])  # only the batch may be symbolic
        o, oh, ow = static_all(self.out.shape[1:])
        m, taps = self.m, self.t * self.t
        th, tw = -(-oh // m), -(-ow // m)
        blocks = -(-th // s.block_rows)
        part = -(-o // s.channel_blocks)  # output channels of one unit at most
        tb = s.images * s.block_rows * tw
        pl = s.padding[1]
        row = padded_row(w, pl, ow, m)
        per_thread = scratch_per_thread(c, part, tb, m, row)
        groups = n if s.images == 1 else -(-static(n) // s.images)
        last = (
            "img0 + 1"
            if s.images == 1
            else f"img0 + {s.images}L < {n}L ? img0 + {s.images}L : {n}L"
        )
        kind = f"F({m}x{m},3x3)"
        head = [f"/* {self.name}: Winograd {kind}: {s.label.replace('*/', '* /')} */"]
        head += self.step_head(w)
        self.shared = s.shared if self.shares_transform else 0
        self.layout = (blocks, last, th, tw, per_thread)
        if self.shared:
            head += self.shared_transform(c, h, w, tw, row)
        body = [
            *self.unit_opening(),
            "  for (long unit = lo; unit < hi; ++unit) {",
            f"    long cb = unit % {s.channel_blocks}L, rest = unit / {s.channel_blocks}L;",
            f"    long img0 = (rest / {blocks}L) * {s.images}L, blk = rest % {blocks}L;",
            f"    long img1 = {last};",
            f"    long o0 = cb * {part}L, o1 = o0 + {part}L < {o}L ? o0 + {part}L : {o}L;",
            # blocks of tile rows balanced (14 rows in 4 units: 4, 3, 4, 3, not 4, 4, 4, 2:
            # two threads then finish together), none larger than block_rows
            f"    long tr0 = {th}L * blk / {blocks}L, tr1 = {th}L * (blk + 1) / {blocks}L;",
            f"    long tb = (img1 - img0) * (tr1 - tr0) * {tw}L, op = o1 - o0;",
            f"    float* V = scratch + (long)og_worker_index() * {per_thread}L;",
            f"    long vs = {plane_stride(f'{c}L * tb')}, ms = {plane_stride('op * tb')};",
            f"    float* M = V + {taps}L * vs;",
            f"    float* P = V + {per_thread - self.t * row}L;  /* padded input rows */",
            *self.transformed_tiles(c, h, w, tw, row, per_thread),
            *self.products(o, c, taps),
            *self.unit_tail(o, oh, ow, tw, groups * blocks * s.channel_blocks),
        ]
        return "\n".join(head + body)

    def products(self, o: int, c: int, taps: int) -> list[str]:
        """The unit's ``taps`` products ``M[xi] = U[xi] · V[xi]`` (its ``op`` output
        channels from ``o0``); a flipped step reads ``U[xi]`` as ``u[flip(xi)]ᵀ``."""
        v = "V + xi * vs, (int)tb, 0, M + xi * ms, (int)tb);"
        if not self.step.flipped:
            kb = self.depth(o, c)
            if kb < c:
                return self.split_products(o, c, taps, kb)
            return [
                f"    for (int xi = 0; xi < {taps}; ++xi) {{",
                *self.prefetch_next(o, c, taps, c),
                f"      {self.gemm}(101, 111, 111, (int)op, (int)tb, {c}, 1, "
                f"u0 + xi * {o * c}L + o0 * {c}L, {c}, {v}",
                "    }",
            ]
        assert self.m == 2, "flipped filters are F(2x2, 3x3)'s"
        return [
            f"    for (int xi = 0; xi < {taps}; ++xi)",
            f"      {self.gemm}(101, 112, 111, (int)op, (int)tb, {c}, 1, "
            f"u0 + {self.name}_flip[xi] * {o * c}L + o0, {o}, {v}",
        ]

    def depth(self, o: int, c: int) -> int:
        """Input channels per product call (:func:`product_depth` of the largest unit)."""
        s = self.step
        if not self.splits_depth or self.module.vector_lanes != PRODUCT_DEPTH_LANES:
            return c
        tw = -(-static(self.out.shape[3]) // self.m)
        return product_depth(-(-o // s.channel_blocks), s.images * s.block_rows * tw, c)

    def split_products(self, o: int, c: int, taps: int, kb: int) -> list[str]:
        """The unit's products in calls of ``kb`` input channels, each after the first adding
        to ``M[xi]``."""
        return [
            f"    for (int xi = 0; xi < {taps}; ++xi)",
            f"      for (long k0 = 0; k0 < {c}L; k0 += {kb}L) {{",
            *self.prefetch_next(o, c, taps, kb),
            f"        {self.gemm}(101, 111, 111, (int)op, (int)tb, "
            f"(int)(k0 + {kb}L < {c}L ? {kb}L : {c}L - k0), 1, "
            f"u0 + xi * {o * c}L + o0 * {c}L + k0, {c}, V + xi * vs + k0 * tb, (int)tb, "
            "k0 ? 1.0f : 0.0f, M + xi * ms, (int)tb);",
            "      }",
        ]

    def prefetch_next(self, o: int, c: int, taps: int, kb: int) -> list[str]:
        """Lines before a product call (plane ``xi``, input channels from ``k0``; ``kb``
        of them a call) that prefetch into L2 the unit's filter slice of the next call
        (:data:`PREFETCH_FILTER_BYTES`); none for the last plane's last call."""
        size = self.u.element_type.itemsize
        if self.module.panels_resident or taps * o * c * size <= PREFETCH_FILTER_BYTES:
            return []
        k0 = "k0" if kb < c else "0L"
        return [
            f"        {{ long nx = xi, nk = {k0} + {kb}L;",
            f"          if (nk >= {c}L) {{ nx = xi + 1; nk = 0; }}",
            f"          if (nx < {taps}) {{",
            f"            const char* q = (const char*)(u0 + nx * {o * c}L + o0 * {c}L + nk);",
            f"            long bytes = (nk + {kb}L < {c}L ? {kb}L : {c}L - nk) * {size}L;",
            "            for (long r = 0; r < op; ++r)",
            "              for (long b = 0; b < bytes; b += 64)",
            f"                __builtin_prefetch(q + r * {size * c}L + b, 0, 2);",
            "          } }",
        ]

    def step_head(self, w: int) -> list[str]:
        """What precedes the unit function: the fused epilogue's loop (when there is one)
        and the zero row the padded input rows copy from (``w`` input columns)."""
        head = []
        if self.step.epilogue is not None:
            label = "epilogue of " + self.name
            ep = CLoopEmitter(
                self.step.epilogue, f"{self.name}_ep", self.module, label, self.checks
            )
            head.append(ep.emit())
        head.append(f"static const float {self.name}_zero[{w + 16}];")
        if self.step.flipped:
            flip = ", ".join(str(p) for p in FLIPPED_POINTS)
            head.append(f"static const int {self.name}_flip[{len(FLIPPED_POINTS)}] = {{{flip}}};")
        return head

    def unit_opening(self) -> list[str]:
        """The unit function's signature and its operand pointers."""
        return [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.u, "u0", True),
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.scratch, "scratch", False),
        ]

    def unit_tail(self, o: int, oh: int, ow: int, tw: int, units: Dim) -> list[str]:
        """The end of a unit after its products (the output transform and the fused
        epilogue per image, the unit's close) and the step's run function over ``units``."""
        return [
            *image_loop(tw, [*self.output_transform(oh, ow, tw), *self.epilogue_calls(o, oh, ow)]),
            "  }",
            "  return err;",
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            *self.transform_phase(),
            f"  return {self.dispatch(units)};",
            "}",
        ]

    # -------------------------------------------- one input transform for all channel blocks
    def shared_row(self, rest: str) -> str:
        """The scratch row holding the transformed tiles of block of tiles ``rest``."""
        first = static(self.scratch.shape[0]) - self.shared
        return f"scratch + ({first}L + {rest}) * {self.layout[4]}L"

    def transformed_tiles(
        self, c: int, h: int, w: int, tw: int, row: int, per_thread: int
    ) -> list[str]:
        """A unit's transformed input tiles in ``V``: transformed here, or (``shared``) read
        from the row its block of tiles was transformed into by ``<name>_in``."""
        if self.shared:
            return [f"    V = {self.shared_row('rest')};"]
        return image_loop(tw, self.input_transform(c, h, w, tw, row), self.x.strides[0])

    def chunks(self, c: int) -> int:
        """Input-channel chunks per block of tiles in ``<name>_in`` (its units)."""
        return min(c, 4 * self.module.num_threads)

    def shared_head(self, c: int, channels: Sequence[str] = ()) -> list[str]:
        """``<name>_in``'s opening: its units are (block of tiles, chunk of channels), the
        unit's images and tile rows; ``channels``: lines naming the chunk's channel range."""
        blocks, last, th, tw, _ = self.layout
        chunks = self.chunks(c)
        opening = self.unit_opening()
        opening[0] = opening[0].replace(f"static int {self.name}(", f"static int {self.name}_in(")
        return [
            *opening,
            "  (void)u0; (void)y0;",
            "  for (long unit = lo; unit < hi; ++unit) {",
            f"    long chunk = unit % {chunks}L, rest = unit / {chunks}L;",
            f"    long img0 = (rest / {blocks}L) * {self.step.images}L, blk = rest % {blocks}L;",
            f"    long img1 = {last};",
            *channels,
            f"    long tr0 = {th}L * blk / {blocks}L, tr1 = {th}L * (blk + 1) / {blocks}L;",
            f"    long tb = (img1 - img0) * (tr1 - tr0) * {tw}L;",
        ]

    def shared_transform(self, c: int, h: int, w: int, tw: int, row: int) -> list[str]:
        """``<name>_in``: units (block of tiles, chunk of input channels), each transforming
        its channels' tiles into the block's shared row (every channel-block unit of that
        block reads them: the input is transformed once, not once per channel block)."""
        per_thread, chunks = self.layout[4], self.chunks(c)
        lines = self.input_transform(c, h, w, tw, row)
        loop = f"    for (long ch = 0; ch < {c}L; ++ch) {{"
        assert lines.count(loop) == 1, "the input transform loops over the channels once"
        lines[lines.index(loop)] = "    for (long ch = c0; ch < c1; ++ch) {"
        return [
            *self.shared_head(
                c, [f"    long c0 = {c}L * chunk / {chunks}L, c1 = {c}L * (chunk + 1) / {chunks}L;"]
            ),
            f"    long vs = {plane_stride(f'{c}L * tb')};",
            f"    float* V = {self.shared_row('rest')};",
            f"    float* P = scratch + (long)og_worker_index() * {per_thread}L + "
            f"{per_thread - self.t * row}L;",
            *image_loop(tw, lines, self.x.strides[0]),
            "  }",
            "  return err;",
            "}",
        ]

    def transform_phase(self) -> list[str]:
        """The ``_run`` statements that run ``<name>_in`` first (``shared``)."""
        if not self.shared:
            return []
        units = self.shared * self.chunks(static_all(self.x.shape[1:])[0])
        if units > 1 and self.module.num_threads > 1:
            self.module.uses_pool = True
            call = f"og_parallel({self.name}_in, T, A, {units}L, 1L, {self.module.num_threads})"
        else:
            call = f"{self.name}_in(T, A, 0, {units}L)"
        return [f"  int e_ = {call};", "  if (e_) return e_;"]

    def dispatch(self, units: Dim) -> str:
        units = static(units)  # a static module (SymbolicWinogradEmitter takes the batch)
        if units > 1 and self.module.num_threads > 1:
            self.module.uses_pool = True
            return f"og_parallel({self.name}, T, A, {units}L, 1L, {self.module.num_threads})"
        return f"{self.name}(T, A, 0, {units}L)"

    def input_transform(self, c: int, h: int, w: int, tw: int, row: int) -> list[str]:
        s = self.step
        xs = self.x.strides
        pt, pl = s.padding
        m, t = self.m, self.t
        # interior tiles: columns m*tc - pl .. +t-1 all inside [0, w)
        lo = max(0, -(-pl // m))
        hi = max(lo, min(tw, (w - t + pl) // m + 1))
        if m == 4:
            return self.f4_input_transform(c, h, w, tw, row)
        if (lo > 0 or hi < tw) and xs[3] == 1:
            return self.padded_input_transform(c, h, w, tw, row)
        store = [
            f"V[{a * t + b}L * vs + ch * tb + col] = v{a}{b};" for a in range(t) for b in range(t)
        ]
        interior_loads = [
            f"const float d{a}{b} = r{a}[({m} * tc - {pl}L + {b}) * {xs[3]}L];"
            for a in range(t)
            for b in range(t)
        ]
        edge_loads = [
            f"const float d{a}{b} = (iw + {b} >= 0 && iw + {b} < {w}L) ? "
            f"r{a}[(iw + {b}) * {xs[3]}L] : 0.0f;"
            for a in range(t)
            for b in range(t)
        ]
        transform = _transform("v", "d") if m == 2 else winograd_f4.input_transform("v", "d")
        return [
            f"    for (long ch = 0; ch < {c}L; ++ch) {{",
            f"      const float* xc = x + ch * {xs[1]}L;",
            "      for (long tr = tr0; tr < tr1; ++tr) {",
            *[
                f"        long ih{a} = {m} * tr - {pt}L + {a};\n"
                f"        const float* r{a} = (ih{a} >= 0 && ih{a} < {h}L) ? xc + ih{a} * {xs[2]}L "
                f": {self.name}_zero + {t};"
                for a in range(t)
            ],
            f"        long base = base0 + (tr - tr0) * {tw}L;",
            "        #pragma omp simd",
            f"        for (long tc = {lo}L; tc < {hi}L; ++tc) {{",
            "          long col = base + tc;",
            *[f"          {line}" for line in interior_loads + transform + store],
            "        }",
            f"        for (long tc = 0; tc < {tw}L; ++tc) {{",
            f"          if (tc >= {lo}L && tc < {hi}L) continue;",
            f"          long col = base + tc, iw = {m} * tc - {pl}L;",
            *[f"          {line}" for line in edge_loads + transform + store],
            "        }",
            "      }",
            "    }",
        ]

    def f4_input_transform(self, c: int, h: int, w: int, tw: int, row: int) -> list[str]:
        """F(4x4, 3x3): ``og_wino4_in`` per tile row of each channel, from zero-padded row
        copies."""
        self.module.helper("wino4_in")
        xs = self.x.strides
        pt, pl = self.step.padding
        rows = []
        for a in range(6):
            rows += [
                f"        long ih{a} = 4 * tr - {pt}L + {a};",
                f"        if (ih{a} >= 0 && ih{a} < {h}L) "
                f"__builtin_memcpy(P + {a * row + pl}L, xc + ih{a} * {xs[2]}L, {4 * w});",
                f"        else __builtin_memset(P + {a * row + pl}L, 0, {4 * w});",
            ]
        return [
            f"    __builtin_memset(P, 0, {4 * 6 * row});  /* the padding columns stay zero */",
            f"    const float* r[6] = {{{', '.join(f'P + {a * row}L' for a in range(6))}}};",
            f"    for (long ch = 0; ch < {c}L; ++ch) {{",
            f"      const float* xc = x + ch * {xs[1]}L;",
            "      for (long tr = tr0; tr < tr1; ++tr) {",
            *rows,
            f"        long base = base0 + (tr - tr0) * {tw}L;",
            f"        og_wino4_in(r, V + ch * tb + base, vs, {tw}L);",
            "      }",
            "    }",
        ]

    def padded_input_transform(self, c: int, h: int, w: int, tw: int, row: int) -> list[str]:
        """The input transform with tiles past the image's columns: each tile row's input
        rows are copied into zero-padded rows ``P`` first, so every tile loads without
        bounds tests (vectorized across tiles)."""
        xs = self.x.strides
        pt, pl = self.step.padding
        m, t = self.m, self.t
        loads = [f"const float d{a}{b} = p{a}[{m} * tc + {b}];" for a in range(t) for b in range(t)]
        store = [
            f"V[{a * t + b}L * vs + ch * tb + col] = v{a}{b};" for a in range(t) for b in range(t)
        ]
        transform = _transform("v", "d") if m == 2 else winograd_f4.input_transform("v", "d")
        copies = [
            f"        long ih{a} = {m} * tr - {pt}L + {a};\n"
            f"        float* restrict p{a} = P + {a * row}L;\n"
            f"        if (ih{a} >= 0 && ih{a} < {h}L) "
            f"__builtin_memcpy(p{a} + {pl}L, xc + ih{a} * {xs[2]}L, {4 * w});\n"
            f"        else __builtin_memset(p{a} + {pl}L, 0, {4 * w});"
            for a in range(t)
        ]
        return [
            f"    __builtin_memset(P, 0, {4 * t * row});  /* the padding columns stay zero */",
            f"    for (long ch = 0; ch < {c}L; ++ch) {{",
            f"      const float* xc = x + ch * {xs[1]}L;",
            "      for (long tr = tr0; tr < tr1; ++tr) {",
            *copies,
            f"        long base = base0 + (tr - tr0) * {tw}L;",
            "        #pragma omp simd",
            f"        for (long tc = 0; tc < {tw}L; ++tc) {{",
            "          long col = base + tc;",
            *[f"          {line}" for line in loads + transform + store],
            "        }",
            "      }",
            "    }",
        ]

    def f4_output_transform(self, oh: int, ow: int, tw: int) -> list[str]:
        """F(4x4, 3x3): ``og_wino4_out`` per tile row of each output channel."""
        ys = self.out.strides
        self.module.helper("wino4_out")
        return [
            "    for (long oc = o0; oc < o1; ++oc) {",
            f"      float* yc = y0 + img * {ys[0]}L + oc * {ys[1]}L;",
            "      const float* mb = M + (oc - o0) * tb;",
            "      float* y[4];",
            "      for (long tr = tr0; tr < tr1; ++tr) {",
            f"        for (int i = 0; i < 4; ++i) y[i] = yc + (4 * tr + i) * {ys[2]}L;",
            f"        og_wino4_out(mb + base0 + (tr - tr0) * {tw}L, ms, y, {tw}L, "
            f"{ow}L, {oh}L - 4 * tr);",
            "      }",
            "    }",
        ]

    def output_transform(self, oh: int, ow: int, tw: int) -> list[str]:
        ys = self.out.strides
        m, t = self.m, self.t
        if m == 4:
            return self.f4_output_transform(oh, ow, tw)
        # M[ξ][oc - o0][col]: one base pointer per output channel, ξ's planes ss apart
        loads = [
            f"const float m{a}{b} = mb[{a * t + b}L * ss + col];"
            for a in range(t)
            for b in range(t)
        ]
        if m == 2:
            transform = [
                f"const float r0{b} = m0{b} + m1{b} + m2{b}; "
                f"const float r1{b} = m1{b} - m2{b} - m3{b};"
                for b in range(4)
            ] + [
                f"const float y{i}0 = r{i}0 + r{i}1 + r{i}2; "
                f"const float y{i}1 = r{i}1 - r{i}2 - r{i}3;"
                for i in range(2)
            ]
        else:
            transform = winograd_f4.output_transform("m")
        stores, full = [], []
        for i in range(m):
            row = [f"if ({m} * tc + {j} < {ow}L) " if j else "" for j in range(m)]
            cells = " ".join(f"{row[j]}y_{i}[{m} * tc + {j}] = y{i}{j};" for j in range(m))
            stores.append(f"          if (rows > {i}) {{ {cells} }}" if i else f"          {cells}")
            full.append(" ".join(f"y_{i}[{m} * tc + {j}] = y{i}{j};" for j in range(m)))
        whole = ow // m  # tiles whose columns are all inside the row
        body = [f"          {line}" for line in loads + transform]
        return [
            "    for (long oc = o0; oc < o1; ++oc) {",
            f"      float* yc = y0 + img * {ys[0]}L + oc * {ys[1]}L;",
            "      const float* mb = M + (oc - o0) * tb;",
            "      const long ss = ms;",
            "      for (long tr = tr0; tr < tr1; ++tr) {",
            f"        long base = base0 + (tr - tr0) * {tw}L;",
            *[f"        float* y_{i} = yc + ({m} * tr + {i}) * {ys[2]}L;" for i in range(m)],
            f"        long rows = {oh}L - {m} * tr, tc0 = 0;",
            f"        if (rows >= {m}L) {{  /* whole tiles: vectorized across tiles */",
            f"          tc0 = {whole}L;",
            "          #pragma omp simd",
            f"          for (long tc = 0; tc < {whole}L; ++tc) {{",
            "            long col = base + tc;",
            *[f"  {line}" for line in body],
            *[f"            {line}" for line in full],
            "          }",
            "        }",
            f"        for (long tc = tc0; tc < {tw}L; ++tc) {{",
            "          long col = base + tc;",
            *body,
            *stores,
            "        }",
            "      }",
            "    }",
        ]

    def epilogue_calls(self, o: int, oh: int, ow: int) -> list[str]:
        if self.step.epilogue is None:
            return []
        m = self.m
        return [
            f"    long row0 = {m} * tr0, row1 = {m} * tr1 < {oh}L ? {m} * tr1 : {oh}L;",
            "    for (long oc = o0; oc < o1; ++oc) {",
            f"      long at_ = img * {o * oh * ow}L + oc * {oh * ow}L + row0 * {ow}L;",
            f"      err |= {self.name}_ep(T, A, at_, at_ + (row1 - row0) * {ow}L);",
            "    }",
        ]
