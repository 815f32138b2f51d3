"""The interpreter's kernel registry, keyed by op class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.core.element_type import ElementType
from opgraph.core.registry import Registry

#: ``kernel(op, *input_arrays) -> array | tuple of arrays``. Each kernel must return exactly the
#: inferred element type and shape; the interpreter checks.
Kernel = Callable[..., Any]
KERNELS: Registry[type, Kernel] = Registry("interpreter kernel")


def accumulator(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype reductions and contractions accumulate in: f32 for the 16-bit floats."""
    return np.dtype(np.float32) if is_float(dtype) and dtype.itemsize < 4 else dtype


def is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def lowest(et: ElementType) -> Any:
    return -np.inf if et.is_real else (False if et.is_boolean else np.iinfo(et.dtype).min)


def highest(et: ElementType) -> Any:
    return np.inf if et.is_real else (True if et.is_boolean else np.iinfo(et.dtype).max)
