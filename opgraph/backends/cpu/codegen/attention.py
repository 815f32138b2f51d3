"""Generate the C of fused attention steps
(:class:`~opgraph.backends.fused.lowering.attention.AttentionStep`).

A unit is one batch entry (a head) and one block of query rows. Its scores (``rows x m``
floats, at most 128 KiB) are computed by the panel GEMM into this thread's slice of the
scratch, where they stay in cache while each row is scaled, masked, reduced to its maximum,
exponentiated and summed in one vector pass (``og_exp_sum``, an inline ``exp``:
:mod:`~opgraph.backends.cpu.codegen.attention_exp`) and divided by its sum; a second product
multiplies the block by ``v`` straight into the output.

Each thread packs an entry's ``k`` and ``v`` once for all the blocks of that entry it
computes (the runtime hands a thread consecutive units first): the entry packed is noted in
the header of the thread's scratch slice, reset before every run of the step. With long
keys (Whisper's 1500) a unit is 21 query rows, and packing 2 x 64 x 1500 floats per unit cost
about as much as its two products.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.backends.cpu.codegen import attention_exp, dialect
from opgraph.backends.cpu.codegen.context import ModuleContext
from opgraph.backends.cpu.codegen.register_transpose import loaded, transpose, transposed
from opgraph.backends.fused.lowering.attention import (
    SCRATCH_HEADER,
    AttentionStep,
    scratch_floats,
)
from opgraph.backends.fused.views import View, static, static_all
from opgraph.core import element_type as et
from opgraph.core.dim import Dim


def _pointer(module: ModuleContext, view: View, name: str, const: bool = True) -> str:
    q = "const " if const else ""
    return f"  {q}float* {name} = ({q}float*)({module.base(view.buffer)}) + {view.offset}L;"


class AttentionEmitter:
    """``static int <name>(T, A, lo, hi)`` over units and ``<name>_run(T, A)``."""

    def __init__(self, step: AttentionStep, name: str, module: ModuleContext) -> None:
        assert step.q is not None and step.k is not None and step.v is not None
        assert step.out is not None and step.scratch is not None
        self.step, self.name, self.module = step, name, module
        self.q, self.k, self.v, self.out = step.q, step.k, step.v, step.out
        self.scratch = step.scratch
        (self.n, self.d) = static_all(self.q.shape)
        self.m, self.e = static(self.k.shape[1]), static(self.v.shape[1])

    def emit(self) -> str:
        s, name, module = self.step, self.name, self.module
        self.helpers()
        module.uses_pool = True
        module.helper(attention_exp.HELPER)
        rows, blocks = s.block_rows, -(-self.n // s.block_rows)
        units = len(s.batch) * blocks
        table = ", ".join("{" + ", ".join(f"{x}L" for x in row) + "}" for row in s.batch)
        ldo = self.out.strides[0]
        lines = [
            f"/* {name}: {s.label.replace('*/', '* /')} */",
            f"static const long {name}_batch[{len(s.batch)}][5] = {{{table}}};",
            f"static int {name}(void* const* T, char* A, long lo, long hi) {{",
            _pointer(module, self.q, "q0"),
            _pointer(module, self.k, "k0"),
            _pointer(module, self.v, "v0"),
            _pointer(module, self.out, "o0", False),
            _pointer(module, self.scratch, "s0", False),
            *([_pointer(module, s.mask, "mk0")] if s.mask is not None else []),
            f"  float* slice = s0 + (long)og_worker_index() * {scratch_floats(s)}L;",
            "  long* packed = (long*)slice;  /* the entry whose k and v are in kp, vp */",
            f"  float* s = slice + {SCRATCH_HEADER}L;",
            f"  float* kp = s + {rows * self.m}L;",
            f"  float* vp = kp + {_panels(self.m) * self.d}L;",
            "  for (long u = lo; u < hi; ++u) {",
            f"    const long b = u / {blocks}L, r0 = (u % {blocks}L) * {rows}L;",
            f"    const long rows = {self.n}L - r0 < {rows}L ? {self.n}L - r0 : {rows}L;",
            f"    const long* off = {name}_batch[b];",
            "    if (*packed != b) {",
            *(f"  {line}" for line in self.pack()),
            "      *packed = b;",
            "    }",
            "    "
            + self.product(
                f"q0 + off[0] + r0 * {self.q.strides[0]}L",
                self.q.strides[0],
                "kp",
                "s",
                self.m,
                self.d,
                self.m,
            ),
            *([f"    float inv[{rows}];  /* 1 / each row's sum */"] if self.deferred else []),
            "    for (long r = 0; r < rows; ++r) {",
            f"      float* x = s + r * {self.m}L;",
            *self.softmax(),
            "    }",
            "    "
            + self.product("s", self.m, "vp", f"o0 + off[3] + r0 * {ldo}L", ldo, self.m, self.e),
            *self.normalize(ldo),
            "  }",
            "  return 0;",
            "}",
            self.driver(units),
        ]
        return "\n".join(lines)

    def helpers(self) -> None:
        """The module helpers the products need."""
        self.module.gemm_panels()

    def product(self, a: str, lda: Dim, panels: str, c: str, ldc: Dim, k: int, n: int) -> str:
        """``c (rows x n) = a (rows x k, lda) times panels`` (the packed k or v), in C."""
        return f"og_gemm_panels({a}, {lda}L, {panels}, {c}, {ldc}L, rows, {k}L, 0, {n}L);"

    def pack(self) -> list[str]:
        """This entry's k (d x m) and v (m x e) as 32-column panels, zero-padded (what the
        panel GEMM reads: one unit packs 2 x 64 x m floats for m x rows x 128 products)."""
        (k_rows, k_cols), (v_rows, v_cols) = self.k.strides, self.v.strides
        d, m, e = self.d, self.m, self.e
        # half panels (the AVX2 tile's layout) are 16-column panels, two per 32-column panel
        w = 16 if self.module.panel_halves else 32
        keys = self._keys_by_blocks(k_cols) if k_rows == 1 and d % 16 == 0 and w == 32 else []
        return [
            *keys,
            f"    for (long p = 0; p < {_panels(m) // w}L; ++p)",
            f"      for (long c = 0; c < {d}L; ++c)",
            f"        for (long jj = 0; jj < {w}L; ++jj) {{",
            f"          const long j = p * {w}L + jj;",
            f"          kp[(p * {d}L + c) * {w}L + jj] = j < {m}L ? "
            f"k0[off[1] + c * {k_rows}L + j * {k_cols}L] : 0.0f;",
            "        }",
            *(["#endif"] if keys else []),
            f"    for (long p = 0; p < {_panels(e) // w}L; ++p)",
            f"      for (long j = 0; j < {m}L; ++j)",
            f"        for (long cc = 0; cc < {w}L; ++cc) {{",
            f"          const long c = p * {w}L + cc;",
            f"          vp[(p * {m}L + j) * {w}L + cc] = c < {e}L ? "
            f"v0[off[2] + j * {v_rows}L + c * {v_cols}L] : 0.0f;",
            "        }",
        ]

    def _keys_by_blocks(self, stride: Dim) -> list[str]:
        """AVX-512: k's panels from blocks of 16 keys x 16 contiguous values, transposed in
        registers (:func:`register_transpose.transpose`); the scalar loop after it
        (``#else``) for other builds."""
        d, m = self.d, self.m
        row = loaded("t")
        rows = [
            f"        og_av {row}{r} = zero;\n        if (j0 + {r} < {m}L) "
            f"__builtin_memcpy(&{row}{r}, k0 + off[1] + (j0 + {r}) * {stride}L + cb, 64);"
            for r in range(16)
        ]
        out = transposed(16, "t")
        stores = [
            f"        __builtin_memcpy(kp + (p * {d}L + cb + {i}) * 32L + h * 16L, &{out}{i}, 64);"
            for i in range(16)
        ]
        return [
            "#if defined(__AVX512F__)",
            "    {",
            "    typedef float og_av __attribute__((vector_size(64)));",
            "    typedef int og_ai __attribute__((vector_size(64)));",
            "    const og_av zero = {0};",
            f"    for (long p = 0; p < {_panels(m) // 32}L; ++p)",
            "      for (long h = 0; h < 2; ++h)",
            f"      for (long cb = 0; cb < {d}L; cb += 16) {{",
            "        const long j0 = p * 32L + h * 16L;",
            *rows,
            *transpose(16, "t", "og_av", "og_ai", " " * 8),
            *stores,
            "      }",
            "    }",
            "#else",
        ]

    def softmax(self) -> list[str]:
        """One row ``x`` of scores in place: the unfused chain's operations in its order, up
        to the division by the row's sum, which :attr:`deferred` steps apply to the output
        row instead (:meth:`normalize`)."""
        s, m = self.step, self.m
        value = "x[j]"
        if s.scale != 1.0 or s.divide:
            value = f"x[j] {'/' if s.divide else '*'} {dialect.literal(s.scale, et.f32)}"
        if s.mask is not None:
            r_stride, c_stride = s.mask.strides
            value = f"({value}) + mk0[off[4] + (r0 + r) * {r_stride}L + j * {c_stride}L]"
        store = [] if value == "x[j]" else ["        x[j] = y;"]
        return [
            "      float peak = -__builtin_inff();",
            "      #pragma omp simd reduction(max:peak)",
            f"      for (long j = 0; j < {m}L; ++j) {{",
            f"        const float y = {value};",
            *store,
            "        peak = y > peak ? y : peak;",
            "      }",
            f"      const float total = og_exp_sum(x, {m}L, peak);",
            *(["      inv[r] = 1.0f / total;"] if self.deferred else self.divide()),
        ]

    def divide(self) -> list[str]:
        """Each score of row ``x`` divided by the row's sum (probabilities before the
        product by ``v``: the ``zero_nan`` form, which zeroes NaN probabilities)."""
        return [
            "      #pragma omp simd",
            f"      for (long j = 0; j < {self.m}L; ++j) {{",
            "        const float p = x[j] / total;",
            f"        x[j] = {'p != p ? 0.0f : p' if self.step.zero_nan else 'p'};",
            "      }",
        ]

    @property
    def deferred(self) -> bool:
        """Whether the division by each row's sum is applied to the ``rows x e`` output
        after the product by ``v`` (``e`` multiplications a row) rather than to the ``rows x
        m`` scores before it (``m`` divisions a row and one more pass over them: Whisper's
        1500 keys against 64 values). Not with ``zero_nan``, whose NaN test is on each
        probability."""
        return not self.step.zero_nan

    def normalize(self, ldo: Dim) -> list[str]:
        """Scale each output row of the block by its ``inv`` (:attr:`deferred`)."""
        if not self.deferred:
            return []
        return [
            "    for (long r = 0; r < rows; ++r) {",
            f"      float* o = o0 + off[3] + (r0 + r) * {ldo}L;",
            "      #pragma omp simd",
            f"      for (long c = 0; c < {self.e}L; ++c) o[c] *= inv[r];",
            "    }",
        ]

    def driver(self, units: int) -> str:
        threads = min(self.module.num_threads, self.scratch.shape[0])
        if units > 1 and threads > 1:
            call = f"og_parallel({self.name}, T, A, {units}L, 1L, {threads})"
        else:
            call = f"{self.name}(T, A, 0, {units}L)"
        slices = static(self.scratch.shape[0])
        return "\n".join(
            [
                f"static int {self.name}_run(void* const* T, char* A) {{",
                _pointer(self.module, self.scratch, "s0", False),
                f"  for (long t = 0; t < {slices}L; ++t)  /* nothing packed yet */",
                f"    *(long*)(s0 + t * {scratch_floats(self.step)}L) = -1L;",
                f"  return {call};",
                "}",
            ]
        )


def _panels(columns: int) -> int:
    """``columns`` rounded up to whole 32-column panels."""
    return -(-columns // 32) * 32


def _emit(step: AttentionStep, i: int, module: ModuleContext) -> tuple[str, str, tuple[Any, ...]]:
    return AttentionEmitter(step, f"a{i}", module).emit(), f"a{i}_run(T, A);", ()


#: The C generator of the attention step (``module.STEP_EMITTERS`` takes it in).
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], tuple[str, str, tuple[Any, ...]]]] = {
    AttentionStep: _emit
}
