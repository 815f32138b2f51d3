"""The oracle registry and the graph walker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.core.function import Function
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Output
from opgraph.core.registry import Registry
from opgraph.core.tensor_type import TensorType

#: ``entry(op, *inputs, out=<output types>) -> value | tuple of values``
ORACLE: Registry[type, Callable[..., Any]] = Registry("oracle entry")


def evaluate(fn: Function, arguments: Sequence[Any]) -> list[np.ndarray]:
    """Evaluate ``fn`` on numpy ``arguments``; tuple results are flattened in order."""
    env: dict[Output, Any] = dict(zip(fn.parameters, arguments, strict=True))
    with np.errstate(all="ignore"):
        for node in fn.nodes:
            if isinstance(node.op, Parameter):
                continue
            if isinstance(node.op, Constant):
                env[node.outputs[0]] = node.op.value
                continue
            raw = ORACLE[type(node.op)](
                node.op, *[env[i] for i in node.inputs], out=node.output_types
            )
            values = raw if len(node.outputs) > 1 else (raw,)
            env.update(zip(node.outputs, values, strict=True))
    return _flatten([env[r] for r in fn.results], fn.flat_result_types)


def _flatten(values: list[Any], types: tuple[TensorType, ...]) -> list[np.ndarray]:
    flat: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, tuple):
            for item in v:
                walk(item)
        else:
            flat.append(v)

    for v in values:
        walk(v)
    return [np.asarray(v).astype(t.element_type.dtype) for v, t in zip(flat, types, strict=True)]


def wide(x: np.ndarray) -> np.ndarray:
    """``x`` widened for exact-ish reference arithmetic: f64, i64 or u64."""
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":
        return x.astype(np.float64)
    if x.dtype.kind == "i":
        return x.astype(np.int64)
    if x.dtype.kind == "u":
        return x.astype(np.uint64)
    return x


def narrow(x: Any, out: Sequence[Any], index: int = 0) -> np.ndarray:
    """Cast a wide result back to the type the node declares (integers wrap)."""
    t = out[index]
    return np.asarray(x).astype(t.element_type.dtype)
