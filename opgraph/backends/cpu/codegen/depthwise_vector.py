"""Register-blocked tap loops of the direct (depthwise) convolution kernel
(``codegen/depthwise.py``), written with GCC vector types instead of ``omp simd`` loops.

The ``omp simd`` form of a one-pass tap loop (``y[j] = f0 * s[j + o0] + f1 * s[j + o1] + ...``
for each output row of a group) compiled badly for large filters: GCC kept one pointer per
tap and one broadcast weight per tap live across the loop, spilled both (a 7x7 filter, two
rows: about 100 pointers and 49 vectors on the stack, a scalar reload before each
multiply-add), and summed each row's taps in one chain of dependent multiply-adds (49 x 4
cycles of latency per vector). Here each vector of outputs is one block of straight-line
code: every distinct input offset is loaded once from one base pointer (``base + j +
offset``: a constant displacement) and feeds the multiply-adds of every output row that reads
it; each output row sums into a few independent accumulators (:func:`chains`), added
pairwise at the end. The weights stay scalars (GCC broadcasts them from memory).

Without AVX-512 (16 registers) the block goes weight by weight instead (:func:`_by_weight`):
each weight broadcast once for the accumulators that use it, each input vector loaded where
it is used; the order of the loaded vectors kept every weight's broadcast live and GCC
spilled them with the accumulators (AVX2 build, one thread, Zen 5: 5x5 120ch 28x28 96 -> 74
µs, 7x7 96ch 56x56 590 -> 410 µs). Each accumulator sums its terms in another order than the
AVX-512 form's: the two builds agree to rounding, not bitwise.

Vectors are 16 lanes with AVX-512, 8 with AVX, 4 otherwise (``OG_DW_LANES``); a span whose
length is not a multiple of the lanes ends with one vector over its last lanes (the same
values again), so spans must be at least one vector long.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opgraph.backends.cpu.codegen import dialect

#: Accumulators of one vector of outputs (all rows together) at most: enough independent
#: multiply-adds to hide their latency, few enough to stay in registers with the loads.
ACCUMULATORS = 12
#: Terms per accumulator at least (shorter chains only add registers and final adds).
CHAIN_TERMS = 3


@dataclass(frozen=True)
class TapOutput:
    """One output of a vector tap loop: where it is stored (a pointer expression, indexed by
    the loop index) and its terms (weight expression, offset of the input row from the base
    pointer, column shift within that row)."""

    dest: str
    terms: tuple[tuple[str, int, int], ...]


def chains(terms: int, outputs: int) -> int:
    """Independent accumulators per output for ``terms`` terms each and ``outputs``
    outputs."""
    return max(1, min(-(-terms // CHAIN_TERMS), ACCUMULATORS // max(1, outputs)))


def tap_block(index: str, base: str, outputs: Sequence[TapOutput]) -> list[str]:
    """Straight-line C computing one vector of every output at loop index ``index``:
    ``dest[index + l] = sum(w * base[index + offset + l])`` for the lanes ``l``; with
    AVX-512 by loaded input vector (:func:`_by_vector`), else by weight
    (:func:`_by_weight`)."""
    count = [chains(len(o.terms), len(outputs)) for o in outputs]
    terms = [
        Term(k, t * count[k] // len(out.terms), weight, row, shift)
        for k, out in enumerate(outputs)
        for t, (weight, row, shift) in enumerate(out.terms)
    ]
    names = [f"a{k}_{c}" for k in range(len(outputs)) for c in range(count[k])]
    lines = [
        f"const float* p_ = {base} + {index};",
        f"og_dwv {', '.join(names)};",
        "#if defined(__AVX512F__)",
        *_by_vector(terms),
        "#else",
        *_by_weight(terms),
        "#endif",
    ]
    for k, out in enumerate(outputs):
        total = _pairwise([f"a{k}_{c}" for c in range(count[k])])
        lines += [
            f"{{ og_dwv s_ = {total};",
            f"  __builtin_memcpy({out.dest} + {index}, &s_, sizeof s_); }}",
        ]
    return lines


@dataclass(frozen=True)
class Term:
    """A multiply-add of a tap block: output ``k``'s accumulator ``c`` adds ``weight`` times
    the input vector at ``p_ + row + shift``."""

    k: int
    c: int
    weight: str
    row: int
    shift: int


def _by_vector(terms: list[Term]) -> list[str]:
    """The multiply-adds in the order of the input vectors they read: each phase row loaded
    once as a pair of vectors, each column shift made of it once (a permute) and multiplied
    into every accumulator that reads it."""
    by_row: dict[int, dict[int, list[Term]]] = {}
    for term in terms:
        by_row.setdefault(term.row, {}).setdefault(term.shift, []).append(term)
    lines: list[str] = []
    started: set[tuple[int, int]] = set()
    for r, row in enumerate(sorted(by_row)):
        lines.append(f"og_dwv l{r}_, h{r}_;")
        lines.append(f"__builtin_memcpy(&l{r}_, p_ + {row}L, sizeof l{r}_);")
        lines.append(f"__builtin_memcpy(&h{r}_, p_ + {row}L + OG_DW_LANES, sizeof h{r}_);")
        for shift, uses in sorted(by_row[row].items()):
            lines.append(f"{{ const og_dwv v_ = og_dw_shift(l{r}_, h{r}_, p_ + {row}L, {shift});")
            lines += ["  " + line for line in _updates(uses, started, "{weight} * v_")]
            lines.append("}")
    return lines


def _by_weight(terms: list[Term]) -> list[str]:
    """The multiply-adds in the order of the weights: each weight broadcast once and
    multiplied into every accumulator that uses it, the input vectors loaded where they are
    used (AVX2: by weight, a weight's broadcast is live for a few multiply-adds; by input
    vector, GCC kept all of a 5x5 filter's 25 broadcasts live with the 12 accumulators in
    16 registers and spilled them)."""
    by_weight: dict[str, list[Term]] = {}
    for term in terms:
        by_weight.setdefault(term.weight, []).append(term)
    lines: list[str] = []
    started: set[tuple[int, int]] = set()
    for weight, uses in by_weight.items():
        lines.append(f"{{ const float wv_ = {weight};")
        product = "wv_ * og_dw_load(p_ + {at}L)"
        lines += ["  " + line for line in _updates(uses, started, product)]
        lines.append("}")
    return lines


def _updates(uses: list[Term], started: set[tuple[int, int]], product: str) -> list[str]:
    """The multiply-adds of ``uses`` into accumulators ``a<k>_<c>`` (declared by their
    first use); ``product`` formatted with a term's ``weight`` and input offset ``at``."""
    lines = []
    for use in uses:
        k, c = use.k, use.c
        term = product.format(weight=use.weight, at=use.row + use.shift)
        if (k, c) in started:
            lines.append(f"a{k}_{c} += {term};")
        else:
            started.add((k, c))
            lines.append(f"a{k}_{c} = {term};")
    return lines


