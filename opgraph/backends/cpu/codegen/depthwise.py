"""Generate the C of a direct convolution step (``ConvStep`` with ``direct``): depthwise
convolutions and grouped ones with few channels per group, which im2col and one thin GEMM
per group run badly (a 3x3 depthwise filter is a 1 x 9 matrix).

A unit is a block of output rows of a few output channels of one group of one image
(:class:`~opgraph.backends.fused.lowering.convolution.DirectPlan`). For each input channel
of the group it copies the input rows the block reads into a zero-padded block in this
thread's scratch (padding, cropping and rows outside the data are resolved there), then runs
one flat ``omp simd`` loop over the block's outputs in which every filter tap is unrolled and
reads the padded block at a constant offset: no bounds tests, no scalar border or tail code,
whatever the padding, stride or dilation. Each loaded input vector feeds the taps of every
output channel of the unit. The outputs are computed with a row pitch of the padded block
(the columns past the output width are dropped when the block is copied out) and the fused
epilogue runs on the copied rows while they are in cache.

Units are shared out by the runtime's thread pool in a few equal parts (``4 x threads``).
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.blas import PARALLEL_MACS
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.loops import CLoopEmitter
from opgraph.backends.cpu.codegen.windows import _pointer
from opgraph.backends.fused.lowering.convolution import direct_plan
from opgraph.backends.fused.program import ConvStep
from opgraph.backends.fused.views import static, static_all


class DirectConvEmitter:
    """``static int <name>(T, A, lo, hi)`` over parts of the units, and ``<name>_run``."""

    def __init__(
        self, step: ConvStep, name: str, module: ModuleContext, checks: list[Check] | None = None
    ) -> None:
        assert step.direct and step.x is not None and step.w is not None
        assert step.out is not None and step.scratch is not None
        self.step, self.name, self.module = step, name, module
        self.checks: list[Check] = checks if checks is not None else []
        self.x, self.w, self.out, self.scratch = step.x, step.w, step.out, step.scratch
        self.ctype = dialect.storage_type(step.out.element_type)
        # direct steps are static (symbolic ones fall back, lowering/convolution.py)
        self.cg = static(self.x.shape[1]) // step.groups
        self.og = static(self.w.shape[0]) // step.groups
        self.plan = direct_plan(step, static(step.scratch.shape[0]))
        assert self.plan.rows == step.block_rows

    def parallel(self) -> bool:
        n, o, oh, ow = static_all(self.out.shape)
        kh, kw = self.step.kernel
        work = n * o * oh * ow * self.cg * kh * kw
        return work >= PARALLEL_MACS and self.module.num_threads > 1

    def emit(self) -> str:
        s, p, ct = self.step, self.plan, self.ctype
        n, o, oh, _ = static_all(self.out.shape)
        blocks = -(-oh // p.rows)
        chunks = o // p.block
        total = n * chunks * blocks
        parallel = self.parallel()
        parts = min(total, 4 * self.module.num_threads) if parallel else 1
        head = [f"/* {self.name}: direct convolution: {s.label.replace('*/', '* /')} */"]
        if s.epilogue is not None:
            label = "epilogue of " + self.name
            ep = CLoopEmitter(s.epilogue, f"{self.name}_ep", self.module, label, self.checks)
            head.append(ep.emit())
        worker = "(long)og_worker_index()" if parts > 1 else "0L"
        body = [
            f"static int {self.name}(void* const* T, char* A, long lo, long hi) {{",
            "  int err = 0;",
            _pointer(self.module, self.x, "x0", True),
            _pointer(self.module, self.w, "w0", True),
            _pointer(self.module, self.out, "y0", False),
            _pointer(self.module, self.scratch, "scratch", False),
            f"  {ct}* buf = scratch + {worker} * {p.per_thread}L;",
            *[
                f"  {ct}* ext{b}_{row} = buf + {self.ext_offset(b, row)}L;"
                for b in range(p.block)
                for row in range(p.together)
            ],
            f"  long first = lo * {total}L / {parts}L, last = hi * {total}L / {parts}L;",
            "  for (long u = first; u < last; ++u) {",
            f"    long img = u / {chunks * blocks}L, blk = (u / {blocks}L) % {chunks}L;",
            f"    long r0 = (u % {blocks}L) * {p.rows}L;",
            f"    long r1 = r0 + {p.rows}L < {oh}L ? r0 + {p.rows}L : {oh}L;",
            f"    long oc0 = blk * {p.block}L, grp = oc0 / {self.og}L;",
            f"    const {ct}* x = x0 + img * {self.x.strides[0]}L"
            f" + grp * {self.cg * self.x.strides[1]}L;",
            f"    const {ct}* w = w0 + oc0 * {self.w.shape[1]}L;",
            *self.passes(),
            *self.copy_out(),
            "  }",
            "  return err;",
            "}",
            f"static int {self.name}_run(void* const* T, char* A) {{",
            f"  return {self.dispatch(parts)};",
            "}",
        ]
        return "\n".join(head + body)

    def dispatch(self, parts: int) -> str:
        if parts > 1:
            self.module.uses_pool = True
            return f"og_parallel({self.name}, T, A, {parts}L, 1L, {self.module.num_threads})"
        return f"{self.name}(T, A, 0, 1L)"

    def passes(self) -> list[str]:
        """Every input channel of the group (and filter row, for tall filters): copy in,
        then one flat loop per pass."""
        p = self.plan
        kh, kw = self.step.kernel
        single = self.cg == 1 and not p.row_passes
        lines: list[str] = []
        if not single:  # passes accumulate
            zero = " ".join(
                f"ext{b}_{row}[f] = 0;" for b in range(p.block) for row in range(p.together)
            )
            lines += [
                "    #pragma omp simd",
                f"    for (long f = 0; f < {p.flat}L; ++f) {{ {zero} }}",
            ]
        indent = "    "
        if self.cg > 1:
            lines.append(f"{indent}for (long ci = 0; ci < {self.cg}L; ++ci) {{")
            indent += "  "
        channel = "ci" if self.cg > 1 else "0"
        lines.append(f"{indent}const {self.ctype}* xc = x + {channel} * {self.x.strides[1]}L;")
        lines += [indent + line for line in self.copy_in()]
        if p.row_passes:
            lines.append(f"{indent}for (long a = 0; a < {kh}L; ++a) {{")
            indent += "  "
            taps = [(0, b) for b in range(kw)]
            (sh, sw), dh = self.step.strides, self.step.dilations[0]
            lines.append(  # together is 1: the phases split rows by sh
                f"{indent}const {self.ctype}* src = buf + (a * {dh}L % {sh}L) * "
                f"{sw * p.phase_size}L + (a * {dh}L / {sh}L) * {p.pitch}L;"
            )
            first = f"{channel} * {kh * kw}L + a * {kw}L"
        else:
            taps = [(a, b) for a in range(kh) for b in range(kw)]
            lines.append(f"{indent}const {self.ctype}* src = buf;")
            first = f"{channel} * {kh * kw}L"
        lines += [indent + line for line in self.flat_loop(taps, first, "=" if single else "+=")]
        if p.row_passes:
            lines.append(f"{indent[:-2]}}}")
        if self.cg > 1:
            lines.append("    }")
        return lines

    def copy_in(self) -> list[str]:
        """This input channel into the phases in ``buf``: phase ``(pr, pc)`` row ``i``
        column ``j`` holds image row ``r0 * sh + i * span + pr - pt`` and column ``j * sw +
        pc - pl`` (``span = together * sh``), zero outside the image."""
        s, p, ct = self.step, self.plan, self.ctype
        h, w = self.x.shape[2:]
        (sh, sw), (pt, pl) = s.strides, s.padding
        span = p.together * sh
        lines = [
            f"for (long r = 0; r < {p.in_rows * span}L; ++r) {{",
            f"  long ih = r0 * {sh}L - {pt}L + r;",
            f"  {ct}* d = buf + (r % {span}L) * {sw * p.phase_size}L + (r / {span}L) * {p.pitch}L;",
            f"  int inside = ih >= 0 && ih < {h}L;",
            f"  const {ct}* s = xc + (inside ? ih : 0) * {self.x.strides[2]}L;",
        ]
        for pc in range(sw):
            # image column j * sw + pc - pl lies in [0, w) for j in [lo, hi)
            lo = min(p.pitch, max(0, -(-(pl - pc) // sw)))
            hi = min(p.pitch, max(lo, (w - 1 + pl - pc) // sw + 1))
            d = f"d[{pc * p.phase_size}L + j]"
            lines += [
                f"  for (long j = 0; j < (inside ? {lo}L : {p.pitch}L); ++j) {d} = 0;",
                "  if (inside) {",
                "    #pragma omp simd",
                f"    for (long j = {lo}L; j < {hi}L; ++j) {d} = s[j * {sw}L + {pc - pl}L];",
                f"    for (long j = {hi}L; j < {p.pitch}L; ++j) {d} = 0;",
                "  }",
            ]
        lines.append("}")
        return lines

    def tap_offset(self, row: int, a: int, col: int) -> int:
        """Where output row ``row`` of a group of ``together`` reads tap (filter row ``a``,
        column ``col``), relative to ``src`` (for row passes ``a`` is 0: ``src`` moves)."""
        s, p = self.step, self.plan
        (sh, sw), (dh, dw) = s.strides, s.dilations
        down = row * sh + a * dh
        span = p.together * sh
        phase = (down % span) * sw + col * dw % sw
        return phase * p.phase_size + down // span * p.pitch + col * dw // sw

    def flat_loop(self, taps: list[tuple[int, int]], first: str, assign: str) -> list[str]:
        """The weights of ``taps`` (filter row, column) for each output channel of the unit,
        then the flat loop over the block's outputs (``together`` rows per channel)."""
        s, p, ct = self.step, self.plan, self.ctype
        kw = s.kernel[1]
        k = self.w.shape[1]
        weights = [
            f"const {ct} f{b}_{t} = w[{b * k}L + {first} + {a * kw + col}L];"
            for b in range(p.block)
            for t, (a, col) in enumerate(taps)
        ]
        updates = [
            f"  ext{b}_{row}[f] {assign} "
            + " + ".join(
                f"f{b}_{t} * src[f + {self.tap_offset(row, a, col)}L]"
                for t, (a, col) in enumerate(taps)
            )
            + ";"
            for b in range(p.block)
            for row in range(p.together)
        ]
        return [
            *weights,
            "#pragma omp simd",
            f"for (long f = 0; f < {p.flat}L; ++f) {{",
            *updates,
            "}",
        ]

    def ext_offset(self, b: int, row: int) -> int:
        """Where output channel ``b`` of the unit keeps its flat outputs of row ``row`` of
        each group of ``together``, in ``buf``."""
        p = self.plan
        return p.phases * p.phase_size + (b * p.together + row) * p.flat

    def copy_out(self) -> list[str]:
        """The block's outputs into ``out`` (dropping the columns past the output width),
        then the epilogue on them."""
        p = self.plan
        _, o, oh, ow = self.out.shape
        lines = [
            f"    for (long b = 0; b < {p.block}L; ++b) {{",
            f"      {self.ctype}* y = y0 + ((img * {o}L + oc0 + b) * {oh}L + r0) * {ow}L;",
            f"      const {self.ctype}* e = buf + {self.ext_offset(0, 0)}L"
            f" + b * {p.together * p.flat}L;",
            "      for (long i = 0; i < r1 - r0; ++i) {",
            f"        const {self.ctype}* ei = e + (i % {p.together}L) * {p.flat}L"
            f" + (i / {p.together}L) * {p.pitch}L;",
            "        #pragma omp simd",
            f"        for (long j = 0; j < {ow}L; ++j) y[i * {ow}L + j] = ei[j];",
            "      }",
        ]
        if self.step.epilogue is not None:
            lines += [
                f"      long at_ = ((img * {o}L + oc0 + b) * {oh}L + r0) * {ow}L;",
                f"      err |= {self.name}_ep(T, A, at_, at_ + (r1 - r0) * {ow}L);",
            ]
        lines.append("    }")
        return lines
