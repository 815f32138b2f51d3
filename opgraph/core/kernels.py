"""The reference kernels' registry: each op's value on numpy arrays, keyed by op class.

Core defines it so that passes can evaluate ops (constant folding) without importing a
backend; the INTERPRETER backend fills it when it is imported (its ``KERNELS`` is this
registry), and ``import opgraph`` imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opgraph.core.registry import Registry

#: ``kernel(op, *input_arrays) -> array | tuple of arrays``. Each kernel must return exactly the
#: inferred element type and shape; the interpreter checks.
Kernel = Callable[..., Any]

REFERENCE_KERNELS: Registry[type, Kernel] = Registry("reference kernel")
