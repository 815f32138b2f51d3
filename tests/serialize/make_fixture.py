"""Write ``data/v1_small.opgraph`` / ``.txt`` (format version 1, a static graph) and
``data/v2_symbolic.opgraph`` / ``.txt`` (format version 2, symbolic dimensions): files pinned in
the repository, so a change that stops old files from loading fails ``test_compat.py``.

Run once per format version (``python tests/serialize/make_fixture.py``; it writes only the
fixtures that are missing) and commit the files; never regenerate an existing version's
fixture to make a test pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.core.literals import Constant
from opgraph.serialize import save
from opgraph.serialize.schema import FORMAT_VERSION, STATIC_FORMAT_VERSION

DATA = Path(__file__).resolve().parent / "data"


def fixed(op: og.Op, *inputs: og.Output, name: str | None = None, line: int = 0) -> og.Output:
    """A node with a stable provenance (the file must not depend on this script's layout)."""
    return op.build(*inputs, name=name, provenance=f"v1_small.py:{line}").outputs[0]


def build() -> og.Function:
    """A small graph touching every part of the format: names, constants of several types
    (empty, bf16, boolean), int-tuple, bool, None-able and element-type attributes, tuples, a
    call, and results that reuse values."""
    x = fixed(ops.Parameter(og.f32, (4,)), name="x", line=1)
    inner = og.Function([fixed(ops.Relu(), x, line=2)], [x], name="inner")
    a = fixed(ops.Parameter(og.f32, (2, 3)), name="a", line=3)
    b = fixed(ops.Parameter(og.i32, (2, 3)), name="b", line=4)
    unused = fixed(ops.Parameter(og.f16, ()), name="unused", line=5)
    weights = fixed(
        ops.Constant(og.f32, (3, 2), np.arange(6, dtype=np.float32).reshape(3, 2) / 4), line=6
    )
    halves = fixed(Constant(og.bf16, (2,), np.array([0.5, -2.0]).astype(og.bf16.dtype)), line=7)
    mask = fixed(ops.Constant(og.boolean, (2, 3), np.eye(2, 3, dtype=bool)), line=8)
    empty = fixed(ops.Constant(og.f32, (0, 3), np.zeros((0, 3), np.float32)), line=9)
    divisor = fixed(ops.Constant(og.i32, (2, 3), np.full((2, 3), 3, np.int32)), line=10)
    product = fixed(ops.Dot(), a, weights, name="product", line=11)
    quotient = fixed(ops.Div(floor_division=False), b, divisor, line=12)
    as_float = fixed(ops.Convert(og.f32), quotient, line=13)
    chosen = fixed(ops.Select(), mask, a, as_float, line=14)
    stacked = fixed(ops.Concat(0), chosen, empty, chosen, line=15)
    turned = fixed(ops.Reshape((3, 4), (1, 0)), stacked, line=16)
    strided = fixed(ops.Slice((0, 0), (3, 4), (2, 3)), turned, line=17)
    summed = fixed(ops.ReduceSum((1,), keep_dims=True), strided, line=18)
    wide = fixed(ops.Broadcast((2, 2), (0,)), fixed(ops.Convert(og.f32), halves, line=19), line=20)
    flat = fixed(ops.Reshape((4,)), fixed(ops.Add(), product, wide, line=21), line=22)
    called = ops.Call(inner).build(flat, provenance="v1_small.py:23").outputs[0]
    pair = fixed(ops.Tuple(), called, summed, name="pair", line=24)
    first = fixed(ops.GetTupleElement(0), pair, line=25)
    return og.Function([first, pair, summed, a], [a, b, unused], name="v1_small")


ARGUMENTS = [
    np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
    np.array([[-7, 7, 8], [-9, 1, 0]], dtype=np.int32),
    np.array(1.5, dtype=np.float16),
]


def build_symbolic() -> og.Function:
    """A symbolic graph: bounded and unbounded symbols in parameter shapes, a symbolic
    reshape attribute, concat and slice sizes that are expressions, a convolution window."""
    batch, seq = og.dim("batch"), og.dim("seq", min=1, max=64)
    x = fixed(ops.Parameter(og.f32, (batch, seq, 4)), name="x", line=1)
    flat = fixed(ops.Reshape((batch, seq * 4)), x, line=2)
    joined = fixed(ops.Concat(1), flat, flat, line=3)
    tail = fixed(ops.Slice((0, 1), (batch, seq * 8), (1, 3)), joined, line=4)
    image = fixed(ops.Reshape((batch, 1, seq, 4)), x, line=5)
    kernel = fixed(ops.Constant(og.f32, (2, 1, 2, 2), np.ones((2, 1, 2, 2), np.float32)), line=6)
    made = ops.convolution(image, kernel, strides=(2, 1), padding_below=(1, 0))
    conv = fixed(made.node.op, image, kernel, line=7)  # the op, with a stable provenance
    return og.Function([tail, conv], [x], name="v2_symbolic")


SYMBOLIC_BINDINGS = ({"batch": 2, "seq": 3}, {"batch": 1, "seq": 8})


def main() -> None:
    assert STATIC_FORMAT_VERSION == 1, "write a new fixture file for a new format version"
    assert FORMAT_VERSION == 2, "write a new fixture file for a new format version"
    DATA.mkdir(exist_ok=True)
    for name, fn in (("v1_small", build()), ("v2_symbolic", build_symbolic())):
        if (DATA / f"{name}.opgraph").exists():
            continue
        save(fn, DATA / f"{name}.opgraph")
        (DATA / f"{name}.txt").write_text(str(fn) + "\n")
        print(f"wrote {DATA / name}.opgraph")


if __name__ == "__main__":
    main()
