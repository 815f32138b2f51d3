"""Collective ops: values combined or shared across the ranks of a distributed job.

nGraph's ``AllReduce`` and ``BroadcastDistributed``. The output has the input's type; the
values come from the other ranks when the op runs: the reference kernels call the current
communicator (``opgraph.distributed.communicator``; ``og.distributed.init()`` selects MPI). The
ops themselves import nothing of it: the reduction enum is defined here and the communicators
use it.
In a process that is alone, a reduction over one rank is the identity, which is what the
oracle and the op records state.

Every rank must run the same Function (the same collectives, in the same order, on values of
the same type). The ops are not differentiable: ``og.distributed.data_parallel`` places them on
the gradients after ``backprop``.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.tensor_type import TensorType
from opgraph.ops.common import as_enum, require_element_type

__all__ = [
    "ReduceOp",
    "AllReduce",
    "all_reduce",
    "BroadcastDistributed",
    "broadcast_distributed",
]


class ReduceOp(enum.Enum):
    """How :class:`AllReduce` (and ``Communicator.all_reduce``) combines the ranks' values,
    elementwise.

    ``MEAN`` is ``SUM`` divided by the number of ranks (floating-point values only).
    """

    SUM = "sum"
    PROD = "prod"
    MIN = "min"
    MAX = "max"
    MEAN = "mean"


@opclass
class AllReduce(Op):
    """Combine ``x`` elementwise over all ranks (``sum``, ``prod``, ``min``, ``max`` or
    ``mean``); every rank gets the same result, of ``x``'s type.

    ``mean`` is the sum divided by the number of ranks and needs a floating-point type.
    16-bit floats are reduced in f32 and rounded once. Integers wrap. Booleans are refused:
    they have no arithmetic reduction (convert them; ``max`` is any, ``min`` is all). With a
    single rank the result equals ``x``.
    """

    reduction: ReduceOp = ReduceOp.SUM

    num_inputs = 1
    differentiable = False
    foldable = False  # its value comes from the other ranks
    accepted: ClassVar[tuple[ElementType, ...]] = et.NUMERIC

    def __post_init__(self) -> None:
        set_attr(self, "reduction", as_enum(ReduceOp, self.reduction, "reduction"))

    def infer(self, x: TensorType) -> TensorType:
        require_element_type(x, self.accepted)
        require(
            self.reduction is not ReduceOp.MEAN or x.element_type.is_real,
            f"mean needs a floating-point input, got {x.element_type.name} (an integer mean "
            "would truncate; reduce with sum and divide explicitly)",
        )
        return x


def all_reduce(x: Output, op: ReduceOp | str = ReduceOp.SUM) -> Output:
    """Reduce ``x`` across the ranks of the current communicator.

    Args:
        x: a numeric value (not boolean).
        op: a :class:`ReduceOp` or its lower-case name:
            ``"sum"`` (default), ``"prod"``, ``"min"``, ``"max"``, ``"mean"`` (floats only).

    Returns:
        The reduction, of ``x``'s type, identical on every rank.

    Raises:
        OpTypeError: an unknown ``op``, a boolean input, or ``mean`` of integers.

    Example::

        g = ops.all_reduce(gradient, "mean")
    """
    return AllReduce(op)(x)  # type: ignore[arg-type]


@opclass
class BroadcastDistributed(Op):
    """Rank ``root``'s value of ``x`` on every rank (other ranks' values are ignored); the
    output has ``x``'s type.

    Every element type works: the value travels as bytes.
    """

    root: int = 0

    num_inputs = 1
    differentiable = False
    foldable = False  # its value comes from the other ranks
    accepted: ClassVar[tuple[ElementType, ...]] = et.ALL

    def __post_init__(self) -> None:
        root: Any = self.root
        if isinstance(root, bool) or not isinstance(root, int) or root < 0:
            raise OpTypeError(f"root must be a non-negative int (a rank), got {root!r}")

    def infer(self, x: TensorType) -> TensorType:
        return x


def broadcast_distributed(x: Output, root: int = 0) -> Output:
    """Share rank ``root``'s value of ``x`` with every rank.

    Args:
        x: a value of any element type.
        root: the rank whose value is sent (a rank of the communicator when it runs).

    Returns:
        Rank ``root``'s value, of ``x``'s type.

    Raises:
        OpTypeError: ``root`` is not a non-negative int. A root that is not a rank of the
            communicator fails when the op runs.
    """
    return BroadcastDistributed(root)(x)
