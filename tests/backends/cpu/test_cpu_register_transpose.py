"""The one generator of in-register transposes (``codegen/register_transpose.py``): its lines,
run by a model of GCC's ``__builtin_shuffle``, transpose every ``lanes`` x ``lanes`` block."""

from __future__ import annotations

import re

import numpy as np
import pytest

from opgraph.backends.cpu.codegen.register_transpose import stages, transpose, transposed

LINE = re.compile(
    r"^(\s*)const (\w+) (\w+) = __builtin_shuffle\((\w+), (\w+), \((\w+)\)\{(.*)\}\);$"
)


def run(lines: list[str], rows: dict[str, np.ndarray], indent: str, vec: str, index: str):
    """The vectors ``lines`` define from ``rows``: lane ``j`` of a shuffle is lane ``i`` of
    the two sources concatenated, ``i`` the index's lane ``j``."""
    values = dict(rows)
    for line in lines:
        match = LINE.match(line)
        assert match, line
        space, v, dst, a, b, i, picks = match.groups()
        assert (space, v, i) == (indent, vec, index)
        assert dst not in values  # every stage defines new names
        both = np.concatenate([values[a], values[b]])
        values[dst] = both[[int(p) for p in picks.split(", ")]]
    return values


@pytest.mark.parametrize("lanes", [8, 16])
@pytest.mark.parametrize("prefix", ["m", "t"])
def test_the_lines_transpose_the_rows(lanes, prefix):
    block = np.arange(lanes * lanes).reshape(lanes, lanes)
    lines = transpose(lanes, prefix, "vt", "it", "    ")
    assert len(lines) == lanes * stages(lanes)
    values = run(lines, {f"{prefix}0_{r}": block[r] for r in range(lanes)}, "    ", "vt", "it")
    out = transposed(lanes, prefix)
    assert out == f"{prefix}{stages(lanes)}_"
    got = np.stack([values[f"{out}{r}"] for r in range(lanes)])
    np.testing.assert_array_equal(got, block.T)


def test_stages_are_the_lane_bits():
    assert [stages(lanes) for lanes in (4, 8, 16)] == [2, 3, 4]
