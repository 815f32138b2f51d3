"""CUDA kernels for the steps that are not loop kernels: the im2col of a convolution (the
product itself is a cuBLAS GEMM), pooling windows, and wrapping integer products.

Each is one thread per output element in a grid-stride loop; sizes and strides are constants
of the source, so the index arithmetic folds.
"""

from __future__ import annotations

import math

from opgraph.backends.fused.loops import comment
from opgraph.backends.fused.views import View, static_all
from opgraph.backends.gpu.cuda import dialect
from opgraph.backends.gpu.cuda.kernel import (
    CudaKernel,
    Im2Col,
    IntGemm,
    KernelParam,
    LaunchKind,
    Pool,
)
from opgraph.backends.gpu.cuda.loops import INT_LIMIT
from opgraph.core.element_type import ElementType


def _index_type(*extents: int) -> str:
    return "int" if max(extents, default=0) < INT_LIMIT else "long long"


def _reach(view: View) -> int:
    strides = static_all(view.strides)
    shape = static_all(view.shape)  # the GPU runs static Programs only
    return sum(abs(s) * max(d - 1, 0) for d, s in zip(shape, strides, strict=True)) + 1


def _signature(name: str, params: list[KernelParam], block: int) -> str:
    parts = []
    for p in params:
        t = dialect.storage_type(p.view.element_type)
        parts.append(f"{'' if p.store else 'const '}{t}* __restrict__ {p.name}")
    return f'extern "C" __global__ void __launch_bounds__({block}) {name}({", ".join(parts)}) {{'


def _grid_loop(index: str, total: int) -> str:
    return (
        f"  for ({index} i_ = ({index})blockIdx.x * blockDim.x + threadIdx.x; i_ < {total}; "
        f"i_ += ({index})gridDim.x * blockDim.x) {{"
    )


def im2col_kernel(
    name: str, x: View, patches: View, spec: Im2Col, label: str, block: int = 256
) -> CudaKernel:
    """``patches`` (N, G, K, OH·OW), dense, from image ``x`` (N, C, H, W)."""
    n, c, h, w = static_all(x.shape)
    g = spec.groups
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = spec.kernel, spec.strides, spec.dilations, spec.padding
    oh, ow = spec.out_hw
    cg, k, p = c // g, (c // g) * kh * kw, oh * ow
    total = n * g * k * p
    i_t = _index_type(total, _reach(x))
    xs = static_all(x.strides)
    t = dialect.storage_type(x.element_type)
    params = [KernelParam("p0", x, False), KernelParam("q0", patches, True)]
    lines = [
        f"/* {name}: patches of {comment(label)} */",
        _signature(name, params, block),
        _grid_loop(i_t, total),
        f"    const {i_t} p_ = i_ % {p}; {i_t} t_ = i_ / {p};",
        f"    const {i_t} k_ = t_ % {k}; t_ /= {k};",
        f"    const {i_t} g_ = t_ % {g}, n_ = t_ / {g};",
        f"    const {i_t} ch = g_ * {cg} + k_ / {kh * kw};",
        f"    const {i_t} ki = (k_ / {kw}) % {kh}, kj = k_ % {kw};",
        f"    const {i_t} ih = (p_ / {ow}) * {sh} - {pt} + ki * {dh};",
        f"    const {i_t} iw = (p_ % {ow}) * {sw} - {pl} + kj * {dw};",
        f"    const bool inside = ih >= 0 && ih < {h} && iw >= 0 && iw < {w};",
        f"    q0[i_] = inside ? p0[n_ * {xs[0]} + ch * {xs[1]} + ih * {xs[2]} + iw * {xs[3]}] "
        f": ({t})0;",
        "  }",
        "}",
    ]
    return CudaKernel(
        name, "\n".join(lines), tuple(params), total, block, LaunchKind.ELEMENTS, spec=spec,
        label=label,
    )  # fmt: skip


