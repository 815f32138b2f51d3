"""A pointwise loop whose stored bytes are a 256-entry table lookup, done on bytes.

``fold_quantized_chains`` turns a requantizing chain into ``convert(gather(table,
convert(q, i32)), u8)`` with the table held as i32, so that GCC's loop vectorizer can use its
32-bit gathers (there are no byte gathers). A gather costs: 16 lanes a ``vpgatherdd``, and
only where GCC's tuning for the CPU allows gathers at all (``cpu/gather_tuning.py``). With
AVX-512 VBMI the same lookup is two ``vpermi2b`` over 128-byte halves and a blend on bit 7:
64 lookups in a few instructions.

So where a pointwise kernel's one store is such a lookup (:func:`find_byte_lookup`; u8 or i8
results), the C emitted under ``OG_LUT256`` (the target has VBMI: :data:`LUT256_HELPER`)
stores the index byte ``q`` in the vector loop, then looks the row's bytes up in place
(``og_lut256_u8``) from a byte copy of the table made once per call, each entry converted by
the same expression as the loop's (:meth:`ByteLookup.table_lines`). Other targets compile the
loop as before (``#else``). The stored bytes are the same: ``q``'s byte is the gather's
position (an i8 ``q`` wraps to it: -1 is 255), and the position is always in range.

A per-channel table (``fold_quantized_chains``: ``C`` rows of 256, the index ``q + 256 · c``)
is looked up the same way where the offset ``256 · c`` does not move along the row (a
convolution's epilogue over one channel's plane): per row, the row's 256 entries are
converted to bytes (``lut_``, kept while the offset stays), then the row's bytes are looked
up in place; a row whose 256 entries do not all lie in the table (never, from the pass) takes
the loop's own element-wise lookup with its range check instead. u8 ``q`` and u8 results only
(an i8 ``q``'s rows are ordered by value, not by byte; ``og_lut256_fill`` converts a row's
i32 entries to u8 16 at a time, saturating as Convert does).

The FFN 1 epilogue of the int8 BERT layer (128 x 3072: requantize, bias, requantize, GELU
table), extracted into a C harness on the Emerald Rapids guest: 465-473 us with the gathers
(``-mtune-ctrl=use_gather``), 316-326 us with the byte lookup, same checksum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from opgraph.backends.cpu.codegen.dialect import helper
from opgraph.backends.fused.loops import Access
from opgraph.backends.fused.program import KKind, KNode, Level
from opgraph.backends.fused.views import View
from opgraph.core import element_type as et
from opgraph.ops.conversion import Convert
from opgraph.ops.elementwise import Add

if TYPE_CHECKING:
    from opgraph.backends.cpu.codegen.loops import CLoopEmitter

__all__ = ["LUT256_HELPER", "ByteLookup", "find_byte_lookup"]

#: Entries of the table (one per byte value).
ENTRIES = 256
#: Index and result types: bytes (an index's byte is the gather's position).
_BYTES = (et.u8, et.i8)
#: Integer types the index is widened to before the gather.
_WIDE_INDICES = (et.i32, et.i64)

LUT256_HELPER = "lut256"


@helper(LUT256_HELPER)
def _lut256() -> str:
    return """#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
#define OG_LUT256 1
typedef unsigned char og_lut_v __attribute__((vector_size(64)));
typedef signed char og_lut_sv __attribute__((vector_size(64)));
typedef struct { og_lut_v t[4]; } og_lut256;
/* q[i] = table[q[i]] for n bytes: vpermi2b over each 128-byte half, a blend on bit 7 */
static inline void og_lut256_u8(uint8_t* q, long n, const og_lut256* l) {
  long i = 0;
  for (; i + 64 <= n; i += 64) {
    og_lut_v x;
    __builtin_memcpy(&x, q + i, 64);
    og_lut_v lo = __builtin_shuffle(l->t[0], l->t[1], x);
    og_lut_v hi = __builtin_shuffle(l->t[2], l->t[3], x);
    og_lut_v m = (og_lut_v)((og_lut_sv)x < 0);
    og_lut_v r = (lo & ~m) | (hi & m);
    __builtin_memcpy(q + i, &r, 64);
  }
  const uint8_t* b = (const uint8_t*)l;
  for (; i < n; ++i) q[i] = b[q[i]];
}
typedef int32_t og_lut_i32 __attribute__((vector_size(64)));
typedef uint8_t og_lut_u8x16 __attribute__((vector_size(16)));
/* l = the 256 i32 entries at t converted to u8 as Convert does (saturating), 16 at a time */
static inline void og_lut256_fill(og_lut256* l, const int32_t* t) {
  for (int k = 0; k < 16; ++k) {
    og_lut_i32 v;
    __builtin_memcpy(&v, t + 16 * k, 64);
    v &= ~(og_lut_i32)(v < 0);
    og_lut_i32 high = (og_lut_i32)(v > 255);
    v = (v & ~high) | (255 & high);
    og_lut_u8x16 b = __builtin_convertvector(v, og_lut_u8x16);
    __builtin_memcpy((uint8_t*)l + 16 * k, &b, 16);
  }
}
#else
#define OG_LUT256 0
#endif"""


