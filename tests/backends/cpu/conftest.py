import ctypes
import dataclasses
import subprocess
from collections.abc import Callable, Iterator

import pytest
from pool_sleep import PROBE  # beside this file (rootdir import)

from opgraph.backends.cpu import CpuBackend, CpuConfigError, compiler, default_config
from opgraph.backends.cpu.codegen import runtime
from opgraph.backends.cpu.config import resolve_compiler
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


@pytest.fixture(scope="session")
def avx2_cpu() -> CpuBackend:
    """The CPU backend generating AVX2 code on two threads; skips where this CPU cannot
    run AVX2 code."""
    config = dataclasses.replace(default_config(), isa="avx2", num_threads=2)
    try:
        config.target_flags()  # what a compile would raise first
    except CpuConfigError as e:
        pytest.skip(f"this CPU cannot run AVX2 code: {e}")
    return CpuBackend(config)


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


@pytest.fixture(scope="session")
def hooked_runtime(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], ctypes.CDLL]:
    """``build(name, kernel)``: the runtime built with its test hooks (``-DOG_TEST_HOOKS``)
    plus ``pool_sleep.PROBE`` and the C of ``kernel``, loaded with private symbols
    (``-Bsymbolic``, so the backend's own runtime in this process is not interposed);
    ``og_parallel`` and ``og_test_stall`` declared. Skips where there is no C compiler."""

    def build(name: str, kernel: str) -> ctypes.CDLL:
        compiler = resolve_compiler(default_config().compiler)
        if compiler is None:
            pytest.skip("no C compiler to build the runtime's test build")
        work = tmp_path_factory.mktemp(name)
        source = work / f"{name}.c"
        source.write_text(runtime.SOURCE + PROBE + kernel)
        library = work / f"lib{name}.so"
        subprocess.run(
            [compiler, "-O2", "-fPIC", "-shared", "-pthread", "-DOG_TEST_HOOKS",
             "-Wl,-Bsymbolic", str(source), "-o", str(library)],
            check=True,
            capture_output=True,
        )  # fmt: skip
        lib = ctypes.CDLL(str(library))
        lib.og_parallel.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long,
            ctypes.c_int,
        ]  # fmt: skip
        lib.og_parallel.restype = ctypes.c_int
        lib.og_test_stall.argtypes = [ctypes.c_int, ctypes.c_long]
        return lib

    return build
