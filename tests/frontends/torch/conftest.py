"""Fixtures every PyTorch bridge test module shares."""

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    """Each test starts and ends with dynamo's caches empty (no compiled frame leaks over)."""
    torch = pytest.importorskip("torch", reason="the torch extra is not installed")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch):
    """Counts opgraph executions (``torch_bridge_helpers.ExecutionCounter``)."""
    from torch_bridge_helpers import ExecutionCounter

    return ExecutionCounter(monkeypatch)