def _pairwise(names: list[str]) -> str:
    while len(names) > 1:
        names = [
            f"({names[i]} + {names[i + 1]})" if i + 1 < len(names) else names[i]
            for i in range(0, len(names), 2)
        ]
    return names[0]


def span_loop(index: str, lo: str, hi: str, block: list[str], whole: bool) -> list[str]:
    """``block`` for every vector of ``[lo, hi)``; ``whole``: the span is a multiple of the
    lanes, else its last vector is moved back to end at ``hi`` (the span must be at least
    one vector long)."""
    step = "OG_DW_LANES"
    head = f"for (long i_ = {lo}; i_ < {hi}; i_ += {step}) {{"
    at = "i_" if whole else f"(i_ + {step} <= {hi} ? i_ : {hi} - {step})"
    return [head, f"  const long {index} = {at};", *["  " + line for line in block], "}"]


@dialect.helper("dw_vector")
def _dw_vector() -> str:
    shuffles = "\n".join(
        f"    case {c}: return __builtin_shuffle(l, h, (og_dwi){{"
        + ", ".join(str(c + i) for i in range(16))
        + "});"
        for c in range(1, 16)
    )
    return f"""#if defined(__AVX512F__)
#define OG_DW_LANES 16L
#elif defined(__AVX__)
#define OG_DW_LANES 8L
#else
#define OG_DW_LANES 4L
#endif
typedef float og_dwv __attribute__((vector_size(OG_DW_LANES * 4)));
typedef int og_dwi __attribute__((vector_size(OG_DW_LANES * 4)));
static inline __attribute__((always_inline)) og_dwv og_dw_load(const float* p) {{
  og_dwv v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}}
/* The vector at p + c, where l and h are the vectors at p and p + OG_DW_LANES: with
   AVX-512 one two-source permute of the loaded pair (unaligned loads at every column shift
   made the 7x7 tap loops bound by their cache-line-split loads), else a load. */
static inline __attribute__((always_inline)) og_dwv og_dw_shift(
    og_dwv l, og_dwv h, const float* p, int c) {{
#if defined(__AVX512F__)
  switch (c) {{
    case 0: return l;
{shuffles}
  }}
#endif
  return og_dw_load(p + c);
}}"""
