"""Data-parallel training: every rank runs the same step on its own shard of each batch, and the
gradients are averaged across ranks (``AllReduce`` mean) before the optimizer's update.

The rewrite happens where the gradients meet the update: :class:`DataParallelOptimizer` wraps
any :class:`~opgraph.optim.Optimizer` and all-reduces the gradients it is given, so
:func:`opgraph.optim.training_step` and :class:`opgraph.optim.Trainer` build data-parallel
steps unchanged. :func:`data_parallel` returns such a step Function (with the loss averaged too)
and :func:`data_parallel_trainer` a Trainer whose initial parameters come from one rank.

**Why the numbers equal one process.** The losses are means over the batch. With ``size``
ranks each taking ``b`` examples of a global batch of ``B = size·b``, rank ``r`` computes
``g_r = (1/b) Σ_{i in shard r} ∇ℓ_i`` and the mean over ranks is
``(1/size) Σ_r g_r = (1/B) Σ_i ∇ℓ_i``, the full-batch gradient: the update — and so every
parameter — is the single-process one up to floating-point rounding, provided the shards have
equal sizes (:func:`~opgraph.distributed.shard` ensures it) and the parameters start equal
(:func:`broadcast_parameters`). A loss that is a sum over the batch would need ``sum`` instead.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence

import numpy as np

from opgraph.core.dim import Dim
from opgraph.core.errors import GraphError
from opgraph.core.function import Function
from opgraph.core.node import Output
from opgraph.distributed.communicator import (
    Communicator,
    CommunicatorError,
    ReduceOp,
    current_communicator,
)
from opgraph.ops import movement
from opgraph.ops.collective import all_reduce
from opgraph.optim.optimizers import Optimizer, StateSpec
from opgraph.optim.rules import Hyper
from opgraph.optim.training import Trainer, training_step
from opgraph.pattern.pattern import constant_value
from opgraph.runtime.backend import Backend

__all__ = [
    "DataParallelOptimizer",
    "average_gradients",
    "broadcast_parameters",
    "data_parallel",
    "data_parallel_trainer",
]


def average_gradients(grads: Sequence[Output], *, fuse: bool = True) -> list[Output]:
    """Each gradient averaged over the ranks (``all_reduce(g, "mean")``).

    A gradient that is a constant (zeros, where the loss does not depend on a parameter) is the
    same on every rank and is returned as it is.

    Args:
        grads: gradient values.
        fuse: reduce all gradients of one element type in a single ``AllReduce`` (flattened and
            concatenated, then sliced back): one message per step instead of one per gradient.

    Returns:
        One averaged value per gradient, of its type.
    """
    averaged: list[Output] = list(grads)
    groups: dict[object, list[int]] = {}
    for i, g in enumerate(grads):
        if constant_value(g) is None:
            groups.setdefault(g.element_type, []).append(i)
    for indices in groups.values():
        if fuse and len(indices) > 1:
            for i, value in zip(indices, _fused_mean([grads[i] for i in indices]), strict=True):
                averaged[i] = value
        else:
            for i in indices:
                averaged[i] = all_reduce(grads[i], ReduceOp.MEAN)
    return averaged


def _fused_mean(values: Sequence[Output]) -> list[Output]:
    sizes = [math.prod(v.shape) for v in values]
    flat = movement.concat(
        [movement.reshape(v, (n,)) for v, n in zip(values, sizes, strict=True)], 0
    )
    total = all_reduce(flat, ReduceOp.MEAN)
    out: list[Output] = []
    start: Dim = 0
    for v, n in zip(values, sizes, strict=True):
        out.append(movement.reshape(movement.slice(total, (start,), (start + n,)), v.shape))
        start = start + n
    return out


class DataParallelOptimizer(Optimizer):
    """An optimizer that first averages its gradients over the ranks, then applies ``inner``.

    Its state is ``inner``'s state (the same on every rank, since the averaged gradients are).

    Args:
        inner: the update rule, e.g. ``optim.Adam(lr=1e-2)``.
        fuse: see :func:`average_gradients`.

    Example::

        step = optim.training_step(loss_fn, 4, DataParallelOptimizer(optim.SGD(lr=0.1)))
    """

    def __init__(self, inner: Optimizer, *, fuse: bool = True) -> None:
        if not isinstance(inner, Optimizer):
            raise GraphError(
                f"DataParallelOptimizer: needs an opgraph.optim Optimizer, got "
                f"{type(inner).__name__}"
            )
        self.inner = inner
        self.fuse = fuse
        self.lr = inner.lr

    def state_specs(self, params: Sequence[Output]) -> list[StateSpec]:
        """``inner``'s state."""
        return self.inner.state_specs(params)

    def update(
        self,
        params: Sequence[Output],
        grads: Sequence[Output],
        state: Sequence[Output],
        lr: Hyper | None = None,
    ) -> tuple[list[Output], list[Output]]:
        """``inner``'s update on the gradients averaged over the ranks."""
        return self.inner.update(params, average_gradients(grads, fuse=self.fuse), state, lr)

    def __repr__(self) -> str:
        return f"DataParallelOptimizer({self.inner!r}, fuse={self.fuse})"


