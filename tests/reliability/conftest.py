"""The reliability suite: regression tests built from ``shared/repro/reliability`` and fuzzers.

Fuzzers run a CI-sized number of cases; ``tools/fuzz.py`` runs them ten times (or more) longer
by setting ``OPGRAPH_FUZZ_SCALE``. Each fuzzer takes its count from the ``fuzz_cases`` fixture:
``def test_x(fuzz_cases): for i in range(fuzz_cases(200)): ...``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest


def _scale() -> int:
    raw = os.environ.get("OPGRAPH_FUZZ_SCALE", "1")
    return int(raw) if raw.isdigit() and int(raw) > 0 else 1


@pytest.fixture
def fuzz_cases() -> Callable[[int], int]:
    """Scales a fuzzer's CI-sized case count by ``OPGRAPH_FUZZ_SCALE`` (default 1)."""
    scale = _scale()
    return lambda base: base * scale
