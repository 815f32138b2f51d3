"""Train an MLP on scikit-learn's handwritten digits with one compiled step per batch.

The step Function computes the loss, its gradients and the Adam update together; the
``Trainer`` runs it on tensors created once (see docs/training.md). Run::

    python examples/train_mlp.py [--epochs 10] [--backend INTERPRETER] [--plot loss.png]
"""

import argparse

from opgraph_examples.digits import DigitsConfig, format_epoch, plot_losses, train_digits

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=10)
parser.add_argument("--backend", default=None, help="default: CPU if registered, else INTERPRETER")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--plot", default="train_mlp_loss.png", help="where to write the loss curve")
args = parser.parse_args()

config = DigitsConfig(epochs=args.epochs, batch_size=args.batch_size, backend=args.backend)
run = train_digits(config, on_epoch=lambda epoch: print(format_epoch(epoch, config.epochs)))
print(
    f"test accuracy {run.test_accuracy:.2%} on {run.backend}, {run.seconds_per_epoch:.3f} s/epoch"
)
print("loss curve:", plot_losses(run, args.plot))
