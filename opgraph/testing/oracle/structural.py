"""Oracle entries for tuples and calls."""

from __future__ import annotations

from typing import Any

from opgraph.core.tensor_type import TupleType
from opgraph.ops import structural as st
from opgraph.testing.oracle.registry import ORACLE, evaluate


@ORACLE.register(st.Tuple)
def _tuple(op: st.Tuple, *values: Any, out: Any) -> tuple[Any, ...]:
    return values


@ORACLE.register(st.GetTupleElement)
def _get(op: st.GetTupleElement, value: tuple[Any, ...], out: Any) -> Any:
    return value[op.index]


@ORACLE.register(st.Call)
def _call(op: st.Call, *args: Any, out: Any) -> Any:

    # Evaluate the callee without flattening: results keep their tuple structure.
    fn = op.function
    flat = iter(evaluate(fn, list(args)))

    def rebuild(t: Any) -> Any:
        if isinstance(t, TupleType):
            return tuple(rebuild(e) for e in t.elements)
        return next(flat)

    results = tuple(rebuild(t) for t in fn.result_types)
    return results if len(results) > 1 else results[0]


@ORACLE.register(st.StopGradient)
def _stop_gradient(op: st.StopGradient, x: Any, out: Any) -> Any:
    return x
