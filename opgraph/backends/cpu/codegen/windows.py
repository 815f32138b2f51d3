"""Generate the C of windowed steps: convolution (im2col blocks + GEMM) and pooling.

Both are functions over *units* shared out by the runtime's thread pool: a convolution unit
is one block of output rows of one image and group, a pooling unit one (image, channel)
plane. Patch rows are built with the out-of-bounds columns cut off by arithmetic, so the
inner copy is a plain strided loop.
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.fused.program import ConvStep, PoolStep
from opgraph.backends.fused.views import View, static, static_all
from opgraph.core import element_type as et
from opgraph.core.dim import Dim

#: Average windows with more taps than this sum row by row (see ``PoolEmitter.window``).
LONG_WINDOW = 64


def _pointer(module: ModuleContext, view: View, name: str, const: bool) -> str:
    t = dialect.storage_type(view.element_type)
    q = "const " if const else ""
    return f"  {q}{t}* {name} = ({q}{t}*)({module.base(view.buffer)}) + {module.dim(view.offset)};"


def _driver(name: str, units: int, parallel: bool, threads: int, module: ModuleContext) -> str:
    if parallel and units > 1 and threads > 1:
        module.uses_pool = True
        call = f"og_parallel({name}, T, A, {units}L, 1L, {threads})"
    else:
        call = f"{name}(T, A, 0, {units}L)"
    return f"static int {name}_run(void* const* T, char* A) {{\n  return {call};\n}}"


class ConvEmitter:
    """A convolution step: by blocks of output rows, or "wide" (see ``ConvStep``)."""

    def __init__(
        self, step: ConvStep, name: str, module: ModuleContext, checks: list[Check] | None = None
    ) -> None:
        self.step, self.name, self.module = step, name, module
        self.checks: list[Check] = checks if checks is not None else []
        assert step.x is not None and step.w is not None and step.out is not None
        self.x, self.w, self.out = step.x, step.w, step.out
        self.ctype = dialect.storage_type(step.out.element_type)
        # (Writing patches straight into the panels of the generated GEMM, filters as its left
        # operand, measured slower than OpenBLAS for convolution shapes: small inner
        # dimensions, large filter matrices.)
        self.gemm = "scipy_cblas_sgemm" if step.out.element_type is et.f32 else "scipy_cblas_dgemm"

    def direct(self) -> bool:
        """1x1, stride 1, unpadded, rows contiguous: the image is the GEMM's right operand."""
        s = self.step
        h, w = static_all(self.x.shape[2:])  # only the batch may be symbolic
        xs = self.x.strides
        return (
            s.kernel == (1, 1)
            and s.strides == (1, 1)
            and s.padding == (0, 0)
            and xs[3] == 1
            and (h == 1 or xs[2] == w)
        )

    def emit(self) -> str:
        self.module.uses_blas = True
        head = f"/* {self.name}: {self.step.label.replace('*/', '* /')} */"
        epilogue = []
        if self.step.epilogue is not None:
            label = "epilogue of " + self.name
            ep = CLoopEmitter(
                self.step.epilogue, f"{self.name}_ep", self.module, label, self.checks
            )
            epilogue.append(ep.emit())
        body = self.emit_wide() if self.step.wide else self.emit_rows()
        return "\n".join([head, *epilogue, body])

    def epilogue_rows(
        self, base: str, count: str, stride: int, first: str, length: str
    ) -> list[str]:
        """Run the epilogue over ``count`` output rows starting at flat index ``base``
        (``stride`` apart), columns ``first`` .. ``first + length``."""
        if self.step.epilogue is None:
            return []
        ep = f"{self.name}_ep"
        return [
            f"    for (long q_ = 0; q_ < {count}; ++q_) {{",
            f"      long at_ = {base} + q_ * {stride}L + {first};",
            f"      err |= {ep}(T, A, at_, at_ + {length});",
            "    }",
        ]

    def parallel(self) -> bool:
        n, oh, ow = self.step.images
        return n * self.w.shape[0] * oh * ow * self.w.shape[1] >= PARALLEL_MACS

    def phase(self, fn: str, units: Dim) -> str:
        units = static(units)  # a static module (SymbolicConvEmitter takes the symbolic batch)
        threads = self.module.num_threads
        if self.parallel() and units > 1 and threads > 1:
            self.module.uses_pool = True
            return f"  err |= og_parallel({fn}, T, A, {units}L, 1L, {threads});"
        return f"  err |= {fn}(T, A, 0, {units}L);"

    def emit_rows(self) -> str:
        """Units: (image, group, block of output rows); patches in this thread's scratch."""
        s = self.step
        n, c = self.x.shape[0], static(self.x.shape[1])  # only the batch may be symbolic
        o, k = static_all(self.w.shape)
        _, oh, ow = s.images
        g, xs, ct = s.groups, self.x.strides, self.ctype
        cg, og = c // g, o // g
        blocks = -(-oh // s.block_rows)
        lines = [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, self.out, "y0", False),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long img = u / {g * blocks}L, grp = (u / {blocks}L) % {g}L, blk = u % {blocks}L;",
            f"    long oh0 = blk * {s.block_rows}L;",
            f"    long oh1 = oh0 + {s.block_rows}L < {oh}L ? oh0 + {s.block_rows}L : {oh}L;",
            f"    long cols = (oh1 - oh0) * {ow}L;",
            f"    const {ct}* x = x0 + img * {xs[0]}L + grp * {cg * xs[1]}L;",
            f"    {ct}* y = y0 + img * {o * oh * ow}L + grp * {og * oh * ow}L + oh0 * {ow}L;",
            *self.block_operand(k, ow),
            f"    {self.gemm}(101, 111, 111, {og}, (int)cols, {k}, 1, w0 + grp * {og * k}L, "
            f"{k}, b, (int)ldb, 0, y, {oh * ow});",
            *self.epilogue_rows(
                f"img * {o * oh * ow}L + grp * {og * oh * ow}L",
                f"{og}L",
                oh * ow,
                f"oh0 * {ow}L",
                "cols",
            ),
            "  }",
            "  return err;",
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            "  int err = 0;",
            self.phase(self.name, n * g * blocks),
            "  return err;",
            "}",
        ]
        return "\n".join(lines)

    def block_operand(self, k: int, ow: int) -> list[str]:
        """The GEMM's right operand ``b`` (``ldb``) for a block: the image itself (1x1), or
        its patches built in this thread's slice of the scratch."""
        ct, xs = self.ctype, self.x.strides
        if self.direct():
            return [f"    const {ct}* b = x + oh0 * {ow}L; long ldb = {xs[1]}L;"]
        assert self.step.scratch is not None
        per_thread = k * self.step.block_rows * ow
        scratch = _pointer(self.module, self.step.scratch, "scratch", False).strip()
        return [
            f"    {scratch}",
            f"    {ct}* col = scratch + (long)og_worker_index() * {per_thread}L;",
            f"    for (long r = 0; r < {k}L; ++r) {{",
            f"      {ct}* row = col + r * cols;",
            *[f"    {line}" for line in self.patch_row()],
            "    }",
            f"    const {ct}* b = col; long ldb = cols;",
        ]

    def emit_wide(self) -> str:
        """Phase 1: every patch row of every image into scratch (units: group x patch row).
        Phase 2: one GEMM per group over all images, split into blocks by the larger side."""
        s = self.step
        assert s.scratch is not None
        c = static(self.x.shape[1])  # only the batch may be symbolic
        k = static(self.w.shape[1])
        n, oh, ow = s.images
        g, xs, ct = s.groups, self.x.strides, self.ctype
        cg = c // g
        columns = n * oh * ow
        lines = [
            f"static int {self.name}_patches(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, s.scratch, "scratch", False),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long grp = u / {k}L, r = u % {k}L;",
            f"    for (long img = 0; img < {n}L; ++img) {{",
            f"      const {ct}* x = x0 + img * {xs[0]}L + grp * {cg * xs[1]}L;",
            f"      {ct}* row = scratch + (grp * {k}L + r) * {columns}L + img * {oh * ow}L;",
            f"      long oh0 = 0, oh1 = {oh}L;",
            *[f"    {line}" for line in self.patch_row()],
            "    }",
            "  }",
            "  return 0;",
            "}",
        ]
        gemm, units = self.wide_gemm(columns)
        lines += [
            *gemm,
            f"static int {self.name}_run(void* const* T, char* A) {{",
            "  int err = 0;",
            self.phase(f"{self.name}_patches", g * k),
            self.phase(f"{self.name}_gemm", units),
            "  return err;",
            "}",
        ]
        return "\n".join(lines)

    def wide_gemm(self, columns: Dim) -> tuple[list[str], int]:
        """``<name>_gemm`` over (group, block) units, and the unit count."""
        s = self.step
        assert s.scratch is not None
        columns = static(columns)  # a static module (SymbolicConvEmitter has its own)
        o, k = static_all(self.w.shape)
        og = o // s.groups
        blocks, by_columns = self.gemm_blocks(og, columns, k)
        split, other = ("n", columns) if by_columns else ("m", og)
        m0, m1 = ("0", f"{og}L") if by_columns else ("lo_", "hi_")
        n0, n1 = ("lo_", "hi_") if by_columns else ("0", f"{columns}L")
        lines = [
            f"/* the GEMM is split by {split}: each block packs the other operand once */",
            f"static int {self.name}_gemm(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, s.scratch, "scratch", True),
            _pointer(self.module, self.out, "y0", False),
            "  for (long u = lo; u < hi; ++u) {",
            f"    long grp = u / {blocks}L, blk = u % {blocks}L;",
            f"    long lo_ = {other}L * blk / {blocks}L, hi_ = {other}L * (blk + 1) / {blocks}L;",
            "    if (lo_ >= hi_) continue;",
            f"    {self.gemm}(101, 111, 111, (int)({m1} - {m0}), (int)({n1} - {n0}), {k}, 1, "
            f"w0 + (grp * {og}L + {m0}) * {k}L, {k}, scratch + grp * {k * columns}L + {n0}, "
            f"{columns}, 0, y0 + (grp * {og}L + {m0}) * {columns}L + {n0}, {columns});",
            *self.epilogue_rows(
                f"(grp * {og}L + {m0}) * {columns}L",
                f"({m1} - {m0})",
                columns,
                n0,
                f"({n1} - {n0})",
            ),
            "  }",
            "  return err;",
            "}",
        ]
        return lines, s.groups * blocks

    def gemm_blocks(self, m: int, n: int, k: int) -> tuple[int, bool]:
        """(blocks, split by columns?): split the larger side. A BLAS block packs the whole
        other operand, so one block per thread unless that operand is small."""
        by_columns = n >= m
        extent, other = (n, m) if by_columns else (m, n)
        threads = self.module.num_threads
        per_thread = 1 if other * k * self.out.element_type.itemsize > (1 << 18) else 2
        return max(1, min(threads * per_thread, extent // 16)), by_columns

    def patch_row(self) -> list[str]:
        """Fill ``row`` (output rows oh0..oh1 of patch row ``r``) from image ``x``."""
        s = self.step
        return patch_row(self.x, s.kernel, s.strides, s.dilations, s.padding, s.images[2])


def patch_row(
    x: View,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    padding: tuple[int, int],
    ow: int,
) -> list[str]:
    """C filling ``row`` with output rows ``oh0 .. oh1`` of patch row ``r`` = (channel, ki,
    kj) of image ``x`` (a pointer to the image's first channel, read through ``x``'s strides);
    out-of-bounds columns are cut off by arithmetic, not tested per element."""
    h, w = static_all(x.shape[2:])  # only the batch may be symbolic
    xs, ct = x.strides, dialect.storage_type(x.element_type)
    (sh, sw), (dh, _), (pt, _) = strides, dilations, padding
    return [
        *window_columns(kernel, strides, dilations, padding, w, ow),
        f"  const {ct}* xc = x + ch * {xs[1]}L;",
        "  for (long oh = oh0; oh < oh1; ++oh) {",
        f"    {ct}* d = row + (oh - oh0) * {ow}L;",
        f"    long ih = oh * {sh}L - {pt}L + ki * {dh}L;",
        f"    if (ih < 0 || ih >= {h}L) {{",
        f"      for (long j = 0; j < {ow}L; ++j) d[j] = 0;",
        "      continue;",
        "    }",
        f"    const {ct}* src = xc + ih * {xs[2]}L + shift * {xs[3]}L;",
        "    for (long j = 0; j < lo_; ++j) d[j] = 0;",
        "    #pragma omp simd",
        f"    for (long j = lo_; j < hi_; ++j) d[j] = src[j * {sw * xs[3]}L];",
        f"    for (long j = hi_; j < {ow}L; ++j) d[j] = 0;",
        "  }",
    ]


def window_columns(
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int],
    padding: tuple[int, int],
    w: int,
    ow: int,
) -> list[str]:
    """C declaring patch row ``r``'s channel ``ch`` and tap ``(ki, kj)``, the column
    ``shift`` (input column ``= ow * stride + shift``) and the output columns ``lo_ .. hi_``
    whose input column lies inside ``0 .. w``."""
    (kh, kw), (_, sw), (_, dw), (_, pl) = kernel, strides, dilations, padding
    return [
        f"  long ch = r / {kh * kw}L, ki = (r / {kw}L) % {kh}L, kj = r % {kw}L;",
        f"  long shift = kj * {dw}L - {pl}L;  /* iw = ow * {sw} + shift */",
        f"  long lo_ = shift >= 0 ? 0 : (-shift + {sw - 1}L) / {sw}L;",
        f"  long hi_ = {w}L - 1 - shift < 0 ? 0 : ({w}L - 1 - shift) / {sw}L + 1;",
        f"  if (hi_ > {ow}L) hi_ = {ow}L;",
        "  if (lo_ > hi_) lo_ = hi_;",
    ]


#: Longest padded input row (elements) a max pool keeps as one row of maxima on the stack.
MAX_ROW = 4096
#: Whether max pools run by bands of whole padded rows (``PoolEmitter.plane_max``).
PLANE_MAX = True
#: Elements of the padded band of ``PoolEmitter.plane_max`` at most (on the stack, with its
#: column maxima and output rows: about 14 KB of f32). The stem pool (64x112x112, 3x3 stride
#: 2) measured 1.2x faster with bands of 1024-2048 than of 4096-8192 (one thread, Zen 4);
#: 56x56 planes the same from 2048 up.
PLANE_BAND = 2048


class PoolEmitter:
    """``static int <name>(T, A, lo, hi)`` over (image, channel) planes."""

    def __init__(self, step: PoolStep, name: str, module: ModuleContext) -> None:
        assert step.x is not None and step.out is not None
        self.step, self.name, self.module = step, name, module
        self.x, self.out = step.x, step.out

    def emit(self) -> str:
        s = self.step
        n, c = self.x.shape[0], static(self.x.shape[1])  # only the batch may be symbolic
        oh, ow = static_all(self.out.shape[2:])
        (fh, fw), xs = s.window, self.x.strides
        ctype = dialect.storage_type(self.x.element_type)
        work = n * c * oh * ow * fh * fw
        plane = self.whole_plane()
        strided = plane and s.strides[1] > 1
        lines = [
            f"/* {self.name}: {s.label.replace('*/', '* /')} */",
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.out, "y0", False),
            *(["#if defined(__AVX512F__)"] if strided else []),
            *(self.plane_setup() if plane else []),
            *(["#endif"] if strided else []),
            "  for (long u = lo; u < hi; ++u) {",
            f"    const {ctype}* x = x0 + (u / {c}L) * {xs[0]}L + (u % {c}L) * {xs[1]}L;",
            f"    {ctype}* y = y0 + u * {oh * ow}L;",
            # column-strided bands need AVX-512's two-source permutes (AVX2: 0.86-1.0x)
            *(["#if defined(__AVX512F__)", *self.plane_max(), "#else"] if strided else []),
            *(self.plane_max() if plane and not strided else self.rows()),
            *(["#endif"] if strided else []),
            "  }",
            "  return 0;",
            "}",
            self.driver(n * c, work),
        ]
        return "\n".join(lines)

    def driver(self, units: Dim, work: Dim) -> str:
        """``<name>_run``: ``units`` planes, split between threads when ``work`` is large."""
        units, work = static(units), static(work)  # SymbolicPoolEmitter takes the batch
        parallel = work >= PARALLEL_MACS // 4
        return _driver(self.name, units, parallel, self.module.num_threads, self.module)

    def rows(self) -> list[str]:
        """The plane's output rows, one at a time."""
        oh = static(self.out.shape[2])
        return [f"    for (long i = 0; i < {oh}L; ++i) {{", *self.window(), "    }"]

    def whole_plane(self) -> bool:
        """Max pools whose band of at least one output row fits :data:`PLANE_BAND` run
        :meth:`plane_max` (when :data:`PLANE_MAX` is on)."""
        if not (self.step.maximum and PLANE_MAX):
            return False
        return self.band()[0] >= 1

    def band(self) -> tuple[int, int, int]:
        """Output rows of a band of :meth:`plane_max` (0: none fits), the padded pitch
        (a multiple of the column stride) and the padded rows of a band."""
        s = self.step
        (fh, fw), (sh, sw), (dh, dw), (_, pl) = s.window, s.strides, s.dilations, s.padding
        w = static(self.x.shape[3])
        oh, ow = static_all(self.out.shape[2:])
        pitch = max(pl + w, (ow - 1) * sw + (fw - 1) * dw + 1)
        pitch = -(-pitch // sw) * sw
        span = (fh - 1) * dh + 1
        rows = min(oh, (PLANE_BAND // pitch - span) // sh + 1)
        return rows, pitch, (rows - 1) * sh + span

    def plane_max(self) -> list[str]:
        """A max pool by bands of output rows, each in three flat loops: the band's input
        rows copied into a padded band (``lowest`` around the image) split into ``sh`` row
        phases (phase ``k`` holds padded rows ``k, k + sh, ...``), the maximum over each
        window's columns for every padded row at once (one loop over the band, the column
        stride folded into the flat index), then the output rows: the maximum of each
        window's rows, every tap at a constant offset in one of the phases (one loop over the
        band's outputs, copied out). Long loops instead of a few short ones per output row
        (rows of 7-56). NaN propagates as in :meth:`window_max`."""
        s = self.step
        t = self.x.element_type
        oh, ow = static_all(self.out.shape[2:])
        (fh, fw), (sh, sw), (dh, dw) = s.window, s.strides, s.dilations
        compute = dialect.compute_type(t)
        rows, pitch, prow = self.band()
        hp, per = pitch // sw, -(-prow // sh)  # columns of column maxima, rows per phase
        take = "v > {0} || v != v" if t.is_real else "v > {0}"
        hmax = " ".join(
            f"v = p[q * {sw}L + {b * dw}L]; a = {take.format('a')} ? v : a;" for b in range(1, fw)
        )
        offsets = [(a * dh) % sh * per * hp + (a * dh) // sh * hp for a in range(fh)]
        vmax = " ".join(f"v = hm[q + {o}L]; a = {take.format('a')} ? v : a;" for o in offsets[1:])
        stored = dialect.store(t, dialect.round_to(t, f"om[(i - i0) * {hp}L + j]"))
        return [
            f"    for (long i0 = 0; i0 < {oh}L; i0 += {rows}L) {{",
            f"      long i1 = i0 + {rows}L < {oh}L ? i0 + {rows}L : {oh}L;",
            *self.band_copy(per * pitch, pitch),
            "      #pragma omp simd",
            f"      for (long q = 0; q < {sh * per * hp}L; ++q) {{",
            f"        {compute} a = p[q * {sw}L], v;",
            f"        {hmax}",
            "        hm[q] = a;",
            "      }",
            "      #pragma omp simd",
            f"      for (long q = 0; q < (i1 - i0 - 1) * {hp}L + {ow}L; ++q) {{",
            f"        {compute} a = hm[q + {offsets[0]}L], v;",
            f"        {vmax}",
            "        om[q] = a;",
            "      }",
            "      for (long i = i0; i < i1; ++i)",
            "        #pragma omp simd",
            f"        for (long j = 0; j < {ow}L; ++j) y[i * {ow}L + j] = {stored};",
            "    }",
        ]

    def band_copy(self, phase: int, pitch: int) -> list[str]:
        """The band's padded rows into their phases (``phase`` elements each): image rows
        copied between the padding columns, rows outside the image ``lowest``."""
        s, t = self.step, self.x.element_type
        h, w = static_all(self.x.shape[2:])
        xs = self.x.strides
        (fh, _), (sh, _), (dh, _), (pt, pl) = s.window, s.strides, s.dilations, s.padding
        compute, lowest = dialect.compute_type(t), dialect.lowest(t)
        load = dialect.load(t, f"src[c * {xs[3]}L]")
        return [
            f"      for (long r = 0; r < (i1 - i0 - 1) * {sh}L + {(fh - 1) * dh + 1}L; ++r) {{",
            f"        long ih = i0 * {sh}L - {pt}L + r;",
            f"        {compute}* d = p + (r % {sh}L) * {phase}L + (r / {sh}L) * {pitch}L + {pl}L;",
            f"        if (ih < 0 || ih >= {h}L) {{",
            f"          for (long c = 0; c < {w}L; ++c) d[c] = {lowest};",
            "        } else {",
            f"          const {dialect.storage_type(t)}* src = x + ih * {xs[2]}L;",
            "          #pragma omp simd",
            f"          for (long c = 0; c < {w}L; ++c) d[c] = {load};",
            "        }",
            "      }",
        ]

    def plane_setup(self) -> list[str]:
        """The buffers of :meth:`plane_max`, once per call: the padded band's phases (their
        padding columns stay ``lowest``: the copies write only the image's columns), the
        column maxima and the output rows."""
        s, t = self.step, self.x.element_type
        compute, lowest = dialect.compute_type(t), dialect.lowest(t)
        (_, fw), (sh, sw), (_, dw) = s.window, s.strides, s.dilations
        rows, pitch, prow = self.band()
        per = -(-prow // sh)
        size = sh * per * pitch + (fw - 1) * dw + 1
        return [
            f"  {compute} p[{size}], hm[{sh * per * (pitch // sw)}], om[{rows * (pitch // sw)}];",
            f"  for (long f = 0; f < {size}L; ++f) p[f] = {lowest};",
        ]

    def compute_type(self) -> str:
        return dialect.compute_type(self.x.element_type)

    def window(self) -> list[str]:
        """Output row ``i``: a row of accumulators, updated tap by tap with a vector loop over
        the output columns whose input column lies inside the data."""
        s = self.step
        w = static(self.x.shape[3])
        if s.maximum and s.padding[1] + w + s.window[1] * s.dilations[1] <= MAX_ROW:
            return self.window_max()
        t = self.x.element_type
        h, w = static_all(self.x.shape[2:])  # only the batch may be symbolic
        ow = static(self.out.shape[3])
        xs = self.x.strides
        (fh, fw), (sh, sw), (dh, dw), (pt, pl) = s.window, s.strides, s.dilations, s.padding
        compute, ctype = dialect.compute_type(t), dialect.storage_type(t)
        load = dialect.load(t, f"src[j * {sw * xs[3]}L]")
        start = dialect.lowest(t) if s.maximum else dialect.literal(0, t)
        nan = s.maximum and t.is_real
        # A large average window sums each window row apart, then the rows: a chain of
        # fh + fw additions instead of fh * fw (the error grows with the chain).
        rows = not s.maximum and fh > 1 and fh * fw > LONG_WINDOW
        update = "acc[j] = v > acc[j] ? v : acc[j];" if s.maximum else "acc[j] += v;"
        update = "part[j] += v;" if rows else update
        lines = [
            f"      {compute} acc[{ow}];",
            *([f"      int nan[{ow}];"] if nan else []),
            *([f"      {compute} part[{ow}];"] if rows else []),
            f"      for (long j = 0; j < {ow}L; ++j) {{ acc[j] = {start};"
            + (" nan[j] = 0;" if nan else "")
            + " }",
            f"      for (long a = 0; a < {fh}L; ++a) {{",
            f"        long ih = i * {sh}L - {pt}L + a * {dh}L;",
            f"        if (ih < 0 || ih >= {h}L) continue;",
            *([f"        for (long j = 0; j < {ow}L; ++j) part[j] = {start};"] if rows else []),
            f"        for (long b = 0; b < {fw}L; ++b) {{",
            f"          long shift = b * {dw}L - {pl}L;  /* iw = j * {sw} + shift */",
            f"          long lo_ = shift >= 0 ? 0 : (-shift + {sw - 1}L) / {sw}L;",
            f"          long hi_ = {w}L - 1 - shift < 0 ? 0 : ({w}L - 1 - shift) / {sw}L + 1;",
            f"          if (hi_ > {ow}L) hi_ = {ow}L;",
            f"          const {ctype}* src = x + ih * {xs[2]}L + shift * {xs[3]}L;",
            "          #pragma omp simd",
            "          for (long j = lo_; j < hi_; ++j) {",
            f"            {compute} v = {load};",
            f"            {update}",
            *(["            nan[j] |= v != v;"] if nan else []),
            "          }",
            "        }",
            *([f"        for (long j = 0; j < {ow}L; ++j) acc[j] += part[j];"] if rows else []),
            "      }",
        ]
        if s.maximum:
            value = f"(nan[j] ? {dialect.literal(float('nan'), t)} : acc[j])" if nan else "acc[j]"
        else:
            value = f"acc[j] / {self.divisor()}"
        stored = dialect.store(t, dialect.round_to(t, value))
        lines.append(f"      for (long j = 0; j < {ow}L; ++j) y[i * {ow}L + j] = {stored};")
        return lines

    def window_max(self) -> list[str]:
        """Output row ``i`` of a max pool, separably: the maximum of the window's input rows
        over the whole input row (unit stride, one vector pass per window row) into ``m``,
        which has ``lowest`` columns either side for the padding; then each output column
        the maximum of its window's columns of ``m``. A NaN anywhere in a window gives NaN
        (``v != v`` takes ``v``; an ``m`` that is NaN then stays: ``v > m`` is false)."""
        s = self.step
        t = self.x.element_type
        h, w = static_all(self.x.shape[2:])
        ow = static(self.out.shape[3])
        xs = self.x.strides
        (fh, fw), (sh, sw), (dh, dw), (pt, pl) = s.window, s.strides, s.dilations, s.padding
        compute = dialect.compute_type(t)
        lowest = dialect.lowest(t)
        width = max(pl + w, (ow - 1) * sw + (fw - 1) * dw + 1)  # every column a window reads
        take = "v > m[c] || v != v" if t.is_real else "v > m[c]"
        taps = " ".join(
            f"v = r[j * {sw}L + {b * dw}L]; a = v > a || v != v ? v : a;"
            if t.is_real
            else f"v = r[j * {sw}L + {b * dw}L]; a = v > a ? v : a;"
            for b in range(1, fw)
        )
        stored = dialect.store(t, dialect.round_to(t, "a"))
        return [
            f"      {compute} m[{width}];",
            f"      for (long c = 0; c < {width}L; ++c) m[c] = {lowest};",
            f"      for (long a = 0; a < {fh}L; ++a) {{",
            f"        long ih = i * {sh}L - {pt}L + a * {dh}L;",
            f"        if (ih < 0 || ih >= {h}L) continue;",
            f"        const {dialect.storage_type(t)}* src = x + ih * {xs[2]}L;",
            "        #pragma omp simd",
            f"        for (long c = {pl}L; c < {pl + w}L; ++c) {{",
            f"          {compute} v = {dialect.load(t, f'src[(c - {pl}L) * {xs[3]}L]')};",
            f"          m[c] = {take} ? v : m[c];",
            "        }",
            "      }",
            "      const " + compute + "* r = m;",
            "      #pragma omp simd",
            f"      for (long j = 0; j < {ow}L; ++j) {{",
            f"        {compute} a = r[j * {sw}L], v;",
            f"        {taps}",
            f"        y[i * {ow}L + j] = {stored};",
            "      }",
        ]

    def divisor(self) -> str:
        """Taps counted in the average: in the data, or in data and padding."""
        s = self.step
        h, w = static_all(self.x.shape[2:])  # only the batch may be symbolic
        (fh, fw), (sh, sw), (pt, pl) = s.window, s.strides, s.padding
        ph, pw = s.padded
        low = (0, 0) if s.count_padding else (pt, pl)
        high = (ph, pw) if s.count_padding else (pt + h, pl + w)
        rows = f"og_count(i * {sh}L, {fh}L, {low[0]}L, {high[0]}L)"
        cols = f"og_count(j * {sw}L, {fw}L, {low[1]}L, {high[1]}L)"
        self.module.helper("pool_count")
        return f"({dialect.compute_type(self.x.element_type)})({rows} * {cols})"
