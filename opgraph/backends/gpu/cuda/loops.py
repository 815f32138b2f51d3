"""The CUDA schedule of the fused compiler's loop emitter
(:class:`~opgraph.backends.fused.loops.LoopEmitter`): one loop kernel as a CUDA kernel.

The domain, the node values and the reductions' rules are the shared emitter's, so the CPU
and the GPU compute the same loops; only the mapping to hardware differs.

* **Pointwise** kernels are a grid-stride loop over the flattened domain. The element
  computation is one ``__host__ __device__`` function (``<name>_body``) taking the loaded
  elements and returning the stored ones; the loop calls it once per element, or, when every
  access walks the last axis contiguously (or not at all) and the pointers are 16-element
  aligned at run time, once per lane of 4-element vector loads and stores (``og_v4``).
* **Row** kernels (with reductions) run each row's reduction phases and then its stored
  elementwise values, as on the CPU. Rows of at least :data:`BLOCK_ROW_MIN` elements get one
  block each: threads stride over the row, then a warp-shuffle and shared-memory tree combines
  the per-thread accumulators (softmax, layer norm). Shorter rows get one thread each (a
  column reduction then reads coalesced memory).

Accumulators combine with the reduction rule's own ``combine`` template (merging two
partial accumulators is accumulating one into the other); max/min carry a NaN flag.
"""

from __future__ import annotations

import math

from opgraph.backends.fused.loops import Access, LoopEmitter, comment
from opgraph.backends.fused.program import KKind, KNode, Level, LoopKernel
from opgraph.backends.fused.views import static
from opgraph.backends.gpu.cuda import dialect
from opgraph.backends.gpu.cuda.context import MAX_CHECKS, KernelState
from opgraph.backends.gpu.cuda.kernel import CudaKernel, KernelParam, LaunchKind

#: Rows at least this long get a block each; shorter ones a thread each.
BLOCK_ROW_MIN = 64
#: Elements per vector access.
VECTOR = 4
#: Index arithmetic is 32-bit when every index stays below this (room for a grid stride).
INT_LIMIT = 2**31 - 2**25


