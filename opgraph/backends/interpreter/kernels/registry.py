"""The interpreter's kernel registry, keyed by op class: core's reference-kernel registry, which
constant folding reads too (``opgraph.core.kernels``), and helpers the kernels share."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.core.element_type import ElementType
from opgraph.core.kernels import REFERENCE_KERNELS, Kernel

#: The kernels register here; folding and the CPU/GPU fallbacks look them up here.
KERNELS = REFERENCE_KERNELS

__all__ = ["KERNELS", "Kernel", "accumulator", "highest", "is_float", "lowest"]


def accumulator(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype reductions and contractions accumulate in: f32 for the 16-bit floats."""
    return np.dtype(np.float32) if is_float(dtype) and dtype.itemsize < 4 else dtype


def is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def lowest(et: ElementType) -> Any:
    return -np.inf if et.is_real else (False if et.is_boolean else np.iinfo(et.dtype).min)


def highest(et: ElementType) -> Any:
    return np.inf if et.is_real else (True if et.is_boolean else np.iinfo(et.dtype).max)
