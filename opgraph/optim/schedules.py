"""Learning-rate schedules: plain functions of the step number, fed to a step Function built
with ``learning_rate_input=True``."""

from __future__ import annotations

import math
from collections.abc import Callable

Schedule = Callable[[int], float]
"""``schedule(step) -> learning rate`` for the 0-based step number."""


def constant_schedule(lr: float) -> Schedule:
    """The same rate at every step."""
    return lambda step: lr


def cosine_schedule(lr: float, total_steps: int, final_lr: float = 0.0) -> Schedule:
    """Cosine decay from ``lr`` at step 0 to ``final_lr`` at ``total_steps`` (held after).

    Args:
        lr: the initial rate.
        total_steps: the number of steps the decay spans (> 0).
        final_lr: the rate at the end.
    """
    if total_steps <= 0:
        raise ValueError(f"cosine_schedule: total_steps must be > 0, got {total_steps}")

    def schedule(step: int) -> float:
        progress = min(step, total_steps) / total_steps
        return final_lr + (lr - final_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return schedule
