"""The transforms of Winograd F(4x4, 3x3) as straight-line C (``WinogradStep.tile == 4``).

Each 4x4 block of outputs comes from a 6x6 input tile with 36 products instead of 144
(F(2x2, 3x3): 16 for 4 outputs), so the products, most of the step's time, shrink by
4/2.25 = 1.78x at the price of larger transforms. Interpolation points 0, ±1, ±2 (Lavin &
Gray); the filter transform ``G`` is applied at compile time
(``opgraph.backends.fused.lowering.winograd_tiles``). The input transform ``Bᵀ d B`` and the
output transform ``Aᵀ m A`` are written with their shared sums factored out, once, as two
generic helpers of the shared kernel library (``og_wino4_in``, ``og_wino4_out``:
``codegen/kernels.py``) that every F(4x4) step calls per tile row, so a model's modules do
not each carry the straight-line transforms.
"""

from __future__ import annotations

from opgraph.backends.cpu.codegen.dialect import HELPERS


def _bt(d: list[str], name: str) -> list[str]:
    """``{name}0..5 = Bᵀ (d0..d5)`` for one row or column of a 6x6 tile."""
    return [
        f"const float {name}p = {d[3]} + {d[4]}, {name}q = {d[1]} + {d[2]};",
        f"const float {name}r = {d[4]} - {d[3]}, {name}s = {d[1]} - {d[2]};",
        f"const float {name}u = {d[4]} - {d[2]}, {name}w = {d[3]} - {d[1]};",
        f"const float {name}0 = 4.0f * {d[0]} - 5.0f * {d[2]} + {d[4]};",
        f"const float {name}1 = {name}p - 4.0f * {name}q;",
        f"const float {name}2 = {name}r + 4.0f * {name}s;",
        f"const float {name}3 = {name}u + 2.0f * {name}w;",
        f"const float {name}4 = {name}u - 2.0f * {name}w;",
        f"const float {name}5 = 4.0f * {d[1]} - 5.0f * {d[3]} + {d[5]};",
    ]


def input_transform(prefix: str, source: str) -> list[str]:
    """``{prefix}{a}{b} = (Bᵀ {source} B)[a][b]`` for a 6x6 tile ``{source}{row}{col}``."""
    lines: list[str] = []
    for b in range(6):  # columns of Bᵀ d: t{a}_{b}
        lines += _bt([f"{source}{r}{b}" for r in range(6)], f"t{b}_")
    for a in range(6):  # rows of (Bᵀ d) B
        out = _bt([f"t{c}_{a}" for c in range(6)], f"w{a}_")
        lines += out[:-6] + [
            line.replace(f"const float w{a}_{b} =", f"const float {prefix}{a}{b} =")
            for b, line in enumerate(out[-6:])
        ]
    return lines


def _at(m: list[str], name: str) -> list[str]:
    """``{name}0..3 = Aᵀ (m0..m5)``."""
    return [
        f"const float {name}a = {m[1]} + {m[2]}, {name}b = {m[1]} - {m[2]};",
        f"const float {name}c = {m[3]} + {m[4]}, {name}d = {m[3]} - {m[4]};",
        f"const float {name}0 = {m[0]} + {name}a + {name}c;",
        f"const float {name}1 = {name}b + 2.0f * {name}d;",
        f"const float {name}2 = {name}a + 4.0f * {name}c;",
        f"const float {name}3 = {name}b + 8.0f * {name}d + {m[5]};",
    ]


def output_transform(source: str) -> list[str]:
    """``y{i}{j} = (Aᵀ {source} A)[i][j]`` for a 6x6 tile ``{source}{row}{col}``."""
    lines: list[str] = []
    for b in range(6):  # r{b}_{i} = (Aᵀ m)[i][b]
        lines += _at([f"{source}{r}{b}" for r in range(6)], f"r{b}_")
    for i in range(4):
        out = _at([f"r{c}_{i}" for c in range(6)], f"z{i}_")
        lines += out[:-4] + [
            line.replace(f"const float z{i}_{j} =", f"const float y{i}{j} =")
            for j, line in enumerate(out[-4:])
        ]
    return lines


def _input_helper() -> str:
    """``og_wino4_in``: the input transform of ``tw`` adjacent tiles of one tile row of one
    channel, from the six input rows ``r`` (zero-padded copies: every tap in bounds) into
    ``V[ξ * plane + tc]``, vectorized across tiles."""
    loads = [f"const float d{a}{b} = r{a}[4 * tc + {b}];" for a in range(6) for b in range(6)]
    stores = [f"V[{a * 6 + b}L * plane + tc] = v{a}{b};" for a in range(6) for b in range(6)]
    body = loads + input_transform("v", "d") + stores
    return "\n".join(
        [
            "static void og_wino4_in(const float* const* r, float* restrict V, long plane, "
            "long tw) {",
            *[f"  const float* restrict r{a} = r[{a}];" for a in range(6)],
            "  #pragma omp simd",
            "  for (long tc = 0; tc < tw; ++tc) {",
            *[f"    {line}" for line in body],
            "  }",
            "}",
        ]
    )


def _output_helper() -> str:
    """``og_wino4_out``: the output transform of ``tw`` adjacent tiles of one tile row of one
    output channel, from the products ``mb[ξ * ss + tc]`` into the four output rows ``y``
    (``rows`` of them and ``ow`` columns inside the plane): whole tiles vectorized across
    tiles, the last ones with bounds tests."""
    loads = [
        f"const float m{a}{b} = mb[{a * 6 + b}L * ss + tc];" for a in range(6) for b in range(6)
    ]
    body = loads + output_transform("m")
    full = [f"y{i}_[4 * tc + {j}] = y{i}{j};" for i in range(4) for j in range(4)]
    guarded = [
        f"if ({i} < rows && 4 * tc + {j} < ow) y{i}_[4 * tc + {j}] = y{i}{j};"
        for i in range(4)
        for j in range(4)
    ]
    return "\n".join(
        [
            "static void og_wino4_out(const float* restrict mb, long ss, float* const* y, "
            "long tw, long ow, long rows) {",
            *[f"  float* restrict y{i}_ = y[{i}];" for i in range(4)],
            "  long whole = rows >= 4 ? ow / 4 : 0;",
            "  #pragma omp simd",
            "  for (long tc = 0; tc < whole; ++tc) {",
            *[f"    {line}" for line in body + full],
            "  }",
            "  for (long tc = whole; tc < tw; ++tc) {",
            *[f"    {line}" for line in body + guarded],
            "  }",
            "}",
        ]
    )


HELPERS["wino4_in"] = _input_helper
HELPERS["wino4_out"] = _output_helper

#: The helpers' prototypes (``{name}``: the exported symbol; ``codegen/kernels.py``).
PROTOTYPES = {
    "wino4_in": "void {name}(const float* const* r, float* restrict V, long plane, long tw);",
    "wino4_out": (
        "void {name}(const float* restrict mb, long ss, float* const* y, long tw, long ow, "
        "long rows);"
    ),
}
