"""Training: optimizer updates as graph ops, and a training step compiled as one Function.

* Update rules that build graphs: :func:`sgd`, :func:`momentum`, :func:`adam`.
* Optimizers (a rule, its hyperparameters and its state layout): :class:`SGD`,
  :class:`Momentum`, :class:`Adam`.
* :func:`training_step` composes a loss Function, its gradients and an optimizer's update into
  one Function; :class:`Trainer` compiles it and runs it once per batch on tensors created once.
* Learning-rate schedules for a step built with ``learning_rate_input=True``:
  :func:`cosine_schedule`, :func:`constant_schedule`.
* Losses and small models for the demos: :func:`softmax_cross_entropy`, :func:`log_softmax`,
  :func:`mlp`, :func:`cnn`, :class:`Model`. See ``docs/training.md``.
"""

from opgraph.optim.losses import log_softmax, softmax_cross_entropy
from opgraph.optim.models import Model, Weight, cnn, dense, mlp
from opgraph.optim.optimizers import SGD, Adam, Momentum, Optimizer, StateSpec
from opgraph.optim.rules import Hyper, adam, momentum, sgd
from opgraph.optim.schedules import Schedule, constant_schedule, cosine_schedule
from opgraph.optim.training import LEARNING_RATE, Trainer, trainable_parameters, training_step

__all__ = [
    "LEARNING_RATE",
    "SGD",
    "Adam",
    "Hyper",
    "Model",
    "Momentum",
    "Optimizer",
    "Schedule",
    "StateSpec",
    "Trainer",
    "Weight",
    "adam",
    "cnn",
    "constant_schedule",
    "cosine_schedule",
    "dense",
    "log_softmax",
    "mlp",
    "momentum",
    "sgd",
    "softmax_cross_entropy",
    "trainable_parameters",
    "training_step",
]
