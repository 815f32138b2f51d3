"""Distributed data-parallel training over MPI (``og.distributed``).

* Start: :func:`init` selects MPI (``COMM_WORLD``) as the communicator the collective ops use
  and aborts every rank when one fails (one process, with a warning, when mpi4py is missing
  and no MPI launcher started the process); ``init("single")`` selects one process
  explicitly. A collective with no communicator set up raises :class:`CommunicatorError`.
  :func:`rank`, :func:`size`.
* Ops: ``ops.all_reduce`` and ``ops.broadcast_distributed`` (``opgraph.ops.collective``).
* Training: :func:`data_parallel` (a step Function whose gradients are averaged across ranks),
  :class:`DataParallelOptimizer`, :func:`data_parallel_trainer`, :func:`broadcast_parameters`.
* Data: :func:`shard` and :func:`shard_batches` give each rank an equal share.
* Communicators: :class:`Communicator`, :class:`SingleProcessCommunicator`,
  :class:`MPICommunicator`, :func:`use_communicator`, :func:`current_communicator`, and
  :class:`LocalGroup` (several ranks as threads of one process, for tests).

See ``docs/distributed.md``.
"""

from opgraph.distributed.communicator import (
    Communicator,
    CommunicatorError,
    MPICommunicator,
    ReduceOp,
    SingleProcessCommunicator,
    current_communicator,
    get_communicator,
    set_communicator,
    use_communicator,
)
from opgraph.distributed.data_parallel import (
    DataParallelOptimizer,
    average_gradients,
    broadcast_parameters,
    data_parallel,
    data_parallel_trainer,
)
from opgraph.distributed.local import LocalCommunicator, LocalGroup
from opgraph.distributed.mpi import (
    SingleProcessFallbackWarning,
    init,
    is_initialized,
    rank,
    shutdown,
    size,
)
from opgraph.distributed.sharding import shard, shard_batches

__all__ = [
    "Communicator",
    "CommunicatorError",
    "DataParallelOptimizer",
    "LocalCommunicator",
    "LocalGroup",
    "MPICommunicator",
    "ReduceOp",
    "SingleProcessCommunicator",
    "SingleProcessFallbackWarning",
    "average_gradients",
    "broadcast_parameters",
    "current_communicator",
    "data_parallel",
    "data_parallel_trainer",
    "get_communicator",
    "init",
    "is_initialized",
    "rank",
    "set_communicator",
    "shard",
    "shard_batches",
    "shutdown",
    "size",
    "use_communicator",
]
