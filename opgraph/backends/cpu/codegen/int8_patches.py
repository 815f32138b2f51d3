"""The patch matrices of 8-bit convolutions (the units of
:class:`~opgraph.backends.cpu.codegen.int8.QConvEmitter`), as u8 *quads*:
quad row ``q`` of a block's matrix holds, for each output pixel, the four input bytes of
inner indices ``4q .. 4q+3`` packed in one 32-bit word (the layout ``og_q8_conv_gemm`` reads,
:mod:`opgraph.backends.cpu.codegen.int8`).

Two builders, chosen by the step (``QConvStep.interleaved``):

* byte rows (:func:`_byte_patches`): four patch rows gathered into ``lanes`` byte by byte,
  then interleaved into one quad row;
* channel quads (:func:`_channel_quad_patches`, groups of whole channel quads): the unit's
  input rows interleaved once into this thread's area (four channels of one pixel per
  word, :func:`_interleave`), then every quad row copied from them, output row by output row.

Both emit C statements for the body of a unit's loop, which defines ``x`` (the image and
group's input), ``col`` (the block's matrix), ``pitch``, ``span``, ``cols``, ``oh0``,
``oh1``, ``scratch`` and (byte rows) ``lanes``.
"""

from __future__ import annotations

from opgraph.backends.fused.lowering.quantized import QUAD, QConvStep, channel_quads
from opgraph.backends.fused.views import View


def patch_quads(
    step: QConvStep, x: View, cg: int, k: int, quads: int, size: tuple[int, int], ow: int
) -> list[str]:
    """The C building a block's patch matrix (``quads`` quad rows of ``col``) from ``x``.

    Args:
        step: the convolution.
        x: its input (N, C, H, W).
        cg: input channels per group.
        k: the inner dimension (``cg · kh · kw``).
        quads: quad rows of the matrix (``ceil(k / 4)``).
        size: the input plane (H, W).
        ow: the output width.
    """
    if step.interleaved:
        return _channel_quad_patches(step, x, cg, quads, size, ow)
    return _byte_patches(step, x, k, quads, size, ow)


def _byte_patches(
    step: QConvStep, x: View, k: int, quads: int, size: tuple[int, int], ow: int
) -> list[str]:
    """Four patch rows (inner indices ``4q`` .. ``4q+3``) at a time gathered into ``lanes``
    byte by byte, then interleaved into quad row ``q`` of ``col``."""
    s = step
    (kh, kw), (sh, sw), (dh, dw), (ph, pw) = s.kernel, s.strides, s.dilations, s.padding
    h, w = size
    xs = x.strides
    flip = "0x80" if s.flip else "0"
    if sw == 1 and xs[3] == 1 and not s.flip:  # a contiguous run: memcpy (vector moves)
        copy = ["          __builtin_memcpy(d + c_lo, src + c_lo + off, c_hi - c_lo);"]
    else:
        copy = [
            "          for (long cc = c_lo; cc < c_hi; ++cc)",
            f"            d[cc] = src[(cc * {sw}L + off) * {xs[3]}L] ^ {flip};",
        ]
    return [
        f"    for (long q = 0; q < {quads}L; ++q) {{",
        "      for (int t = 0; t < 4; ++t) {",
        "        uint8_t* lane = lanes[t];",
        "        long kk = 4 * q + t;",
        f"        if (kk >= {k}L) {{ __builtin_memset(lane, 0, span); continue; }}",
        f"        long ci = kk / {kh * kw}L, i = kk / {kw}L % {kh}L, j = kk % {kw}L;",
        f"        long off = j * {dw}L - {pw}L;",
        f"        long c_lo = off >= 0 ? 0 : (-off + {sw - 1}L) / {sw}L;",
        f"        long c_hi = {w - 1}L - off < 0 ? 0 : ({w - 1}L - off) / {sw}L + 1;",
        f"        if (c_hi > {ow}L) c_hi = {ow}L;",
        "        if (c_lo > c_hi) c_lo = c_hi;",
        "        for (long r = oh0; r < oh1; ++r) {",
        f"          uint8_t* d = lane + (r - oh0) * {ow}L;",
        f"          long ih = r * {sh}L - {ph}L + i * {dh}L;",
        f"          if (ih < 0 || ih >= {h}L) {{",
        f"            __builtin_memset(d, {s.x_zero}, {ow});",
        "            continue;",
        "          }",
        f"          const uint8_t* src = x + ci * {xs[1]}L + ih * {xs[2]}L;",
        f"          for (long cc = 0; cc < c_lo; ++cc) d[cc] = {s.x_zero};",
        *copy,
        f"          for (long cc = c_hi; cc < {ow}L; ++cc) d[cc] = {s.x_zero};",
        "        }",
        "        for (long cc = cols; cc < span; ++cc) lane[cc] = 0;",
        "      }",
        "      uint32_t* quad = (uint32_t*)(col + q * pitch * 4);",
        "      for (long p = 0; p < span; ++p)",
        "        quad[p] = (uint32_t)lanes[0][p] | (uint32_t)lanes[1][p] << 8 |",
        "                  (uint32_t)lanes[2][p] << 16 | (uint32_t)lanes[3][p] << 24;",
        "    }",
    ]