@dataclass(frozen=True)
class ByteLookup:
    """A pointwise kernel's one store ``convert(gather(table, wide(q)), t)``, ``q`` and ``t``
    8-bit."""

    store: KNode  # the convert to the stored 8-bit type
    gather: KNode
    index: int  # the node of q
    table: Access
    offset: KNode | None = None  # a per-row table: the row's first entry (a row value)

    def table_lines(self, emitter: CLoopEmitter) -> list[str]:
        """Function-entry lines: ``lut_``, the table's entries converted to bytes (per row
        for a per-row table: declared here, filled by :meth:`row_table_lines`)."""
        if self.offset is not None:
            return ["#if OG_LUT256", "  og_lut256 lut_;", "  long lut_at_ = -1;", "#endif"]
        ctype = emitter.dialect.compute_type(self.gather.element_type)
        value = emitter.op_expr(self.store)
        return [
            "#if OG_LUT256",
            "  og_lut256 lut_;",
            f"  for (long j_ = 0; j_ < {ENTRIES}L; ++j_) {{",
            f"    const {ctype} {emitter.var(self.gather.index)} = {self.table.name}[j_];",
            f"    ((uint8_t*)&lut_)[j_] = (uint8_t)({value});",
            "  }",
            "#endif",
        ]

    def store_lines(self, emitter: CLoopEmitter, store: Access, indent: str) -> list[str]:
        """The vector loop's store: ``q``'s byte under ``OG_LUT256``, else the lookup."""
        target = emitter.element(store, Level.FULL)
        lookup = emitter.full_body([self.store.index], indent)
        value = emitter.dialect.store(self.store.element_type, emitter.var(self.store.index))
        byte = emitter.dialect.storage_type(self.store.element_type)
        return [
            "#if OG_LUT256",
            f"{indent}{target} = ({byte}){emitter.var(self.index)};",
            "#else",
            *lookup,
            f"{indent}{target} = {value};",
            "#endif",
        ]

    def row_table_lines(self, emitter: CLoopEmitter) -> list[str]:
        """Before a row's vector loop, for a per-row table: ``lut_ok_`` (the row's 256
        entries lie in the table) and ``lut_``, the row's entries as bytes (kept while the
        row's first entry ``lo_`` stays)."""
        if self.offset is None:
            return []
        size = self.gather.terms[0].size
        first = emitter.load_expr(self.offset)
        entries = f"{self.table.name} + o_{self.table.name} + lo_"
        return [
            "#if OG_LUT256",
            f"    const long lo_ = (long)({first});",
            f"    const int lut_ok_ = lo_ >= 0 && lo_ + {ENTRIES}L <= {size}L;",
            "    if (lut_ok_ && lo_ != lut_at_) {",
            "      lut_at_ = lo_;",
            f"      og_lut256_fill(&lut_, {entries});",
            "    }",
            "#endif",
        ]

    def row_lines(self, emitter: CLoopEmitter, store: Access, indent: str) -> list[str]:
        """After a row's vector loop (``[i_, i_ + n_)``): the lookup of its bytes (for a
        per-row table whose entries leave the table: the element-wise lookup, checked)."""
        row = f"(uint8_t*)({store.name} + o_{store.name} + i_)"
        if self.offset is None:
            return ["#if OG_LUT256", f"{indent}og_lut256_u8({row}, n_, &lut_);", "#endif"]
        return [
            "#if OG_LUT256",
            f"{indent}if (lut_ok_) og_lut256_u8({row}, n_, &lut_);",
            f"{indent}else",
            *self.checked_loop(emitter, store, indent),
            "#endif",
        ]

    def checked_loop(self, emitter: CLoopEmitter, store: Access, indent: str) -> list[str]:
        """The row's element-wise lookup from its stored index bytes: the loop's own nodes
        from ``q`` to the store (the gather's range check included)."""
        target = emitter.element(store, Level.FULL)
        saved = set(emitter.defined)
        emitter.forget_full()
        emitter.defined.add(self.index)
        q = emitter.dialect.compute_type(emitter.kernel.nodes[self.index].element_type)
        inner = indent + "    "
        body = emitter.full_body([self.store.index], inner)
        value = emitter.dialect.store(self.store.element_type, emitter.var(self.store.index))
        emitter.defined = saved
        return [
            f"{indent}  for (long l0 = i_; l0 < i_ + n_; ++l0) {{",
            f"{inner}const {q} {emitter.var(self.index)} = ({q}){target};",
            *body,
            f"{inner}{target} = {value};",
            f"{indent}  }}",
        ]


