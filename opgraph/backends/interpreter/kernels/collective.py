"""Reference kernels for the collective ops: they call the runtime's current communicator.

With no communicator selected in a process that is alone, the reductions and the broadcast
return a copy of their input (one rank); see ``opgraph.runtime.communicator``.
"""

from __future__ import annotations

import numpy as np

from opgraph.backends.interpreter.kernels.registry import KERNELS
from opgraph.ops.collective import AllReduce, BroadcastDistributed
from opgraph.runtime.communicator import current_communicator


@KERNELS.register(AllReduce)
def _all_reduce(op: AllReduce, x: np.ndarray) -> np.ndarray:
    return current_communicator().all_reduce(x, op.reduction)


@KERNELS.register(BroadcastDistributed)
def _broadcast_distributed(op: BroadcastDistributed, x: np.ndarray) -> np.ndarray:
    return current_communicator().broadcast(x, op.root)
