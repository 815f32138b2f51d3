"""The training demo: a classifier for scikit-learn's handwritten digits, trained with a
compiled step (forward, backward and Adam update in one call per batch).

``load_digits`` ships inside scikit-learn (8×8 images, 1,797 of them, no download). The data is
split once (stratified, 25 % for testing), scaled to [0, 1], and trained with Adam and a cosine
learning-rate schedule fed to the step as a scalar input. Used by ``examples/train_mlp.py`` and
``opgraph train-demo``; needs the ``train`` extra (scikit-learn, matplotlib; tqdm optional).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from opgraph.optim.models import Model, mlp
from opgraph.optim.optimizers import Adam
from opgraph.optim.progress import progress_bar
from opgraph.optim.schedules import cosine_schedule
from opgraph.optim.training import Trainer
from opgraph.runtime.backend import backend as get_backend
from opgraph.runtime.backend import backends
from opgraph.runtime.tensor import Tensor


def default_backend() -> str:
    """``"CPU"`` when that backend is registered, else ``"INTERPRETER"``."""
    return "CPU" if "CPU" in backends() else "INTERPRETER"


@dataclass(frozen=True)
class DigitsData:
    """The digits split: images ``(n, 64)`` f32 in [0, 1] and integer labels."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split(test_fraction: float = 0.25, seed: int = 0) -> DigitsData:
    """scikit-learn's digits, split stratified into train and test sets."""
    try:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the digits demo needs scikit-learn: pip install 'opgraph[train]'"
        ) from error
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    return DigitsData(x_train, y_train, x_test, y_test)


@dataclass(frozen=True)
class DigitsConfig:
    """What to train and how. ``backend=None`` picks :func:`default_backend`."""

    epochs: int = 10
    batch_size: int = 32
    backend: str | None = None
    hidden: tuple[int, ...] = (128,)
    learning_rate: float = 1e-2
    seed: int = 0
    progress: bool = True


@dataclass(frozen=True)
class EpochResult:
    """One epoch: mean training loss, test accuracy after it, and seconds spent in its steps."""

    epoch: int
    mean_loss: float
    test_accuracy: float
    seconds: float
    steps: int


@dataclass
class TrainingRun:
    """What a run produced: the loss of every step and one result per epoch."""

    model: str
    backend: str
    compile_seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    epochs: list[EpochResult] = field(default_factory=list)

    @property
    def test_accuracy(self) -> float:
        """The test accuracy after the last epoch."""
        return self.epochs[-1].test_accuracy if self.epochs else 0.0

    @property
    def seconds_per_epoch(self) -> float:
        """The mean time of an epoch's training steps."""
        return float(np.mean([e.seconds for e in self.epochs])) if self.epochs else 0.0


class _Evaluator:
    """The predict Function compiled for the whole test set, on tensors created once."""

    def __init__(self, model: Model, trainer: Trainer, x: np.ndarray, y: np.ndarray) -> None:
        fn = model.predict_function(len(x))
        self.exe = trainer.backend.compile(fn)
        self.trainer, self.labels = trainer, y
        images_type, logits_type = fn.parameter_types[-1], fn.flat_result_types[0]
        create = trainer.backend.create_tensor
        self.images: Tensor = create(images_type.element_type, images_type.shape)
        self.images.write(np.ascontiguousarray(x.reshape(images_type.shape)))
        self.logits: Tensor = create(logits_type.element_type, logits_type.shape)

    def accuracy(self) -> float:
        self.exe.call([self.logits], [*self.trainer.parameter_tensors, self.images])
        return float(np.mean(np.argmax(self.logits.buffer, axis=1) == self.labels))


