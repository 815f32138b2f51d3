import pytest
from serialize_ops import TEST_OPS

from opgraph.core.op import OP_REGISTRY


@pytest.fixture
def test_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the test-only ops for one test (they stay out of the coverage test)."""
    for cls in TEST_OPS:
        monkeypatch.setitem(OP_REGISTRY._items, cls.__name__, cls)