def data_parallel(
    loss_fn: Function,
    params: Sequence[Output] | int,
    optimizer: Optimizer,
    *,
    learning_rate_input: bool = False,
    average_loss: bool = True,
    fuse: bool = True,
    name: str | None = None,
) -> Function:
    """A data-parallel training step: :func:`opgraph.optim.training_step` with the gradients
    averaged over the ranks before ``optimizer``'s update.

    Args:
        loss_fn: one scalar floating-point result, a **mean** over the batch (the per-rank
            batch: its batch inputs have the per-rank shape).
        params: the trainable parameters of ``loss_fn``, or an int ``n`` for its first ``n``.
        optimizer: the update rule.
        learning_rate_input: see :func:`opgraph.optim.training_step`.
        average_loss: return the loss averaged over the ranks (the global batch's loss) rather
            than this rank's.
        fuse: see :func:`average_gradients`.
        name: the Function's name (default ``"<loss name>_data_parallel_step"``).

    Returns:
        A Function with :func:`~opgraph.optim.training_step`'s layout: parameters are the
        trainable parameters, the optimizer state, the batch inputs (then the learning rate);
        results are the loss, the new parameters and the new state. Every rank must run it the
        same number of times.

    Raises:
        GraphError, NotDifferentiableError: as :func:`~opgraph.optim.training_step`.
    """
    step = training_step(
        loss_fn,
        params,
        DataParallelOptimizer(optimizer, fuse=fuse),
        learning_rate_input=learning_rate_input,
        name=name if name is not None else f"{loss_fn.name}_data_parallel_step",
    )
    if not average_loss:
        return step
    loss = all_reduce(step.results[0], ReduceOp.MEAN)
    return Function([loss, *step.results[1:]], step.parameters, name=step.name)


def broadcast_parameters(
    arrays: Sequence[np.ndarray], root: int = 0, communicator: Communicator | None = None
) -> list[np.ndarray]:
    """Rank ``root``'s arrays on every rank (initial parameters, so all ranks start equal).

    The ranks first check that they pass the same number of arrays with the same dtypes and
    shapes; if any differs, every rank raises (no rank is left waiting).

    Args:
        arrays: this rank's arrays (their values matter on ``root`` only).
        root: the rank whose values are kept.
        communicator: default: the current one.

    Returns:
        Fresh arrays, equal on every rank.

    Raises:
        CommunicatorError: the ranks' arrays differ in number, dtype or shape.
    """
    comm = communicator if communicator is not None else current_communicator()
    values = [np.asarray(a) for a in arrays]
    layout = ";".join(f"{a.dtype.str}{a.shape}" for a in values)
    mine = np.array([zlib.crc32(layout.encode())], np.int64)
    differs = np.array([int(comm.broadcast(mine, root)[0] != mine[0])], np.int64)
    if comm.all_reduce(differs, ReduceOp.MAX)[0]:
        raise CommunicatorError(
            f"broadcast_parameters: the ranks' arrays differ in number, dtype or shape (rank "
            f"{comm.rank} has {layout or 'none'}); every rank must pass the same layout"
        )
    return [comm.broadcast(a, root) for a in values]


def data_parallel_trainer(
    loss_fn: Function,
    params: Sequence[Output] | int,
    optimizer: Optimizer,
    initial_values: Sequence[np.ndarray],
    backend: Backend | str = "INTERPRETER",
    *,
    root: int = 0,
    learning_rate_input: bool = False,
    fuse: bool = True,
    profile: bool = False,
) -> Trainer:
    """A :class:`~opgraph.optim.Trainer` for data-parallel training.

    Its step averages the gradients over the ranks (:class:`DataParallelOptimizer`) and its
    initial parameters are rank ``root``'s ``initial_values`` (:func:`broadcast_parameters`).
    ``Trainer.step`` returns **this rank's** loss; average it with
    ``current_communicator().all_reduce(np.array(loss), "mean")`` when needed.

    Args:
        loss_fn: see :func:`data_parallel`.
        params: see :func:`data_parallel`.
        optimizer: the update rule.
        initial_values: one array per trainable parameter (used on ``root``).
        backend: a Backend or a registered backend's name.
        root: the rank whose initial values every rank starts from.
        learning_rate_input: see :func:`opgraph.optim.training_step`.
        fuse: see :func:`average_gradients`.
        profile: compile with performance counters.
    """
    return Trainer(
        loss_fn,
        params,
        DataParallelOptimizer(optimizer, fuse=fuse),
        broadcast_parameters(initial_values, root),
        backend,
        learning_rate_input=learning_rate_input,
        profile=profile,
    )
