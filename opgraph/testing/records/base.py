"""The op record: one line of the numeric test table.

A record builds a small graph from parameters, names its inputs (shape, element type, value
domain) and the element types it runs on. The same table drives numerics on every backend ×
element type against the oracle, serialization round trips, and gradient checks.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.function import Function
from opgraph.core.literals import parameter
from opgraph.core.node import Output


@dataclass(frozen=True)
class In:
    """One input of a record.

    Attributes:
        shape: the input's shape.
        element_type: a fixed element type; None means the record's element type of the run.
        low, high: the range random values are drawn from (clipped to the type's range).
        values: fixed values instead of random ones (edge cases).
        nonzero: avoid zeros (divisors).
    """

    shape: tuple[int, ...]
    element_type: ElementType | None = None
    low: float = -3.0
    high: float = 3.0
    values: Any = None
    nonzero: bool = False


@dataclass(frozen=True)
class OpRecord:
    """One numeric test case. ``build(*params)`` returns the result value(s)."""

    name: str
    build: Callable[..., Output | Sequence[Output]]
    inputs: tuple[In, ...]
    element_types: tuple[ElementType, ...]
    rtol: float | None = None
    atol: float | None = None
    differentiable: bool = True  # False: skip the numeric gradient check (special values…)
    tags: frozenset[str] = field(default_factory=frozenset)

    def function(self, element_type: ElementType) -> Function:
        params = [
            parameter(i.element_type or element_type, i.shape, name=f"x{k}")
            for k, i in enumerate(self.inputs)
        ]
        results = self.build(*params)
        outputs = [results] if isinstance(results, Output) else list(results)
        return Function(outputs, params, name=f"{self.name}_{element_type.name}")

    def arguments(self, element_type: ElementType, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(zlib.crc32(f"{self.name}/{element_type.name}/{seed}".encode()))
        return [make_array(i, i.element_type or element_type, rng) for i in self.inputs]

    def tolerance(self, element_type: ElementType) -> tuple[float, float]:
        rtol, atol = DEFAULT_TOLERANCE.get(element_type.name, (0.0, 0.0))
        return (
            self.rtol if self.rtol is not None else rtol,
            self.atol if self.atol is not None else atol,
        )


DEFAULT_TOLERANCE = {
    "f16": (2e-2, 2e-2),
    "bf16": (4e-2, 4e-2),
    "f32": (2e-5, 1e-6),
    "f64": (1e-10, 1e-12),
}


def make_array(spec: In, element_type: ElementType, rng: np.random.Generator) -> np.ndarray:
    if spec.values is not None:
        return np.asarray(spec.values).astype(element_type.dtype).reshape(spec.shape)
    if element_type.is_boolean:
        return rng.random(spec.shape) < 0.5
    if element_type.is_real:
        values = rng.uniform(spec.low, spec.high, spec.shape)
        if spec.nonzero:
            values = np.where(np.abs(values) < 0.1, 0.5, values)
        return values.astype(element_type.dtype)
    info = np.iinfo(element_type.dtype)
    low = max(int(np.floor(spec.low)), int(info.min))
    high = min(int(np.ceil(spec.high)), int(info.max))
    integers = rng.integers(low, high + 1, spec.shape)
    if spec.nonzero:
        integers = np.where(integers == 0, 1, integers)
    return integers.astype(element_type.dtype)


# Element type groups records use.
FLOATS = et.FLOATS
NUMERIC = et.NUMERIC
SIGNED = et.FLOATS + et.SIGNED_INTS
ALL = et.ALL
BOOL = (et.boolean,)
