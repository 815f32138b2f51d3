import dataclasses
from collections.abc import Iterator

import pytest

from opgraph.backends.cpu import CpuBackend, compiler, default_config
from opgraph.backends.fused import pipeline


@pytest.fixture(scope="session")
def cpu() -> CpuBackend:
    """The CPU backend with the default configuration (shared compile cache)."""
    return CpuBackend()


@pytest.fixture(scope="session")
def parallel_cpu() -> CpuBackend:
    """Every kernel and product split between threads, whatever its size: small graphs test
    the thread pool and the split code paths."""
    return CpuBackend(dataclasses.replace(default_config(), parallel_threshold=1, num_threads=3))


@dataclasses.dataclass
class CompileCounts:
    """How many times the C compiler (``builds``) and the fused pipeline (``lowerings``)
    ran since the fixture was set up."""

    builds: int = 0
    lowerings: int = 0

    def reset(self) -> None:
        """Count from now on (e.g. after the compile a test means to be the only one)."""
        self.builds = self.lowerings = 0


@pytest.fixture
def compile_counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[CompileCounts]:
    """Counts the compiler and pipeline runs of the test (each still runs as usual)."""
    counts = CompileCounts()
    real_build, real_lower = compiler.Toolchain.build, pipeline.lower

    def build(*args: object, **kwargs: object) -> object:
        counts.builds += 1
        return real_build(*args, **kwargs)  # type: ignore[arg-type]

    def lower(*args: object, **kwargs: object) -> object:
        counts.lowerings += 1
        return real_lower(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compiler.Toolchain, "build", build)
    monkeypatch.setattr(pipeline, "lower", lower)
    yield counts
