"""Reference kernels for the collective ops: they call the current communicator.

With no communicator selected in a process that is alone, the reductions and the broadcast
return a copy of their input (one rank); see ``opgraph.distributed.communicator``.
"""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.distributed.communicator import current_communicator
from opgraph.ops.collective import AllReduce, BroadcastDistributed


@KERNELS.register(AllReduce)
def _all_reduce(op: AllReduce, x: np.ndarray) -> np.ndarray:
    return current_communicator().all_reduce(x, op.reduction)


@KERNELS.register(BroadcastDistributed)
def _broadcast_distributed(op: BroadcastDistributed, x: np.ndarray) -> np.ndarray:
    return current_communicator().broadcast(x, op.root)
