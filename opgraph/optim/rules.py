"""Optimizer update rules as graphs: each builder emits the update subgraph from ordinary ops.

The builders take the current parameters, their gradients and the optimizer state as graph
values and return the new values, so one Function can compute the loss, its gradients and the
update in a single call. Hyperparameters are Python floats (they become constants) or scalar
graph values (a Parameter for a learning-rate schedule, say); a scalar value of another element
type is converted explicitly to each parameter's element type.
"""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.core.errors import OpTypeError
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.ops.conversion import convert
from opgraph.ops.elementwise import add, divide, multiply, power, sqrt, subtract
from opgraph.ops.movement import broadcast

Hyper = float | Output
"""A hyperparameter: a Python number (a Constant) or a scalar graph value."""


def _scalar(value: Hyper, like: Output, what: str) -> Output:
    """``value`` as a scalar of ``like``'s element type (not broadcast)."""
    if not isinstance(value, Output):
        return constant(float(value), like.element_type)
    if value.shape != ():
        raise OpTypeError(f"optimizer: {what} must be a scalar, got {value.type}")
    if value.element_type is not like.element_type:
        return convert(value, like.element_type)
    return value


def _full(value: Hyper, like: Output, what: str) -> Output:
    """``value`` broadcast to ``like``'s type."""
    scalar = _scalar(value, like, what)
    return broadcast(scalar, like.shape, tuple(range(like.rank))) if like.rank else scalar


def _check_lists(what: str, params: Sequence[Output], **lists: Sequence[Output]) -> None:
    for name, values in lists.items():
        if len(values) != len(params):
            raise OpTypeError(
                f"{what}: {len(params)} parameter(s) but {len(values)} {name} value(s)"
            )
        for i, (p, v) in enumerate(zip(params, values, strict=True)):
            if v.type != p.type:
                raise OpTypeError(f"{what}: {name}[{i}] is {v.type}, parameter {i} is {p.type}")
    for i, p in enumerate(params):
        if not p.element_type.is_real:
            raise OpTypeError(f"{what}: parameter {i} is {p.type}; only floats can be trained")


def sgd(params: Sequence[Output], grads: Sequence[Output], lr: Hyper) -> list[Output]:
    """Plain gradient descent: ``p ← p − lr·g``.

    Args:
        params: the current parameter values (floating-point).
        grads: one gradient per parameter, of the same type.
        lr: the learning rate (a float or a scalar value).

    Returns:
        The new parameter values, in order.

    Raises:
        OpTypeError: the lists differ in length or types, or a hyperparameter is not a scalar.
    """
    _check_lists("sgd", params, grads=grads)
    return [
        subtract(p, multiply(_full(lr, p, "lr"), g)) for p, g in zip(params, grads, strict=True)
    ]


def momentum(
    params: Sequence[Output],
    grads: Sequence[Output],
    velocities: Sequence[Output],
    lr: Hyper,
    beta: Hyper = 0.9,
) -> tuple[list[Output], list[Output]]:
    """Heavy-ball momentum (PyTorch's form): ``v ← β·v + g``, ``p ← p − lr·v``.

    Args:
        params: the current parameter values.
        grads: one gradient per parameter.
        velocities: one velocity per parameter (zeros before the first step).
        lr: the learning rate.
        beta: the momentum coefficient.

    Returns:
        ``(new_params, new_velocities)``.

    Raises:
        OpTypeError: the lists differ in length or types, or a hyperparameter is not a scalar.
    """
    _check_lists("momentum", params, grads=grads, velocities=velocities)
    new_params, new_velocities = [], []
    for p, g, v in zip(params, grads, velocities, strict=True):
        v_next = add(multiply(_full(beta, v, "beta"), v), g)
        new_velocities.append(v_next)
        new_params.append(subtract(p, multiply(_full(lr, p, "lr"), v_next)))
    return new_params, new_velocities


def adam(
    params: Sequence[Output],
    grads: Sequence[Output],
    m: Sequence[Output],
    v: Sequence[Output],
    step: Hyper,
    lr: Hyper = 1e-3,
    beta1: Hyper = 0.9,
    beta2: Hyper = 0.999,
    eps: Hyper = 1e-8,
) -> tuple[list[Output], list[Output], list[Output]]:
    """Adam (Kingma & Ba, in PyTorch's form) with bias correction.

    ``m ← β₁m + (1−β₁)g``, ``v ← β₂v + (1−β₂)g²``, then
    ``p ← p − lr · (m / (1−β₁ᵗ)) / (√(v / (1−β₂ᵗ)) + ε)``.

    Args:
        params: the current parameter values.
        grads: one gradient per parameter.
        m: the first-moment estimates (zeros before the first step).
        v: the second-moment estimates (zeros before the first step).
        step: ``t``, the 1-based number of this update (a number or a scalar value of any
            numeric element type, e.g. an ``i64`` counter; it is converted).
        lr: the learning rate.
        beta1: the first-moment decay.
        beta2: the second-moment decay.
        eps: added to the denominator.

    Returns:
        ``(new_params, new_m, new_v)``.

    Raises:
        OpTypeError: the lists differ in length or types, or a hyperparameter is not a scalar.
    """
    _check_lists("adam", params, grads=grads, m=m, v=v)
    new_params: list[Output] = []
    new_m: list[Output] = []
    new_v: list[Output] = []
    for p, g, m_i, v_i in zip(params, grads, m, v, strict=True):
        m_next = add(multiply(_full(beta1, p, "beta1"), m_i), multiply(_decay(beta1, p), g))
        v_next = add(
            multiply(_full(beta2, p, "beta2"), v_i), multiply(_decay(beta2, p), multiply(g, g))
        )
        m_hat = divide(m_next, _full(_correction(beta1, step, p), p, "beta1"))
        v_hat = divide(v_next, _full(_correction(beta2, step, p), p, "beta2"))
        denominator = add(sqrt(v_hat), _full(eps, p, "eps"))
        new_params.append(subtract(p, multiply(_full(lr, p, "lr"), divide(m_hat, denominator))))
        new_m.append(m_next)
        new_v.append(v_next)
    return new_params, new_m, new_v


def _decay(beta: Hyper, like: Output) -> Output:
    """``1 − β`` broadcast like ``like`` (computed in Python when ``β`` is a number)."""
    if not isinstance(beta, Output):
        return _full(1.0 - float(beta), like, "beta")
    one = constant(1.0, like.element_type)
    return _full(subtract(one, _scalar(beta, like, "beta")), like, "beta")


def _correction(beta: Hyper, step: Hyper, like: Output) -> Hyper:
    """The scalar ``1 − βᵗ`` (a number when both ``β`` and ``t`` are numbers)."""
    if not isinstance(beta, Output) and not isinstance(step, Output):
        return 1.0 - float(beta) ** float(step)
    one = constant(1.0, like.element_type)
    return subtract(one, power(_scalar(beta, like, "beta"), _scalar(step, like, "step")))