class CudaLoopEmitter(LoopEmitter):
    """Renders one LoopKernel as ``extern "C" __global__ void <name>(...)``.

    Args:
        kernel: the fused loop nest.
        name: the kernel's symbol.
        label: the graph nodes it computes (a comment, and error messages).
        restrict: the pointers never alias (no in-place store), so they are ``__restrict__``.
        block: threads per block of pointwise and thread-per-row kernels; the most threads of
            a block-per-row kernel.
    """

    def __init__(
        self, kernel: LoopKernel, name: str, label: str, restrict: bool = True, block: int = 256
    ) -> None:
        self.state = KernelState()
        super().__init__(
            kernel, name, label, dialect.CUDA, self.state, self.state.checks, MAX_CHECKS
        )
        self.restrict = restrict
        self.block = block
        self.index = "int" if self._extent() < INT_LIMIT else "long long"
        self.host = False  # render a serial host function instead (tests)

    def _extent(self) -> int:
        """An upper bound of every index the kernel computes."""
        dims = self.domain.rows + self.domain.vector
        biggest = self.domain.static_rows * self.domain.static_length
        for a in self.accesses.values():
            reach = sum(abs(static(d.strides[a.name])) * max(static(d.size) - 1, 0) for d in dims)
            biggest = max(biggest, reach + 1)
        return biggest

    # ------------------------------------------------------------------------ result
    def render(self) -> CudaKernel | None:
        """The kernel, or None when its domain is empty (nothing to launch)."""
        rows, length = self.domain.static_rows, self.domain.static_length
        if rows == 0 or (not self.kernel.axes and length == 0):
            return None
        if not self.kernel.axes:
            source, work, block, launch = self.pointwise()
        elif length >= BLOCK_ROW_MIN:
            block = min(self.block, max(32, 1 << math.ceil(math.log2(-(-length // 4)))))
            source, work, launch = self.row_kernel(block), rows, LaunchKind.BLOCKS
        else:
            block = self.block
            source, work, launch = self.row_kernel(None), rows, LaunchKind.ELEMENTS
        params = tuple(KernelParam(a.name, a.view, a.store) for a in self.accesses.values())
        return CudaKernel(
            self.name,
            source,
            params,
            work,
            block,
            launch,
            tuple(self.state.checks),
            tuple(self.state.helpers),
            self.kernel,
            self.label,
        )

    def render_host(self) -> str | None:
        """A serial host function ``void <name>_host(<the kernel's parameters>)`` running the
        kernel's scalar path over the whole domain, for kernels that need no block
        cooperation (pointwise and thread-per-row); it calls the module's ``<name>_body``.
        Tests compile it with nvcc for the host and run it on real data: the generated CUDA's
        numbers without a GPU. None for block-per-row kernels and empty domains."""
        rows, length = self.domain.static_rows, self.domain.static_length
        if rows == 0 or (not self.kernel.axes and length == 0):
            return None
        if self.kernel.axes and length >= BLOCK_ROW_MIN:
            return None
        self.host = True
        if not self.kernel.axes and self.gathers():
            return "\n".join(self.gather_pointwise())
        if not self.kernel.axes:
            _, loads, stores = self.body_function()
            lines = [self.signature(self.block)]
            if not self.state.checks:
                lines.append("  int* og_err = 0;")
            lines += [*self.scalar_loop(rows * length, loads, stores), "}"]
            return "\n".join(lines)
        return self.row_kernel(None).split("\n", 1)[1]  # without the comment line

    def signature(self, block: int) -> str:
        restrict = " __restrict__" if self.restrict else ""
        params = []
        for a in self.accesses.values():
            t = dialect.storage_type(a.view.element_type)
            const = "" if a.store else "const "
            params.append(f"{const}{t}*{restrict} {a.name}")
        if self.state.checks:
            params.append("int* og_err")
        joined = ", ".join(params)
        if self.host:
            return f"void {self.name}_host({joined}) {{"
        return f'extern "C" __global__ void __launch_bounds__({block}) {self.name}({joined}) {{'

    def header(self) -> str:
        return f"/* {self.name}: {comment(self.label)} */"

    # ---------------------------------------------------------------------- indexing
    def row_offsets(self, row: str, indent: str) -> list[str]:
        """Decompose row ``row`` and compute every access's row offset ``o_<name>``."""
        i_t = self.index
        lines = []
        names = []
        if self.domain.rows:
            lines.append(f"{indent}{i_t} t_ = {row};")
            for i, dim in reversed(list(enumerate(self.domain.rows))):
                lines.append(f"{indent}const {i_t} d{i} = t_ % {dim.size}; t_ /= {dim.size};")
                names.append((i, dim))
        for a in self.accesses.values():
            terms = [f"d{i} * {d.strides[a.name]}" for i, d in names if d.strides[a.name]]
            lines.append(f"{indent}const {i_t} o_{a.name} = {' + '.join(terms) or '0'};")
        return lines

    def inner_coordinates(self, flat: str, indent: str) -> list[str]:
        """Decompose the inner index ``flat`` into ``l0, l1, …`` (one per vector dim)."""
        dims = self.domain.vector
        if len(dims) == 1:
            return [f"{indent}const {self.index} l0 = {flat};"]
        lines = [f"{indent}{self.index} u_ = {flat};"]
        for i in range(len(dims) - 1, 0, -1):
            lines.append(
                f"{indent}const {self.index} l{i} = u_ % {dims[i].size}; u_ /= {dims[i].size};"
            )
        lines.append(f"{indent}const {self.index} l0 = u_;")
        return lines

    # --------------------------------------------------------------------- pointwise
    def body_function(self) -> tuple[str, list[Access], list[Access]]:
        """``<name>_body``: loaded elements in, stored elements out (by reference)."""
        loads = [a for (k, store), a in self.accesses.items() if not store]
        stores = [a for (k, store), a in self.accesses.items() if store]
        lines: list[str] = []
        load_of = {a.name: f"x{a.name[1:]}" for a in loads}
        for k in self.needed([k for k, _ in self.kernel.stores], Level.FULL):
            node = self.kernel.nodes[k]
            source = load_of.get(f"p{k}") if node.kind is KKind.LOAD else None
            self.define(k, lines, "  ", source)
        for slot, (k, view) in enumerate(self.kernel.stores):
            lines.append(f"  y{slot} = {dialect.store(view.element_type, self.var(k))};")
        params = [f"const {dialect.storage_type(a.view.element_type)} x{a.name[1:]}" for a in loads]
        params += [f"{dialect.storage_type(a.view.element_type)}& y{a.name[1:]}" for a in stores]
        params.append("int* og_err")
        head = f"OG_HD void {self.name}_body({', '.join(params)}) {{"
        return "\n".join([head, "  (void)og_err;", *lines, "}"]), loads, stores

    def vectorizable(self) -> bool:
        """Every access walks the last axis contiguously (loads may also stay put), in whole
        vectors: rows of a multiple of 4 elements whose starts keep vectors aligned."""
        (last,) = self.domain.vector
        if last.size % VECTOR or last.size < VECTOR:
            return False
        contiguous = False
        for a in self.accesses.values():
            stride = last.strides[a.name]
            if stride not in ((1,) if a.store else (0, 1)):
                return False
            if stride == 1:
                contiguous = True
                if any(d.strides[a.name] % VECTOR for d in self.domain.rows):
                    return False
        return contiguous

    def gathers(self) -> bool:
        return any(n.kind is KKind.GATHER for n in self.kernel.nodes)

    def gather_pointwise(self) -> list[str]:
        """A pointwise kernel with gathers: each thread computes its elements in place, its
        pointers in scope (an indexed load needs the table, not a loaded element)."""
        total, length = (
            self.domain.static_rows * self.domain.static_length,
            self.domain.static_length,
        )
        body = [self.grid_loop("i_", total), *self.split_flat("i_", length)]
        if not self.domain.rows:
            body += [f"    const {self.index} o_{a.name} = 0;" for a in self.accesses.values()]
        stored = [k for k, _ in self.kernel.stores]
        for k in self.needed(stored, Level.FULL):
            self.define(k, body, "    ")
        for slot, (k, view) in enumerate(self.kernel.stores):
            value = dialect.store(view.element_type, self.var(k))
            body.append(f"    {self.point(self.accesses[(slot, True)])} = {value};")
        return [self.signature(self.block), *body, "  }", "}"]

    def pointwise(self) -> tuple[str, int, int, LaunchKind]:
        if self.gathers():
            total = self.domain.static_rows * self.domain.static_length
            source = "\n".join([self.header(), *self.gather_pointwise()])
            return source, total, self.block, LaunchKind.ELEMENTS
        body, loads, stores = self.body_function()
        total = self.domain.static_rows * self.domain.static_length
        vector = self.vectorizable()
        lines = [self.header(), body, self.signature(self.block)]
        if not self.state.checks:
            lines.append("  int* og_err = 0;")
        scalar = self.scalar_loop(total, loads, stores)
        if vector:
            aligned = [
                f"og_aligned4({a.name})" for a in self.accesses.values() if self.contiguous(a)
            ]
            lines.append(f"  if ({' && '.join(aligned)}) {{")
            lines += ["  " + line for line in self.vector_loop(total, loads, stores)]
            lines.append("  } else {")
            lines += ["  " + line for line in scalar]
            lines.append("  }")
        else:
            lines += scalar
        lines.append("}")
        work = total // VECTOR if vector else total
        return "\n".join(lines), work, self.block, LaunchKind.ELEMENTS

    def contiguous(self, a: Access) -> bool:
        return self.domain.vector[0].strides[a.name] == 1

    def grid_loop(self, var: str, count: int) -> str:
        i_t = self.index
        if self.host:
            return f"  for ({i_t} {var} = 0; {var} < {count}; ++{var}) {{"
        return (
            f"  for ({i_t} {var} = ({i_t})blockIdx.x * blockDim.x + threadIdx.x; {var} < {count}; "
            f"{var} += ({i_t})gridDim.x * blockDim.x) {{"
        )

    def split_flat(self, flat: str, length: int, scale: str = "") -> list[str]:
        """Row ``r_`` and first column ``l0`` of flat position ``flat`` (rows of ``length``)."""
        i_t = self.index
        if not self.domain.rows:
            return [f"    const {i_t} l0 = {flat}{scale};"]
        return [
            f"    const {i_t} r_ = {flat} / {length};",
            f"    const {i_t} l0 = ({flat} - r_ * {length}){scale};",
            *self.row_offsets("r_", "    "),
        ]

    def point(self, a: Access) -> str:
        """Access ``a``'s address at row offset and column ``l0`` (pointwise kernels)."""
        terms = [f"o_{a.name}"] if self.domain.rows else []
        stride = self.domain.vector[0].strides[a.name]
        if stride:
            terms.append("l0" if stride == 1 else f"l0 * {stride}")
        return f"{a.name}[{' + '.join(terms) or '0'}]"

    def scalar_loop(self, total: int, loads: list[Access], stores: list[Access]) -> list[str]:
        length = self.domain.static_length
        args = [self.point(a) for a in loads + stores]
        return [
            self.grid_loop("i_", total),
            *self.split_flat("i_", length),
            f"    {self.name}_body({', '.join([*args, 'og_err'])});",
            "  }",
        ]

    def vector_loop(self, total: int, loads: list[Access], stores: list[Access]) -> list[str]:
        chunks = self.domain.static_length // VECTOR
        lines = [self.grid_loop("c_", total // VECTOR), *self.split_flat("c_", chunks, " * 4")]
        args = []
        for a in loads:
            t = dialect.storage_type(a.view.element_type)
            if self.contiguous(a):
                source = f"*reinterpret_cast<const og_v4<{t}>*>(&{self.point(a)})"
                lines.append(f"    const og_v4<{t}> x{a.name[1:]} = {source};")
                args.append(f"x{a.name[1:]}.v[e_]")
            else:
                lines.append(f"    const {t} x{a.name[1:]} = {self.point(a)};")
                args.append(f"x{a.name[1:]}")
        for a in stores:
            lines.append(f"    og_v4<{dialect.storage_type(a.view.element_type)}> y{a.name[1:]};")
            args.append(f"y{a.name[1:]}.v[e_]")
        lines += [
            "    #pragma unroll",
            f"    for (int e_ = 0; e_ < 4; ++e_) {self.name}_body({', '.join([*args, 'og_err'])});",
        ]
        for a in stores:
            t = dialect.storage_type(a.view.element_type)
            lines.append(f"    *reinterpret_cast<og_v4<{t}>*>(&{self.point(a)}) = y{a.name[1:]};")
        lines.append("  }")
        return lines

    # -------------------------------------------------------------------------- rows
    def row_kernel(self, block: int | None) -> str:
        """Block per row (``block`` threads) or, when ``block`` is None, thread per row."""
        reductions = [n for n in self.kernel.nodes if n.kind is KKind.REDUCE]
        phases = sorted({n.phase for n in reductions})
        body: list[str] = []
        if block is not None:
            rows = self.domain.static_rows
            body.append(f"  for ({self.index} r_ = blockIdx.x; r_ < {rows}; r_ += gridDim.x) {{")
        else:
            body.append(self.grid_loop("r_", self.domain.static_rows))
        body += self.row_offsets("r_", "    ")
        for phase in phases:
            body += self.reduction_phase([n for n in reductions if n.phase == phase], block)
        body += self.row_stores(block)
        if block is not None:
            body.append("    __syncthreads();  /* the next row reuses the shared memory */")
        body.append("  }")
        head = [self.header(), self.signature(block or self.block)]
        if block is not None:
            head += self.shared_declarations(reductions, block)
        return "\n".join([*head, *body, "}"])

    def shared_declarations(self, reductions: list[KNode], block: int) -> list[str]:
        warps = block // 32
        lines = ["  const int lane_ = threadIdx.x & 31, warp_ = threadIdx.x >> 5;"]
        lines.append("  (void)lane_; (void)warp_;")
        if warps == 1:
            return lines
        for r in reductions:
            lines.append(
                f"  __shared__ {dialect.compute_type(r.element_type)} s{r.index}[{warps}];"
            )
            if self.tracks_nan(r):
                lines.append(f"  __shared__ int m{r.index}[{warps}];")
        return lines

    def inner_loop(self, block: int | None) -> str:
        i_t, length = self.index, self.domain.static_length
        if block is None:
            return f"    for ({i_t} i_ = 0; i_ < {length}; ++i_) {{"
        return f"    for ({i_t} i_ = threadIdx.x; i_ < {length}; i_ += {block}) {{"

    def reduction_phase(self, reductions: list[KNode], block: int | None) -> list[str]:
        out: list[str] = []
        body_nodes = self.needed([n.args[0] for n in reductions], Level.FULL)
        self.define_outer_for(body_nodes, out)
        for r in reductions:
            ctype = dialect.compute_type(r.element_type)
            out.append(f"    {ctype} a{r.index} = {self.identity(r)};")
            if self.tracks_nan(r):
                out.append(f"    int n{r.index} = 0;")
        out.append(self.inner_loop(block))
        out += self.inner_coordinates("i_", "      ")
        for k in body_nodes:
            self.define(k, out, "      ")
        for r in reductions:
            x = self.var(r.args[0])
            out.append("      " + self.combine(r, f"a{r.index}", x))
            if self.tracks_nan(r):
                out.append(f"      n{r.index} |= ({x} != {x});")
        out.append("    }")
        self.forget_full()
        if block is not None:
            out += self.block_reduce(reductions, block)
        self.finish_reductions(reductions, out)
        return out

    def row_stores(self, block: int | None) -> list[str]:
        out: list[str] = []
        full = [
            (s, k) for s, (k, _) in enumerate(self.kernel.stores) if self._level(k) is Level.FULL
        ]
        if full:
            targets = [k for _, k in full]
            self.define_outer_for(self.needed(targets, Level.FULL), out)
            out.append(self.inner_loop(block))
            out += self.inner_coordinates("i_", "      ")
            for k in self.needed(targets, Level.FULL):
                self.define(k, out, "      ")
            for slot, k in full:
                out.append("      " + self.store_line(slot, k, Level.FULL))
            out.append("    }")
            self.forget_full()
        outer = [
            (s, k) for s, (k, _) in enumerate(self.kernel.stores) if self._level(k) is Level.OUTER
        ]
        if outer:
            for _, k in outer:
                for d in self.needed([k], Level.OUTER):
                    self.define(d, out, "    ")
            guard = "if (threadIdx.x == 0) " if block is not None else ""
            stores = " ".join(self.store_line(slot, k, Level.OUTER) for slot, k in outer)
            out.append(f"    {guard}{{ {stores} }}")
        return out

    def _level(self, k: int) -> Level:
        return self.kernel.nodes[k].level

    def store_line(self, slot: int, k: int, level: Level) -> str:
        view = self.kernel.stores[slot][1]
        access = self.accesses[(slot, True)]
        return f"{self.element(access, level)} = {dialect.store(view.element_type, self.var(k))};"

    def _butterfly(self, reductions: list[KNode], first: int) -> list[str]:
        """One warp's tree: lanes exchange accumulators at distances first, first/2, …, 1."""
        lines = [f"      for (int o_ = {first}; o_ > 0; o_ >>= 1) {{"]
        for r in reductions:
            ctype = dialect.compute_type(r.element_type)
            lines.append(f"        const {ctype} x{r.index}_ = og_shfl_xor(a{r.index}, o_);")
            lines.append("        " + self.combine(r, f"a{r.index}", f"x{r.index}_"))
            if self.tracks_nan(r):
                lines.append(f"        n{r.index} |= og_shfl_xor(n{r.index}, o_);")
        lines.append("      }")
        return lines

    def block_reduce(self, reductions: list[KNode], block: int) -> list[str]:
        """Combine the accumulators of a block's threads; every thread ends with the total."""
        warps = block // 32
        lines = ["    {", *self._butterfly(reductions, 16)]
        if warps > 1:
            saves = [f"s{r.index}[warp_] = a{r.index};" for r in reductions]
            saves += [f"m{r.index}[warp_] = n{r.index};" for r in reductions if self.tracks_nan(r)]
            lines += [f"      if (lane_ == 0) {{ {' '.join(saves)} }}", "      __syncthreads();"]
            lines.append("      if (warp_ == 0) {")
            for r in reductions:
                first = self.identity(r)
                lines.append(f"        a{r.index} = lane_ < {warps} ? s{r.index}[lane_] : {first};")
                if self.tracks_nan(r):
                    lines.append(f"        n{r.index} = lane_ < {warps} ? m{r.index}[lane_] : 0;")
            lines += ["  " + line for line in self._butterfly(reductions, warps // 2)]
            finals = [f"s{r.index}[0] = a{r.index};" for r in reductions]
            finals += [f"m{r.index}[0] = n{r.index};" for r in reductions if self.tracks_nan(r)]
            lines += [
                f"        if (lane_ == 0) {{ {' '.join(finals)} }}",
                "      }",
                "      __syncthreads();",
            ]
            loads = [f"a{r.index} = s{r.index}[0];" for r in reductions]
            loads += [f"n{r.index} = m{r.index}[0];" for r in reductions if self.tracks_nan(r)]
            lines.append(f"      {' '.join(loads)}")
        lines.append("    }")
        return lines