def _channel_quad_patches(
    step: QConvStep, x: View, cg: int, quads: int, size: tuple[int, int], ow: int
) -> list[str]:
    """Channel quads (``QConvStep.interleaved``): the unit's input rows interleaved once
    (:func:`_interleave`), then each quad row of ``col`` copied from them, output row by
    output row."""
    s = step
    (kh, kw), (sh, sw), (dh, dw) = s.kernel, s.strides, s.dilations
    windows = (s.kernel, s.strides, s.dilations, s.padding)
    rows, width = channel_quads(size, (s.images[1], ow), s.block_rows, windows, cg)
    if sw == 1:
        copy = f"__builtin_memcpy(d_, src_, {4 * ow});"
    else:
        copy = f"for (long p_ = 0; p_ < {ow}L; ++p_) d_[p_] = src_[p_ * {sw}L];"
    return [
        "    {",
        *_interleave(step, x, cg, size, rows, width),
        f"    for (long q = 0; q < {quads}L; ++q) {{",
        f"      long cq = q / {kh * kw}L, i = q / {kw}L % {kh}L, j = q % {kw}L;",
        "      uint32_t* quad = (uint32_t*)(col + q * pitch * 4);",
        f"      const uint32_t* from = xi + (cq * {rows}L + i * {dh}L) * {width}L + j * {dw}L;",
        "      for (long r = 0; r < oh1 - oh0; ++r) {",
        f"          const uint32_t* src_ = from + r * {sh * width}L;",
        f"          uint32_t* d_ = quad + r * {ow}L;",
        f"          {copy}",
        "      }",
        "      for (long cc = cols; cc < span; ++cc) quad[cc] = 0;",
        "    }",
        "    }",
    ]


def _interleave(
    step: QConvStep, x: View, cg: int, size: tuple[int, int], rows: int, width: int
) -> list[str]:
    """``xi``, this thread's area: per channel quad, ``rows`` rows of ``width`` u32 (four
    channels of one input pixel each, ``x_zero`` bytes where the window reads padding),
    the unit's input rows from ``oh0``."""
    s = step
    (kh, _), (sh, _), (dh, _), (ph, pl) = s.kernel, s.strides, s.dilations, s.padding
    h, w = size
    xs = x.strides
    zero = f"{s.x_zero}u * 0x01010101u"
    flip = "0x80808080u" if s.flip else "0u"
    load = " | ".join(
        f"(uint32_t)x_[{t * xs[1]}L + c_ * {xs[3]}L]" + (f" << {8 * t}" if t else "")
        for t in range(QUAD)
    )
    return [
        f"    uint32_t* xi = (uint32_t*)(scratch + {s.interleaved_at}L + "
        f"(long)og_worker_index() * {s.interleaved}L);",
        f"    long r0_ = oh0 * {sh}L - {ph}L;",
        f"    long rows_ = (oh1 - oh0 - 1) * {sh}L + {(kh - 1) * dh + 1}L;",
        f"    for (long cq = 0; cq < {cg // QUAD}L; ++cq) {{",
        "      for (long rr = 0; rr < rows_; ++rr) {",
        f"        uint32_t* d_ = xi + (cq * {rows}L + rr) * {width}L;",
        "        long ih = r0_ + rr;",
        f"        if (ih < 0 || ih >= {h}L) {{",
        f"          for (long c_ = 0; c_ < {width}L; ++c_) d_[c_] = {zero};",
        "          continue;",
        "        }",
        f"        const uint8_t* x_ = x + {QUAD * xs[1]}L * cq + ih * {xs[2]}L;",
        f"        for (long c_ = 0; c_ < {pl}L; ++c_) d_[c_] = {zero};",
        "        #pragma omp simd",
        f"        for (long c_ = 0; c_ < {w}L; ++c_) d_[{pl}L + c_] = ({load}) ^ {flip};",
        f"        for (long c_ = {pl + w}L; c_ < {width}L; ++c_) d_[c_] = {zero};",
        "      }",
        "    }",
    ]
