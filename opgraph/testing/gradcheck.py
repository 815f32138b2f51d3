"""Numeric gradient checks: symbolic backprop against central differences in f64."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from opgraph.autodiff import backprop
from opgraph.core import element_type as et
from opgraph.core.function import Function
from opgraph.core.tensor_type import TensorType
from opgraph.runtime.backend import backend
from opgraph.testing.records.base import OpRecord


def applicable(record: OpRecord) -> bool:
    """True when the record's f64 graph has a float input and only f64 float values: central
    differences through f16/bf16/f32 or integer-valued results are meaningless."""
    if not record.differentiable or et.f64 not in record.element_types:
        return False
    fn = record.function(et.f64)
    if not any(p.element_type is et.f64 for p in fn.parameters):
        return False
    for node in fn.nodes:
        for t in node.output_types:
            if (
                isinstance(t, TensorType)
                and t.element_type.is_real
                and t.element_type is not et.f64
            ):
                return False
    return any(t.element_type is et.f64 for t in fn.flat_result_types)


def check_gradients(
    fn: Function,
    arguments: Sequence[np.ndarray],
    step: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    """Assert that ``backprop(fn)`` matches central differences for every f64 parameter.

    Random seeds weight each f64 result, so the checked quantity is ``Σ seed·result``.
    """

    interpreter = backend("INTERPRETER")
    rng = np.random.default_rng(seed)
    float_results = [r.element_type is et.f64 for r in fn.flat_result_types]
    seeds = [
        rng.standard_normal(t.shape) if f else None
        for t, f in zip(fn.flat_result_types, float_results, strict=True)
    ]
    wrt = [p for p in fn.parameters if p.element_type is et.f64]
    grad_fn = backprop(fn, wrt=wrt, seed=seeds)
    outputs = interpreter.compile(grad_fn)(*arguments)
    symbolic = outputs[len(fn.flat_result_types) :]
    forward = interpreter.compile(fn)

    def objective(args: list[np.ndarray]) -> float:
        values = forward(*args)
        return float(
            sum(np.sum(v * s) for v, s in zip(values, seeds, strict=True) if s is not None)
        )

    positions = [i for i, p in enumerate(fn.parameters) if p.element_type is et.f64]
    for k, index in enumerate(positions):
        numeric = _central_difference(objective, list(arguments), index, step)
        np.testing.assert_allclose(
            symbolic[k],
            numeric,
            rtol=rtol,
            atol=atol,
            err_msg=f"gradient of {fn.name} w.r.t. parameter {index}",
        )


def _central_difference(
    objective: Callable[[list[np.ndarray]], float], args: list[np.ndarray], index: int, step: float
) -> np.ndarray:
    base = args[index]
    grad = np.zeros_like(base)
    for position in np.ndindex(*base.shape):
        plus = base.copy()
        plus[position] += step
        minus = base.copy()
        minus[position] -= step
        args[index] = plus
        high = objective(args)
        args[index] = minus
        low = objective(args)
        grad[position] = (high - low) / (2 * step)
    args[index] = base
    return grad
