"""Generate the C of index searches and selections (``fused/indexed.py``): ArgMax/ArgMin
(:class:`ArgStep`) and TopK (:class:`TopKStep`). Scatters are in ``codegen/scatter.py``.

ArgMax/ArgMin: a unit is one outer index and a block of up to :data:`LANES` inner positions,
whose running extremes and their indices live in stack arrays; the axis is walked in order
(backwards for ``select_last_index``) with strict comparisons, so the first extreme found is
kept, and a NaN replaces any number and is never replaced (the reference: numpy's argmax).

TopK: a unit is one row. The ``k`` best elements seen so far are a binary heap whose root is
the worst of them; further elements are compared with the root only, a block at a time by a
vector loop, and only a block holding an element that beats the root is walked again to
insert (O(n log k) at worst, about n vector comparisons when k is small). The heap is then
sorted in place: best first, or by index for ``sorted=False``. The ranking is total: NaN
above every number, ties by lower index, so every result equals INTERPRETER's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.backends.cpu.codegen import dialect
from opgraph.backends.cpu.codegen.context import Check, ModuleContext
from opgraph.backends.cpu.codegen.scatter import ScatterEmitter
from opgraph.backends.fused.indexed import ArgStep, ScatterStep, TopKStep
from opgraph.backends.fused.loops import check_bit
from opgraph.backends.fused.views import static_all
from opgraph.core.element_type import ElementType

#: Inner positions per ArgMax unit: their running extremes stay in L1.
LANES = 256
#: Elements per block of a row's extreme search.
ROW_BLOCK = 256
#: Heaps up to this many bytes live on the stack; larger ones are allocated per call.
STACK_BYTES = 1 << 16

Emitted = tuple[str, str, tuple[Check, ...]]


def greater(t: ElementType, a: str, b: str) -> str:
    """``a`` ranks above ``b``: greater, NaN above every number."""
    if t.is_real:
        return f"({a} > {b} || ({a} != {a} && {b} == {b}))"
    return f"({a} > {b})"


def tied(t: ElementType, a: str, b: str) -> str:
    """``a`` and ``b`` rank the same (two NaNs do)."""
    if t.is_real:
        return f"({a} == {b} || ({a} != {a} && {b} != {b}))"
    return f"({a} == {b})"


def driver(name: str, units: int, work: int, module: ModuleContext) -> str:
    """``<name>_run(T, A)``: the units in parallel when the work is worth it."""
    threads = module.num_threads
    if units > 1 and threads > 1 and work >= module.parallel_threshold:
        module.uses_pool = True
        call = f"og_parallel({name}, T, A, {units}L, 1L, {threads})"
    else:
        call = f"{name}(T, A, 0, {units}L)"
    return f"static int {name}_run(void* const* T, char* A) {{\n  return {call};\n}}"


def comment(name: str, label: str) -> str:
    return f"/* {name}: {label.replace('*/', '* /')} */"


def _arg(step: ArgStep, i: int, module: ModuleContext) -> Emitted:
    assert step.x is not None and step.out is not None
    if step.x.shape[2] == 1:
        return _arg_rows(step, i, module)
    name = f"a{i}"
    x, out = step.x, step.out
    outer, n, inner = static_all(x.shape)  # static: no symbolic lowering
    lanes = min(inner, LANES)
    blocks = -(-inner // lanes)
    t = x.element_type
    st, ct, it = (
        dialect.storage_type(t),
        dialect.compute_type(t),
        dialect.storage_type(out.element_type),
    )
    xs = x.strides
    first, order = (
        (n - 1, f"for (long k = {n - 2}L; k >= 0; --k)")
        if step.last
        else (0, f"for (long k = 1; k < {n}L; ++k)")
    )
    if step.largest:
        better = greater(t, "v", "best[l]")
    else:  # a NaN still wins, and a NaN found first is never replaced
        better = "(v < best[l] || (v != v && best[l] == best[l]))" if t.is_real else "(v < best[l])"
    base = module.base
    lines = [
        comment(name, step.label),
        f"static int {name}(void* const* T, char* A, long lo, long hi) {{",
        f"  const {st}* x0 = (const {st}*)({base(x.buffer)}) + {x.offset}L;",
        f"  {it}* y0 = ({it}*)({base(out.buffer)}) + {out.offset}L;",
        "  for (long u = lo; u < hi; ++u) {",
        f"    const long o = u / {blocks}L, b = (u % {blocks}L) * {lanes}L;",
        f"    const long m = {inner}L - b < {lanes}L ? {inner}L - b : {lanes}L;",
        f"    const {st}* x = x0 + o * {xs[0]}L + b * {xs[2]}L;",
        f"    {ct} best[{lanes}]; long at[{lanes}];",
        "    for (long l = 0; l < m; ++l) {",
        f"      best[l] = {dialect.load(t, f'x[{first}L * {xs[1]}L + l * {xs[2]}L]')};",
        f"      at[l] = {first}L;",
        "    }",
        f"    {order} {{",
        "      for (long l = 0; l < m; ++l) {",
        f"        const {ct} v = {dialect.load(t, f'x[k * {xs[1]}L + l * {xs[2]}L]')};",
        f"        if ({better}) {{ best[l] = v; at[l] = k; }}",
        "      }",
        "    }",
        f"    for (long l = 0; l < m; ++l) y0[o * {inner}L + b + l] = ({it})at[l];",
        "  }",
        "  return 0;",
        "}",
        driver(name, outer * blocks, outer * n * inner, module),
    ]
    return "\n".join(lines), f"if ((e = {name}_run(T, A))) return OG_FAIL({i}, e);", ()


def _arg_rows(step: ArgStep, i: int, module: ModuleContext) -> Emitted:
    """One row per unit, in blocks of :data:`ROW_BLOCK`: the block's extreme by a vector
    reduction (and whether it holds a NaN); only a block that beats the best so far is
    scanned again for the position of its extreme (or of its first NaN, which ends the row).
    Blocks are visited backwards for ``select_last_index``, and scanned backwards."""
    assert step.x is not None and step.out is not None
    name = f"a{i}"
    x, out = step.x, step.out
    outer, n, _ = static_all(x.shape)  # static: no symbolic lowering
    t = x.element_type
    st, ct = dialect.storage_type(t), dialect.compute_type(t)
    it = dialect.storage_type(out.element_type)
    s = x.strides[1]
    blocks = -(-n // ROW_BLOCK)
    op, reduce = (">", "max") if step.largest else ("<", "min")
    real = t.is_real

    def at(k: str) -> str:
        return dialect.load(t, f"x[({k}) * {s}L]")

    scan = "for (long k = e - 1; k >= b0; --k)" if step.last else "for (long k = b0; k < e; ++k)"
    visit = (
        f"for (long c = {blocks - 1}L; c >= 0; --c)"
        if step.last
        else f"for (long c = 0; c < {blocks}L; ++c)"
    )
    nan_lines = (
        [
            "      if (nan) {",
            f"        {scan} if ({at('k')} != {at('k')}) {{ where = k; break; }}",
            "        break;",
            "      }",
        ]
        if real
        else []
    )
    first = n - 1 if step.last else 0
    lines = [
        comment(name, step.label),
        f"static int {name}(void* const* T, char* A, long lo, long hi) {{",
        f"  const {st}* x0 = (const {st}*)({module.base(x.buffer)}) + {x.offset}L;",
        f"  {it}* y0 = ({it}*)({module.base(out.buffer)}) + {out.offset}L;",
        "  for (long u = lo; u < hi; ++u) {",
        f"    const {st}* x = x0 + u * {x.strides[0]}L;",
        f"    {ct} best = {at(str(first))};",
        f"    long where = {first}L;",
        f"    if ({'best == best' if real else '1'}) {visit} {{",
        f"      const long b0 = c * {ROW_BLOCK}L;",
        f"      const long e = b0 + {ROW_BLOCK}L < {n}L ? b0 + {ROW_BLOCK}L : {n}L;",
        f"      {ct} m = {at('b0')};",
        "      int nan = 0;",
        f"      #pragma omp simd reduction({reduce}:m) reduction(|:nan)",
        "      for (long k = b0; k < e; ++k) {",
        f"        const {ct} v = {at('k')};",
        f"        m = v {op} m ? v : m;",
        "        nan |= v != v;" if real else "",
        "      }",
        *nan_lines,
        f"      if (m {op} best) {{",
        "        best = m;",
        f"        {scan} if ({at('k')} == m) {{ where = k; break; }}",
        "      }",
        "    }",
        f"    y0[u] = ({it})where;",
        "  }",
        "  return 0;",
        "}",
        driver(name, outer, outer * n, module),
    ]
    call = f"if ((e = {name}_run(T, A))) return OG_FAIL({i}, e);"
    return "\n".join(line for line in lines if line), call, ()


def _top_k(step: TopKStep, i: int, module: ModuleContext) -> Emitted:
    assert step.x is not None and step.values is not None and step.indices is not None
    name = f"t{i}"
    x, values, indices = step.x, step.values, step.indices
    outer, n, inner = static_all(x.shape)  # static: no symbolic lowering
    k = step.k
    t = x.element_type
    st, ct = dialect.storage_type(t), dialect.compute_type(t)
    it = dialect.storage_type(indices.element_type)
    checks: list[Check] = []
    size = k * (8 + t.itemsize)
    on_stack = size <= STACK_BYTES
    if on_stack:
        scratch = [f"    {ct} hv[{k}]; long hx[{k}];"]
        release = ""
    else:
        bit = check_bit(checks, step.node, f"could not allocate {size} bytes for the top-k heap", 8)
        scratch = [
            f"    {ct}* hv = ({ct}*)__builtin_malloc({k}UL * sizeof({ct}));",
            f"    long* hx = (long*)__builtin_malloc({k}UL * sizeof(long));",
            f"    if (!hv || !hx) {{ __builtin_free(hv); __builtin_free(hx); return {1 << bit}; }}",
        ]
        release = "    __builtin_free(hv); __builtin_free(hx);"
    xs = x.strides
    base = module.base
    load = dialect.load(t, f"x[j * {xs[1]}L]")

    def beats(v: str, root: str) -> str:
        """``v`` ranks above the heap's worst by value (a later index never wins a tie)."""
        return greater(t, v, root) if step.largest else greater(t, root, v)

    lines = [
        comment(name, step.label),
        _heap_helpers(name, t, step.largest),
        f"static int {name}(void* const* T, char* A, long lo, long hi) {{",
        f"  const {st}* x0 = (const {st}*)({base(x.buffer)}) + {x.offset}L;",
        f"  {st}* v0 = ({st}*)({base(values.buffer)}) + {values.offset}L;",
        f"  {it}* i0 = ({it}*)({base(indices.buffer)}) + {indices.offset}L;",
        "  for (long u = lo; u < hi; ++u) {",
        f"    const long o = u / {inner}L, c = u % {inner}L;",
        f"    const {st}* x = x0 + o * {xs[0]}L + c * {xs[2]}L;",
        *scratch,
        f"    for (long j = 0; j < {k}L; ++j) {{",
        f"      hv[j] = {dialect.load(t, f'x[j * {xs[1]}L]')}; hx[j] = j;",
        "    }",
        f"    for (long j = {k // 2 - 1}L; j >= 0; --j) {name}_sift(hv, hx, j, {k}L, 0);",
        f"    for (long j0 = {k}L; j0 < {n}L; j0 += {ROW_BLOCK}L) {{",
        f"      const long e = j0 + {ROW_BLOCK}L < {n}L ? j0 + {ROW_BLOCK}L : {n}L;",
        f"      const {ct} r = hv[0];",
        "      int any = 0;",
        "      #pragma omp simd reduction(|:any)",
        "      for (long j = j0; j < e; ++j) {",
        f"        const {ct} v = {load}; any |= {beats('v', 'r')};",
        "      }",
        "      if (any) for (long j = j0; j < e; ++j) {",
        f"        const {ct} v = {load};",
        f"        if ({beats('v', 'hv[0]')}) {{",
        f"          hv[0] = v; hx[0] = j; {name}_sift(hv, hx, 0, {k}L, 0);",
        "        }",
        "      }",
        "    }",
        *_sort(name, k, step.ordered),
        f"    {st}* vo = v0 + o * {k * inner}L + c;",
        f"    {it}* io = i0 + o * {k * inner}L + c;",
        f"    for (long j = 0; j < {k}L; ++j) {{",
        f"      vo[j * {inner}L] = {dialect.store(t, 'hv[j]')}; io[j * {inner}L] = ({it})hx[j];",
        "    }",
        release,
        "  }",
        "  return 0;",
        "}",
        driver(name, outer * inner, outer * n * inner, module),
    ]
    call = f"if ((e = {name}_run(T, A))) return OG_FAIL({i}, e);"
    return "\n".join(line for line in lines if line), call, tuple(checks)


