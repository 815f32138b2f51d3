"""Graphs and data shared by the 8-bit CPU tests (test_cpu_int8*.py)."""

import numpy as np

import opgraph as og
from opgraph import ops


def random_bytes(rng: np.random.Generator, t: og.ElementType, shape: tuple[int, ...]) -> np.ndarray:
    """Bytes of type ``t`` (u8 or i8) over its whole range."""
    info = np.iinfo(t.dtype)
    return rng.integers(int(info.min), int(info.max) + 1, shape).astype(t.dtype)


def conv_integer_graph(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    o: int,
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    padding: tuple[int, ...],
    dilations: tuple[int, ...],
    groups: int,
    t: og.ElementType,
    zero: int,
    padding_end: tuple[int, ...] | None = None,
) -> tuple[og.Function, np.ndarray]:
    """A ``conv_integer`` with ``o`` output channels of random i8 weights (zero point 0) on
    an input of ``shape`` (N, C, spatial...) and type ``t`` with zero point ``zero``, padded by
    ``padding`` before and ``padding_end`` (default: ``padding``) after; and random input
    data (drawn after the weights)."""
    x = og.parameter(t, shape)
    weights = random_bytes(rng, og.i8, (o, shape[1] // groups, *kernel))
    y = ops.conv_integer(
        x, og.constant(weights), og.constant(np.array(zero, t.dtype)),
        og.constant(np.zeros(o, np.int8)), strides, dilations, padding,
        padding if padding_end is None else padding_end, groups,
    )  # fmt: skip
    return og.Function([y], [x]), random_bytes(rng, t, shape)