def find_byte_lookup(emitter: CLoopEmitter) -> ByteLookup | None:
    """The kernel's lookup when its one store is a contiguous 8-bit row of
    ``convert(gather(table, wide(q)), t)`` over a 256-entry table the whole loop shares
    (``q`` and ``t`` u8 or i8), else None."""
    kernel, domain = emitter.kernel, emitter.domain
    if len(kernel.stores) != 1 or len(domain.vector) != 1:
        return None
    k, view = kernel.stores[0]
    store = emitter.accesses[(0, True)]
    if view.element_type not in _BYTES or domain.vector[0].strides[store.name] != 1:
        return None
    node = kernel.nodes[emitter.source(k)]
    if not _converts(node, (view.element_type,)):
        return None
    gather = kernel.nodes[emitter.source(node.args[0])]
    table = _shared_table(emitter, gather)
    if table is None:
        return None
    wide = kernel.nodes[emitter.source(gather.args[0])]
    if gather.terms[0].size != ENTRIES:
        return _row_lookup(emitter, node, gather, wide, table)
    if not _converts(wide, _WIDE_INDICES):
        return None
    index = emitter.source(wide.args[0])
    if kernel.nodes[index].element_type not in _BYTES:
        return None
    return ByteLookup(node, gather, index, table)


def _row_lookup(
    emitter: CLoopEmitter, store: KNode, gather: KNode, add: KNode, table: Access
) -> ByteLookup | None:
    """The lookup of a per-row table: the gather's index ``wide(q) + offset``, ``q`` u8,
    ``offset`` an i32 load that does not move along the row; the i32 entries stored as u8
    (``og_lut256_fill`` converts them)."""
    if store.element_type is not et.u8:
        return None
    size = gather.terms[0].size
    if not isinstance(size, int) or size < ENTRIES:
        return None
    if add.kind is not KKind.OP or not isinstance(add.op, Add) or add.element_type is not et.i32:
        return None
    nodes = [emitter.kernel.nodes[emitter.source(a)] for a in add.args]
    for wide, offset in (nodes, nodes[::-1]):
        if not _converts(wide, (et.i32,)) or not _row_value(emitter, offset):
            continue
        index = emitter.source(wide.args[0])
        if emitter.kernel.nodes[index].element_type is et.u8:
            return ByteLookup(store, gather, index, table, offset)
    return None


def _row_value(emitter: CLoopEmitter, node: KNode) -> bool:
    """Whether ``node`` is an i32 load of a view that does not move along the row."""
    if node.kind is not KKind.LOAD or node.element_type is not et.i32:
        return False
    access = emitter.accesses.get((node.index, False))
    if access is None:
        return False
    return all(d.strides[access.name] == 0 for d in emitter.domain.vector)


def _converts(node: KNode, types: tuple[et.ElementType, ...]) -> bool:
    return (
        node.kind is KKind.OP
        and isinstance(node.op, Convert)
        and node.element_type in types
        and len(node.args) == 1
    )


def _shared_table(emitter: CLoopEmitter, gather: KNode) -> Access | None:
    """The access of ``gather``'s i32 table when it has 256 entries, one index of stride 1,
    and the same position for every row and lane."""
    if gather.kind is not KKind.GATHER or len(gather.terms) != 1:
        return None
    term = gather.terms[0]
    if not isinstance(gather.table, View) or gather.element_type is not et.i32:
        return None
    if gather.table.element_type is not et.i32 or term.stride != 1:
        return None
    if not isinstance(term.size, int) or term.size < ENTRIES:
        return None
    access = emitter.accesses[(gather.index, False)]
    dims = [*emitter.domain.rows, *emitter.domain.vector]
    if any(d.strides[access.name] != 0 for d in dims):
        return None
    return access
