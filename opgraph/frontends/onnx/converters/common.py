"""Helpers converters share."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from opgraph.builders.broadcasting import numpy_broadcast
from opgraph.core.element_type import ElementType
from opgraph.core.literals import constant
from opgraph.core.node import Output


def broadcast_all(*values: Output) -> tuple[Output, ...]:
    """ONNX multidirectional (NumPy) broadcasting, made explicit."""
    return numpy_broadcast(*values)


def axes_list(axes: Sequence[int] | np.ndarray | None, rank: int) -> list[int]:
    """Normalised non-negative axes."""
    if axes is None:
        return []
    return [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]


def typed_constant(value: object, element_type: ElementType) -> Output:
    return constant(np.asarray(value).astype(element_type.dtype), element_type)
