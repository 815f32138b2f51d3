"""The reference kernel of the ops whose shape-like arguments are run-time tensors
(``ops/shape_tensors.py``): each node runs its *static form*, the op rebuilt with those
arguments' values as Constants, compiled on INTERPRETER once per distinct values and input
shapes (a small cache). A static type rule that rejects the values (a reshape to another
element count) raises there, and the interpreter reports it naming the node."""

from __future__ import annotations

from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.core.element_type import from_dtype
from opgraph.core.function import Function
from opgraph.core.literals import constant, parameter
from opgraph.core.node import Output
from opgraph.core.op import OP_REGISTRY
from opgraph.ops import shape_tensors as st
from opgraph.runtime.cache import LruCache

#: Compiled static forms kept per process (least recently used dropped first).
CACHE_SIZE = 64
_CACHE: LruCache[tuple[Any, ...], Any] = LruCache(CACHE_SIZE)


def run_static_form(op: st.ShapeTensorOp, *arrays: np.ndarray) -> Any:
    """``op`` on ``arrays``: its static form for these values and shapes, run."""
    arrays = tuple(np.asarray(a) for a in arrays)
    values = set(op.value_inputs)
    key = (
        type(op),
        op.static_key(),
        tuple(
            (i, a.dtype.str, a.shape, a.tobytes() if i in values else b"")
            for i, a in enumerate(arrays)
        ),
    )
    exe = _CACHE.get_or_make(key, lambda: _compile(op, arrays, values))
    data = [a for i, a in enumerate(arrays) if i not in values]
    results = exe(*data)
    return tuple(results) if op.multi_output else results[0]


def _compile(op: st.ShapeTensorOp, arrays: tuple[np.ndarray, ...], values: set[int]) -> Any:
    # A cycle: the interpreter backend imports these kernels; it registers itself there.
    from opgraph.runtime.backend import backend

    inputs: list[Output] = []
    params = []
    for i, a in enumerate(arrays):
        element_type = from_dtype(a.dtype)
        if i in values:
            inputs.append(constant(a, element_type))
        else:
            p = parameter(element_type, a.shape)
            params.append(p)
            inputs.append(p)
    built = op.static(*inputs)
    results = list(built) if isinstance(built, tuple) else [built]
    return backend("INTERPRETER").compile(Function(results, params, name=f"{op.name}_static"))


for _name in st.__all__:
    _cls = getattr(st, _name)
    if isinstance(_cls, type) and issubclass(_cls, st.ShapeTensorOp) and _name in OP_REGISTRY:
        KERNELS.add(_cls, run_static_form)
