"""The C toolchain: compile generated sources once, cache the modules on disk, load them.

A module is cached under ``<cache_dir>/<key>.so`` where the key hashes the source, the flags,
the compiler's identity, the CPU (``-march=native`` output differs between machines) and the
BLAS library. Files are written atomically (a private temporary file, then ``os.replace``), so
concurrent compilers of the same module, in threads or processes, never see a partial file.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from opgraph.backends.cpu.codegen import runtime
from opgraph.backends.cpu.config import CpuConfig, resolve_compiler
from opgraph.core.errors import OpgraphError

#: Optimisation flags. libmvec (glibc's vector math) replaces -ffast-math: the generated code
#: declares the math functions with ``__attribute__((simd))``, so loops vectorize while NaN,
#: Inf and signed zeros keep their IEEE meaning. -fwrapv gives integers two's-complement wrap.
#: The target (``-march``) comes from ``CpuConfig.target_flags()``.
CFLAGS: tuple[str, ...] = (
    "-O3",
    "-fno-math-errno",
    "-fwrapv",
    "-fno-semantic-interposition",
    "-fPIC",
    "-shared",
    "-std=gnu11",
    "-pipe",
    "-w",
)


class CompilerError(OpgraphError, RuntimeError):
    """The CPU backend could not compile generated code (no compiler, or a compiler failure)."""


@dataclass(frozen=True)
class Blas:
    """The BLAS the generated code links: scipy-openblas32 (symbols ``scipy_cblas_*``)."""

    include_dir: str
    lib_dir: str
    library: str

    @property
    def link_flags(self) -> tuple[str, ...]:
        return (f"-L{self.lib_dir}", f"-l{self.library}", f"-Wl,-rpath,{self.lib_dir}")

    @property
    def shared_object(self) -> str:
        return os.path.join(self.lib_dir, f"lib{self.library}.so")


@functools.cache
def blas() -> Blas:
    """scipy-openblas32's location; its thread count is set to 1 once (kernels parallelize
    BLAS calls themselves, so one OpenMP pool serves everything: no oversubscription)."""
    import scipy_openblas32

    info = Blas(
        scipy_openblas32.get_include_dir(),
        scipy_openblas32.get_lib_dir(),
        scipy_openblas32.get_library(),
    )
    library = ctypes.CDLL(info.shared_object, mode=ctypes.RTLD_GLOBAL)
    library.scipy_openblas_set_num_threads(1)
    return info


@functools.cache
def _cpu_signature() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = ("model name", "flags")
    lines = sorted({line for line in text.splitlines() if line.split(":")[0].strip() in wanted})
    return platform.machine() + "\n" + "\n".join(lines)


@functools.cache
def _compiler_identity(compiler: str) -> str:
    try:
        done = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except OSError as error:
        raise _no_compiler(compiler, str(error)) from None
    return compiler + "\n" + done.stdout.splitlines()[0] if done.stdout else compiler


def _no_compiler(compiler: str | None, detail: str = "") -> CompilerError:
    shown = f"{compiler!r}" if compiler else "gcc or cc on PATH"
    extra = f" ({detail})" if detail else ""
    return CompilerError(
        f"the CPU backend needs a C compiler and none was found (looked for {shown}){extra}; "
        "install gcc, pass CpuConfig(compiler=...), or use og.backend('INTERPRETER')"
    )


@dataclass(frozen=True)
class CompiledModule:
    """A loaded module and where it came from."""

    library: ctypes.CDLL
    path: Path
    key: str
    cache_hit: bool


_load_lock = threading.RLock()
_RUNTIMES: dict[tuple[str, str], ctypes.CDLL] = {}


class Toolchain:
    """Compiles and caches generated modules for one :class:`CpuConfig`."""

    def __init__(self, config: CpuConfig) -> None:
        self.config = config
        self.compiler = resolve_compiler(config.compiler)

    def require_compiler(self) -> str:
        if self.compiler is None:
            raise _no_compiler(self.config.compiler)
        return self.compiler

    def flags(self, needs: frozenset[str]) -> list[str]:
        """Compiler flags then libraries for a module that ``needs`` blas/mvec. Parallel
        loops go through the runtime's thread pool (``og_parallel``, resolved when the module
        is loaded), so no module links OpenMP: -fopenmp-simd only enables ``omp simd``."""
        target = self.config.target_flags()  # -march: after -O3, as it always was
        flags = [*CFLAGS[:1], *target, *CFLAGS[1:], "-fopenmp-simd", *self.config.extra_cflags]
        if "blas" in needs:
            flags += blas().link_flags
        if "mvec" in needs:
            flags += ["-lmvec", "-lm"]
        return flags

    def key(self, source: str, needs: frozenset[str]) -> str:
        compiler = self.require_compiler()
        parts = [
            source,
            " ".join(self.flags(needs)),
            _compiler_identity(compiler),
            _cpu_signature(),
        ]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]

    def runtime(self) -> ctypes.CDLL:
        """The runtime library (thread pool), built once per cache and loaded globally so
        that modules resolve ``og_parallel`` against it."""
        with _load_lock:
            key = (str(self.config.cache_dir), self.compiler or "")
            found = _RUNTIMES.get(key)
            if found is None:
                found = self._build_runtime()
                _RUNTIMES[key] = found
            return found

    def _build_runtime(self) -> ctypes.CDLL:
        flags = ["-O2", "-fPIC", "-shared", "-pthread", "-pipe", "-w"]
        parts = [runtime.SOURCE, " ".join(flags), _compiler_identity(self.require_compiler())]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]
        path = self.config.cache_dir / f"{key}-runtime.so"
        if not path.exists():
            self.config.cache_dir.mkdir(parents=True, exist_ok=True)
            self._run_compiler(runtime.SOURCE, path, flags, [])
        return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)

    def build(self, source: str, needs: frozenset[str] = frozenset()) -> CompiledModule:
        """Compile ``source`` (or reuse the cached module) and load it."""
        self.runtime()
        key = self.key(source, needs)
        cache = self.config.cache_dir
        path = cache / f"{key}.so"
        hit = path.exists()
        if not hit:
            cache.mkdir(parents=True, exist_ok=True)
            self._compile(source, path, needs)
        with _load_lock:
            library = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)  # after the runtime
        return CompiledModule(library, path, key, hit)

    def _compile(self, source: str, target: Path, needs: frozenset[str]) -> None:
        flags = self.flags(needs)
        libraries = [f for f in flags if f.startswith(("-l", "-L", "-Wl"))]
        options = [f for f in flags if f not in libraries]
        self._run_compiler(source, target, options, libraries)

    def _run_compiler(
        self, source: str, target: Path, options: list[str], libraries: list[str]
    ) -> None:
        compiler = self.require_compiler()
        directory = target.parent
        with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as work:
            c_file = Path(work) / f"{target.stem}.c"
            c_file.write_text(source)
            so_file = Path(work) / target.name
            command = [compiler, *options, str(c_file), "-o", str(so_file), *libraries]
            try:
                done = subprocess.run(command, capture_output=True, text=True, check=False)
            except OSError as error:
                raise _no_compiler(compiler, str(error)) from None
            if done.returncode != 0:
                raise CompilerError(
                    f"the C compiler failed on generated code (a CPU backend bug; please "
                    f"report it):\n{' '.join(command)}\n{done.stderr[-4000:]}"
                )
            os.replace(c_file, directory / f"{target.stem}.c")  # kept for reading
            os.replace(so_file, target)  # atomic: readers see no file or the whole one
