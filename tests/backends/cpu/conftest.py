import dataclasses

import pytest

from opgraph.backends.cpu import CpuBackend, default_config


@pytest.fixture(scope="session")
def cpu() -> CpuBackend:
    """The CPU backend with the default configuration (shared compile cache)."""
    return CpuBackend()


@pytest.fixture(scope="session")
def parallel_cpu() -> CpuBackend:
    """Every kernel and product split between threads, whatever its size: small graphs test
    the thread pool and the split code paths."""
    return CpuBackend(dataclasses.replace(default_config(), parallel_threshold=1, num_threads=3))
