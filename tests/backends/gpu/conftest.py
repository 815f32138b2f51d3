import pytest
from gpu_cases import fake_backend

from opgraph.backends.gpu import FakeDevice, GpuBackend


@pytest.fixture
def fake() -> tuple[GpuBackend, FakeDevice]:
    """The GPU backend on a fresh fake device (numpy memory at made-up addresses)."""
    return fake_backend()
