"""Type rules do bounded work whatever the attributes: a huge padding or dilation (as a mutated
file can hold) is checked in closed form, never by looping over the windows.

Found by the structural fuzzer of ``test_serialize_fuzz.py`` (seeds 3858, 4803, 29453 and 29585
at ten times the CI count): pooling's all-padding check walked every tap of every window, so
``og.deserialize`` of a pool with ``padding_above = 2**63`` never returned. The timeout is
only a backstop that turns a hang into a failure; nothing here is timed.
"""

from __future__ import annotations

import io
import itertools
import json
import zipfile

import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.errors import OpTypeError, SerializationError
from opgraph.ops.pooling import _first_empty_window

pytestmark = pytest.mark.timeout(120)

HUGE = 2**63


def brute_first_empty(out: int, d: int, f: int, stride: int, dilation: int, pb: int) -> int:
    """The first window with no tap on the data ``[pb, pb + d)``, tap by tap."""
    for o in range(out):
        if not any(pb <= o * stride + j * dilation < pb + d for j in range(f)):
            return o
    return -1


def test_closed_form_matches_the_tap_by_tap_walk():
    grid = itertools.product(range(6), range(1, 5), range(1, 6), range(1, 8), range(9), range(14))
    for d, f, stride, dilation, pb, out in grid:
        expected = brute_first_empty(out, d, f, stride, dilation, pb)
        got = _first_empty_window(out, d, f, stride, dilation, pb)
        assert got == expected, (out, d, f, stride, dilation, pb)


def p(shape):
    return og.parameter(og.f32, shape)


@pytest.mark.parametrize(
    ("build", "window"),
    [
        # windows 3.. start in the padding above
        (lambda: ops.max_pool(p((1, 1, 3)), (2,), (1,), (0,), (HUGE,)), 3),
        (lambda: ops.avg_pool(p((1, 1, 3, 2)), (2, 1), None, (0, 0), (HUGE, 0)), 3),
        # taps 2**62 apart step over the 3 data elements from window 3 on
        (lambda: ops.max_pool(p((1, 1, 3)), (2,), None, (2**62,), (2**62,), (2**62,)), 3),
        # the first window ends before the data
        (lambda: ops.max_pool_with_indices(p((1, 1, 3)), (3,), (2**62,), (2**62,), (2**62,)), 0),
    ],
)
def test_huge_padding_or_dilation_is_refused_in_closed_form(build, window):
    with pytest.raises(OpTypeError, match=f"window {window} lies entirely in the padding"):
        build()


def test_huge_dilation_whose_taps_reach_the_data_is_accepted():
    y = ops.max_pool(p((1, 1, 3)), (2,), None, (2**62,), (0,), (2**62,))
    assert y.shape == (1, 1, 3)


def test_deserialize_of_a_pool_with_huge_padding_returns():
    x = p((1, 1, 3, 3))
    fn = og.Function([ops.max_pool(x, (2, 2), (2, 2))], [x])
    with zipfile.ZipFile(io.BytesIO(og.serialize(fn))) as z:
        members = {name: z.read(name) for name in z.namelist()}
    doc = json.loads(members["graph.json"])
    text = json.dumps(doc)
    assert '"padding_above": [0, 0]' in text
    members["graph.json"] = text.replace(
        '"padding_above": [0, 0]', f'"padding_above": [{HUGE}, 0]'
    ).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    with pytest.raises(SerializationError, match="lies entirely in the padding"):
        og.deserialize(buffer.getvalue())