def pool_kernel(
    name: str, x: View, out: View, spec: Pool, label: str, block: int = 256
) -> CudaKernel:
    """Max or average pooling of ``x`` (N, C, H, W) into dense ``out`` (N, C, OH, OW)."""
    n, c, h, w = static_all(x.shape)
    oh, ow = static_all(out.shape[2:])
    total = n * c * oh * ow
    i_t = _index_type(total, _reach(x))
    xs = static_all(x.strides)
    et = x.element_type
    t = dialect.storage_type(et)
    params = [KernelParam("p0", x, False), KernelParam("q0", out, True)]
    lines = [
        f"/* {name}: {comment(label)} */",
        _signature(name, params, block),
        _grid_loop(i_t, total),
        f"    const {i_t} j = i_ % {ow}; {i_t} t_ = i_ / {ow};",
        f"    const {i_t} i = t_ % {oh}; t_ /= {oh};",
        f"    const {t}* x = p0 + (t_ / {c}) * {xs[0]} + (t_ % {c}) * {xs[1]};",
        *_window(spec, et, h, w, xs),
        "  }",
        "}",
    ]
    helpers = () if spec.maximum else ("pool_count",)
    return CudaKernel(
        name, "\n".join(lines), tuple(params), total, block, LaunchKind.ELEMENTS,
        helpers=helpers, spec=spec, label=label,
    )  # fmt: skip


def _window(spec: Pool, et: ElementType, h: int, w: int, xs: tuple[int, ...]) -> list[str]:
    """The same window loop as the CPU backend's ``PoolEmitter.window``."""
    compute = dialect.compute_type(et)
    (fh, fw), (sh, sw), (dh, dw), (pt, pl) = spec.window, spec.strides, spec.dilations, spec.padding
    first = dialect.lowest(et) if spec.maximum else dialect.literal(0, et)
    tracks_nan = spec.maximum and et.is_real
    lines = [f"    {compute} acc = {first};", "    int nan = 0; (void)nan;"]
    lines += [
        f"    for (int a = 0; a < {fh}; ++a) {{",
        f"      const long ih = (long)i * {sh} - {pt} + a * {dh};",
        f"      if (ih < 0 || ih >= {h}) continue;",
        f"      for (int b = 0; b < {fw}; ++b) {{",
        f"        const long iw = (long)j * {sw} - {pl} + b * {dw};",
        f"        if (iw < 0 || iw >= {w}) continue;",
        f"        const {compute} v = {dialect.load(et, f'x[ih * {xs[2]} + iw * {xs[3]}]')};",
    ]
    if spec.maximum:
        lines.append("        acc = v > acc ? v : acc;" + (" nan |= v != v;" if tracks_nan else ""))
    else:
        lines.append("        acc += v;")
    lines += ["      }", "    }"]
    if spec.maximum:
        value = f"(nan ? {dialect.literal(math.nan, et)} : acc)" if tracks_nan else "acc"
    else:
        ph, pw = spec.padded
        low = (0, 0) if spec.count_padding else (pt, pl)
        high = (ph, pw) if spec.count_padding else (pt + h, pl + w)
        rows = f"og_count((long)i * {sh}, {fh}, {low[0]}, {high[0]})"
        cols = f"og_count((long)j * {sw}, {fw}, {low[1]}, {high[1]})"
        value = f"acc / ({compute})({rows} * {cols})"
    lines.append(f"    q0[i_] = {dialect.store(et, dialect.round_to(et, value))};")
    return lines


def int_gemm_kernel(
    name: str, a: View, b: View, c: View, label: str, block: int = 256
) -> CudaKernel:
    """``c = a @ b`` for integer views, wrapping: 64-bit accumulation, low bits kept."""
    rows, inner = static_all(a.shape)
    cols = static_all(b.shape)[1]
    total = rows * cols
    i_t = _index_type(total, _reach(a), _reach(b), _reach(c))
    t = dialect.storage_type(c.element_type)
    (ar, ac), (br, bc), (cr, cc) = a.strides, b.strides, c.strides
    params = [KernelParam("p0", a, False), KernelParam("p1", b, False), KernelParam("q0", c, True)]
    lines = [
        f"/* {name}: {comment(label)} */",
        _signature(name, params, block),
        _grid_loop(i_t, total),
        f"    const {i_t} m = i_ / {cols}, n = i_ % {cols};",
        "    uint64_t acc = 0;",
        f"    for ({i_t} k = 0; k < {inner}; ++k)",
        f"      acc += (uint64_t)p0[m * {ar} + k * {ac}] * (uint64_t)p1[k * {br} + n * {bc}];",
        f"    q0[m * {cr} + n * {cc}] = ({t})acc;",
        "  }",
        "}",
    ]
    spec = IntGemm(rows, cols, inner)
    return CudaKernel(
        name, "\n".join(lines), tuple(params), total, block, LaunchKind.ELEMENTS, spec=spec,
        label=label,
    )  # fmt: skip
