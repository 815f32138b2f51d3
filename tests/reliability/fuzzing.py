"""Helpers the fuzzers share: random arguments for a loaded Function, and whether it is small
enough to run on every case."""

from __future__ import annotations

import numpy as np

import opgraph as og
from opgraph.core.shape import is_static
from opgraph.core.tensor_type import TensorType


def random_inputs(fn: og.Function, rng: np.random.Generator) -> list[np.ndarray]:
    """Seeded arguments for ``fn``: booleans, small integers, floats in [-3, 3)."""
    arrays = []
    for t in fn.parameter_types:
        assert isinstance(t, TensorType)
        dtype = t.element_type.dtype
        if t.element_type.is_boolean:
            arrays.append(rng.integers(0, 2, t.shape).astype(dtype))
        elif t.element_type.is_integral:
            arrays.append(rng.integers(0, 4, t.shape).astype(dtype))
        else:
            arrays.append(rng.uniform(-3, 3, t.shape).astype(dtype))
    return arrays


def small(fn: og.Function, limit: int) -> bool:
    """Whether every value of ``fn`` is static and all of them hold at most ``limit`` elements
    (a symbolic Function is compiled, not run: there is no binding to pick)."""
    total = 0
    for node in fn.nodes:
        for t in node.output_types:
            if not isinstance(t, TensorType) or not is_static(t.shape):
                return False
            total += int(np.prod(t.shape, dtype=object))
    return total <= limit