def _sort(name: str, k: int, ordered: bool) -> list[str]:
    """Heap sort of the ``k`` kept elements: best first (the worst root moves to the end), or
    by ascending index (a heap whose root is the largest index)."""
    mode = 0 if ordered else 1
    heapify = f"    for (long j = {k // 2 - 1}L; j >= 0; --j) {name}_sift(hv, hx, j, {k}L, 1);"
    lines = [] if ordered else [heapify]
    return [
        *lines,
        f"    for (long end = {k - 1}L; end > 0; --end) {{",
        f"      {name}_swap(hv, hx, 0, end); {name}_sift(hv, hx, 0, end, {mode});",
        "    }",
    ]


def _heap_helpers(name: str, t: ElementType, largest: bool) -> str:
    """``worse(a, ia, b, ib)``: ``a`` (at index ``ia``) ranks below ``b``; ``sift``: restore
    the heap below ``i`` (mode 0: root the worst, mode 1: root the largest index)."""
    ct = dialect.compute_type(t)
    above = greater(t, "b", "a") if largest else greater(t, "a", "b")
    return "\n".join(
        [
            f"static inline int {name}_worse({ct} a, long ia, {ct} b, long ib) {{",
            f"  return {above} || ({tied(t, 'a', 'b')} && ib < ia);",
            "}",
            f"static inline void {name}_swap({ct}* v, long* x, long i, long j) {{",
            f"  const {ct} tv = v[i]; v[i] = v[j]; v[j] = tv;",
            "  const long tx = x[i]; x[i] = x[j]; x[j] = tx;",
            "}",
            f"static void {name}_sift({ct}* v, long* x, long i, long n, int by_index) {{",
            "  for (;;) {",
            "    long w = i;",
            "    const long l = 2 * i + 1, r = l + 1;",
            "    if (by_index) {",
            "      if (l < n && x[l] > x[w]) w = l;",
            "      if (r < n && x[r] > x[w]) w = r;",
            "    } else {",
            f"      if (l < n && {name}_worse(v[l], x[l], v[w], x[w])) w = l;",
            f"      if (r < n && {name}_worse(v[r], x[r], v[w], x[w])) w = r;",
            "    }",
            "    if (w == i) return;",
            f"    {name}_swap(v, x, i, w);",
            "    i = w;",
            "  }",
            "}",
        ]
    )


def _scatter(step: ScatterStep, i: int, module: ModuleContext) -> Emitted:
    checks: list[Check] = []
    text = ScatterEmitter(step, f"x{i}", module, checks).emit()
    return text, f"if ((e = x{i}_run(T, A))) return OG_FAIL({i}, e);", tuple(checks)


#: The C generators of these steps, for ``codegen/module.py``'s ``STEP_EMITTERS``.
EMITTERS: dict[type, Callable[[Any, int, ModuleContext], Emitted]] = {
    ArgStep: _arg,
    TopKStep: _top_k,
    ScatterStep: _scatter,
}
