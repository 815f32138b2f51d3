"""The one generator of in-register ``lanes`` x ``lanes`` f32 transposes (AVX-512: 16 x 16,
AVX2: 8 x 8), used by ``og_pw_ch``'s write-back (``codegen/pointwise_kernels.py``), the
attention's packing of ``k`` (``codegen/attention.py``) and ``og_cb_in`` / ``og_cb_out``
(``codegen/depthwise_blocked.py``: the channel-blocked depthwise and the bf16 Winograd's
rows).

The rows come in as C vectors ``{prefix}0_{r}`` (row ``r``; the caller declares and loads
them, masking short rows its own way) and go out as ``{prefix}{log2(lanes)}_{r}``
(:func:`transposed`): ``log2(lanes)`` stages, stage ``i`` exchanging between rows ``r`` and
``r ^ 2^i`` the lanes whose bit ``i`` differs from the row's (two-source shuffles: with
AVX-512 ``vshuff32x4`` for the two high bits, ``vshufps`` for bit 1, a permute or a masked
``vmovsldup`` / ``vmovshdup`` for bit 0; AVX2 has the 128-bit and ``vshufps`` forms too).
"""

from __future__ import annotations


def stages(lanes: int) -> int:
    """The stages of a ``lanes`` x ``lanes`` transpose (``log2(lanes)``)."""
    return lanes.bit_length() - 1


def loaded(prefix: str) -> str:
    """The prefix of the rows' names as the caller loads them (row ``r`` is ``{prefix}0_{r}``)."""
    return f"{prefix}0_"


def transposed(lanes: int, prefix: str) -> str:
    """The prefix of the transposed rows' names (row ``r`` is ``{prefix}{stages}_{r}``)."""
    return f"{prefix}{stages(lanes)}_"


def _stage(
    lanes: int, bit: int, src: str, dst: str, vec: str, index: str, indent: str
) -> list[str]:
    """One stage: rows ``r`` and ``r ^ bit`` exchange the lanes whose bit ``bit`` differs from
    the row's; ``vec`` and ``index`` the C vector types of the rows and of the shuffles'
    indices, ``indent`` each line's."""
    low = ", ".join(str(j if not j & bit else lanes + (j & ~bit)) for j in range(lanes))
    high = ", ".join(str(j | bit if not j & bit else lanes + j) for j in range(lanes))
    lines = []
    for r in range(lanes):
        if r & bit:
            pair = f"{src}{r & ~bit}, {src}{r}, ({index}){{{high}}}"
        else:
            pair = f"{src}{r}, {src}{r | bit}, ({index}){{{low}}}"
        lines.append(f"{indent}const {vec} {dst}{r} = __builtin_shuffle({pair});")
    return lines


def transpose(lanes: int, prefix: str, vec: str, index: str, indent: str) -> list[str]:
    """C lines transposing the ``lanes`` rows ``{prefix}0_{r}`` into
    ``{transposed(lanes, prefix)}{r}`` (see the module's description)."""
    return [
        line
        for i in range(stages(lanes))
        for line in _stage(lanes, 1 << i, f"{prefix}{i}_", f"{prefix}{i + 1}_", vec, index, indent)
    ]
