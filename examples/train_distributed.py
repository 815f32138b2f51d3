"""Data-parallel training of the digits MLP over MPI: one process per rank, gradients averaged.

Every rank builds the same step (forward, backward, ``AllReduce`` mean of the gradients, Adam)
and trains on its own share of each global batch (``og.distributed.shard_batches``); rank 0's
initial weights are broadcast, so all ranks keep identical weights. Run on one host, with no
listener beyond the loopback (a plain ``mpiexec -n 2`` listens on the machine's external
addresses, and MPICH's control port on every interface even with ``-iface lo``), with::

    UCX_NET_DEVICES=lo OPENBLAS_NUM_THREADS=1 OPGRAPH_NUM_THREADS=1 \\
        unshare -rn sh -c 'ip link set lo up && exec "$@"' sh \\
        mpiexec -launcher fork -hosts localhost -iface lo -n 2 \\
        python examples/train_distributed.py --epochs 5 --batch-size 32

``--batch-size`` is per rank: the global batch is ``ranks × batch size``. Rank 0 prints each
epoch's loss (the mean over all ranks), the test accuracy and the throughput in training
samples per second (all ranks together). See docs/distributed.md.
"""

import argparse
import time

import numpy as np

import opgraph.distributed as dist
from opgraph import optim
from opgraph_examples.digits import default_backend, load_digits_split

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=32, help="examples per rank and step")
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--backend", default=None, help="default: CPU if registered, else INTERPRETER")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

# MPI COMM_WORLD (an exception on any rank aborts the whole job). Without mpi4py: one process,
# with a warning (an error under mpiexec); dist.init("single") asks for one process explicitly.
comm = dist.init()
backend = args.backend or default_backend()
data = load_digits_split(seed=args.seed)
labels = np.eye(10, dtype=np.float32)[data.y_train]
model = optim.mlp((64, args.hidden, 10))

trainer = dist.data_parallel_trainer(
    model.loss_function(args.batch_size),
    len(model.weights),
    optim.Adam(lr=args.lr),
    model.initial_values(args.seed),  # rank 0's values are broadcast to every rank
    backend,
    learning_rate_input=True,
)
steps_per_epoch = len(data.x_train) // (args.batch_size * comm.size)
schedule = optim.cosine_schedule(args.lr, args.epochs * steps_per_epoch)
predict = trainer.backend.compile(model.predict_function(len(data.x_test)))


def log(message: str) -> None:
    if comm.rank == 0:
        print(message, flush=True)


log(
    f"{comm.size} rank(s) on {backend}: {args.batch_size} examples per rank and step, global "
    f"batch {args.batch_size * comm.size}, {steps_per_epoch} steps per epoch"
)
rates = []
for epoch in range(args.epochs):
    batches = dist.shard_batches([data.x_train, labels], args.batch_size, seed=epoch)
    comm.barrier()  # every rank starts the clock together
    started = time.perf_counter()
    losses = [trainer.step(x, y, learning_rate=schedule(trainer.steps)) for x, y in batches]
    comm.barrier()  # and the epoch ends when the slowest rank is done
    seconds = time.perf_counter() - started
    loss = float(comm.all_reduce(np.array(np.mean(losses)), "mean"))
    samples = len(losses) * args.batch_size * comm.size
    rates.append(samples / seconds)
    logits = predict(*trainer.parameter_values(), data.x_test)[0]
    accuracy = float(np.mean(np.argmax(logits, axis=1) == data.y_test))
    log(
        f"epoch {epoch + 1}/{args.epochs}: loss {loss:.4f}, test accuracy {accuracy:.2%}, "
        f"{seconds:.3f} s, {rates[-1]:.0f} samples/s"
    )

steady = rates[1:] or rates  # the first epoch includes warm-up
log(f"throughput: {np.median(steady):.0f} samples/s (median of epochs 2..{args.epochs})")