def train_digits(
    config: DigitsConfig,
    model: Model | None = None,
    data: DigitsData | None = None,
    on_epoch: Callable[[EpochResult], None] | None = None,
) -> TrainingRun:
    """Train ``model`` (default: an MLP ``64 → config.hidden → 10``) on the digits.

    Args:
        config: epochs, batch size, backend, learning rate, seed, progress bar.
        model: the classifier; its ``input_shape`` must hold 64 values (``(64,)`` or
            ``(1, 8, 8)``).
        data: the split (default :func:`load_digits_split` with ``config.seed``).
        on_epoch: called after each epoch (e.g. to print it).

    Returns:
        The per-step losses and per-epoch results.
    """
    model = model if model is not None else mlp((64, *config.hidden, 10))
    data = data if data is not None else load_digits_split(seed=config.seed)
    steps_per_epoch = len(data.x_train) // config.batch_size
    if steps_per_epoch == 0:
        raise ValueError(f"batch size {config.batch_size} exceeds {len(data.x_train)} examples")
    name = config.backend or default_backend()
    started = time.perf_counter()
    trainer = Trainer(
        model.loss_function(config.batch_size),
        len(model.weights),
        Adam(lr=config.learning_rate),
        model.initial_values(config.seed),
        get_backend(name),
        learning_rate_input=True,
    )
    evaluator = _Evaluator(model, trainer, data.x_test, data.y_test)
    schedule = cosine_schedule(config.learning_rate, config.epochs * steps_per_epoch)
    images = data.x_train.reshape(-1, *model.input_shape)
    one_hot = np.eye(model.num_classes, dtype=np.float32)[data.y_train]
    rng = np.random.default_rng(config.seed)
    run = TrainingRun(model.name, name, time.perf_counter() - started)
    for epoch in range(1, config.epochs + 1):
        order = rng.permutation(len(images))[: steps_per_epoch * config.batch_size]
        batches = order.reshape(steps_per_epoch, config.batch_size)
        bar = progress_bar(steps_per_epoch, f"epoch {epoch}/{config.epochs}", config.progress)
        started = time.perf_counter()
        losses = _train_epoch(trainer, images, one_hot, batches, schedule, bar)
        seconds = time.perf_counter() - started
        bar.close()
        run.losses += losses
        accuracy = evaluator.accuracy()
        result = EpochResult(epoch, float(np.mean(losses)), accuracy, seconds, steps_per_epoch)
        run.epochs.append(result)
        if on_epoch is not None:
            on_epoch(result)
    return run


def _train_epoch(
    trainer: Trainer,
    images: np.ndarray,
    one_hot: np.ndarray,
    batches: np.ndarray,
    schedule: Callable[[int], float],
    bar: Any,
) -> list[float]:
    """One step per row of ``batches`` (example indices); returns the losses."""
    losses = []
    for batch in batches:
        rate = schedule(trainer.steps)
        losses.append(trainer.step(images[batch], one_hot[batch], learning_rate=rate))
        bar.set_postfix_str(f"loss {losses[-1]:.4f}", refresh=False)
        bar.update(1)
    return losses


def plot_losses(run: TrainingRun, path: str | Path) -> Path:
    """Write the loss curve (every step, and each epoch's mean) to a PNG at ``path``.

    Uses matplotlib's Agg canvas directly, so the global pyplot backend is left alone.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    steps = np.arange(1, len(run.losses) + 1)
    axes.plot(steps, run.losses, linewidth=0.8, alpha=0.5, label="loss per step")
    middles = np.cumsum([e.steps for e in run.epochs]) - 0.5 * np.array(
        [e.steps for e in run.epochs]
    )
    axes.plot(middles, [e.mean_loss for e in run.epochs], "o-", label="epoch mean")
    axes.set_xlabel("step")
    axes.set_ylabel("softmax cross-entropy")
    axes.set_yscale("log")
    axes.set_title(f"{run.model} on digits ({run.backend}): test accuracy {run.test_accuracy:.1%}")
    axes.legend()
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    target = Path(path)
    figure.savefig(target, format="png")
    return target


def format_epoch(result: EpochResult, epochs: int) -> str:
    """One line per epoch: loss, test accuracy, time."""
    per_step = 1e3 * result.seconds / max(result.steps, 1)
    return (
        f"epoch {result.epoch}/{epochs}: loss {result.mean_loss:.4f}, test accuracy "
        f"{result.test_accuracy:.2%}, {result.seconds:.3f} s ({result.steps} steps, "
        f"{per_step:.2f} ms/step)"
    )
