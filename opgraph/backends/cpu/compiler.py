"""The C toolchain: compile generated sources once, cache the modules on disk, load them.

A module is cached under ``<cache_dir>/<key>.so`` where the key hashes the source, the flags,
the compiler's identity, the CPU (``-march=native`` output differs between machines) and the
BLAS library. The cache itself — directory checks, integrity records, atomic installs,
repair, fallback and eviction — is :mod:`opgraph.backends.cpu.cache`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from opgraph.backends.cpu import host_team
from opgraph.backends.cpu.cache import ModuleCache, module_cache
from opgraph.backends.cpu.codegen import kernels, runtime
from opgraph.backends.cpu.config import CpuConfig, resolve_compiler
from opgraph.backends.cpu.gather_tuning import gather_flags
from opgraph.core.errors import OpgraphError
from opgraph.runtime.backend import Progress

log = logging.getLogger("opgraph.cpu")

#: Optimisation flags. libmvec (glibc's vector math) replaces -ffast-math: the generated code
#: declares the math functions with ``__attribute__((simd))``, so loops vectorize while NaN,
#: Inf and signed zeros keep their IEEE meaning. -fwrapv gives integers two's-complement wrap.
#: -fno-trapping-math (no value changes: opgraph never reads the floating-point exception
#: flags) lets GCC if-convert selects after a division or a comparison, so loops that clamp
#: or saturate (every quantize of a QDQ model) vectorize.
#: The target (``-march``) comes from ``CpuConfig.target_flags()``.
CFLAGS: tuple[str, ...] = (
    "-O3",
    "-fno-math-errno",
    "-fno-trapping-math",
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
    core: str  #: the OpenBLAS kernels it runs (``scipy_openblas_get_corename``)

    @property
    def link_flags(self) -> tuple[str, ...]:
        return (f"-L{self.lib_dir}", f"-l{self.library}", f"-Wl,-rpath,{self.lib_dir}")

    @property
    def shared_object(self) -> str:
        return os.path.join(self.lib_dir, f"lib{self.library}.so")


_BLAS_LOAD = threading.Lock()


@functools.cache
def blas(coretype: str | None = None) -> Blas:
    """scipy-openblas32, loaded once per process with the ``OPENBLAS_CORETYPE`` ``coretype``
    (:meth:`CpuConfig.blas_coretype`: a name, ``""`` for OpenBLAS's detection of this CPU,
    None for the environment as it is; OpenBLAS reads it when the library is loaded, so the
    variable is set for that moment only). Its thread count is set to 1 (kernels parallelize
    BLAS calls themselves, so one pool serves everything: no oversubscription)."""
    with _BLAS_LOAD, _environment("OPENBLAS_CORETYPE", coretype):
        # deferred: scipy_openblas32 is set up only when a kernel first needs BLAS; importing
        # it loads the library (so the variable must be set around the import too)
        import scipy_openblas32

        where = (
            scipy_openblas32.get_include_dir(),
            scipy_openblas32.get_lib_dir(),
            scipy_openblas32.get_library(),
        )
        library = ctypes.CDLL(os.path.join(where[1], f"lib{where[2]}.so"), ctypes.RTLD_GLOBAL)
    library.scipy_openblas_set_num_threads(1)
    library.scipy_openblas_get_corename.restype = ctypes.c_char_p
    info = Blas(*where, core=library.scipy_openblas_get_corename().decode())
    if coretype and info.core.lower() != coretype.lower():
        log.info(
            "OpenBLAS runs its %s kernels (%s asked: it was loaded before)", info.core, coretype
        )
    return info


@contextlib.contextmanager
def _environment(name: str, value: str | None) -> Iterator[None]:
    """``name`` set to ``value`` (``""``: removed; None: left alone) for the block."""
    before = os.environ.get(name)
    if value is not None:
        if value:
            os.environ[name] = value
        else:
            os.environ.pop(name, None)
    try:
        yield
    finally:
        if value is not None:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before


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


_load_lock = threading.Lock()
#: The per-cache libraries this process has loaded (runtime, kernel units), by identity.
_LOADED: dict[tuple[str, ...], ctypes.CDLL] = {}
#: One lock per library identity: two threads never build the same library at once, while
#: different libraries build side by side.
_BUILDING: dict[tuple[str, ...], threading.Lock] = {}


def _load_once(identity: tuple[str, ...], make: Callable[[], ctypes.CDLL]) -> ctypes.CDLL:
    """The library ``identity`` names, made (built or loaded from the cache) at most once per
    process."""
    with _load_lock:
        found = _LOADED.get(identity)
        if found is not None:
            return found
        lock = _BUILDING.setdefault(identity, threading.Lock())
    with lock:
        found = _LOADED.get(identity)
        if found is None:
            found = make()
            with _load_lock:
                _LOADED[identity] = found
        return found


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
        flags = [
            *CFLAGS[:1],
            *target,
            *CFLAGS[1:],
            "-fopenmp-simd",
            *gather_flags(self.compiler, self._target()),
        ]
        flags += self.config.extra_cflags
        if "blas" in needs:
            flags += blas(self.config.blas_coretype()).link_flags
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
        identity = ("runtime", str(self.config.cache_dir), self.compiler or "")
        return _load_once(identity, self._build_attached_runtime)

    def _build_attached_runtime(self) -> ctypes.CDLL:
        runtime = self._build_runtime()
        host_team.attach(runtime)  # a host framework's OpenMP team, once declared
        return runtime

    @property
    def cache(self) -> ModuleCache:
        return module_cache(self.config.cache_dir, self.config.cache_max)

    def _build_runtime(self) -> ctypes.CDLL:
        flags = ["-O2", "-fPIC", "-shared", "-pthread", "-pipe", "-w"]
        parts = [runtime.SOURCE, " ".join(flags), _compiler_identity(self.require_compiler())]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40] + "-runtime"

        def build(work: Path, name: str) -> Path:
            return self._run_compiler(runtime.SOURCE, work, name, flags, [])

        library, _, _ = self.cache.load(key, build, ctypes.RTLD_GLOBAL)
        return library

    def kernel_unit(self, helper: str) -> ctypes.CDLL:
        """The library unit of the generic kernel ``helper``
        (:mod:`~opgraph.backends.cpu.codegen.kernels`) for this configuration's target
        flags, built once per cache and loaded globally so that modules resolve it."""
        target = self._target()
        identity = ("kernel", str(self.config.cache_dir), self.compiler or "", helper)
        return _load_once((*identity, kernels.suffix(helper, target)), lambda: self._unit(helper))

    def kernels(self, helpers: Iterable[str] | None = None) -> list[ctypes.CDLL]:
        """The library units of ``helpers`` (default: every unit this configuration's target
        can call, :func:`kernels.target_units`), those not yet loaded built side by side."""
        if helpers is None:
            names = list(kernels.target_units(self.config.panel_halves()))
        else:
            names = list(helpers)
        with ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="opgraph-kernels") as pool:
            return list(pool.map(self.kernel_unit, names))

    def _target(self) -> tuple[str, ...]:
        return (*self.config.target_flags(), *self.config.extra_cflags)

    def _unit(self, helper: str) -> ctypes.CDLL:
        source = kernels.library_source(helper, self._target())

        def build(work: Path, name: str) -> Path:
            return self._run_compiler(source, work, name, self.flags(frozenset()), [])

        library, _, _ = self.cache.load(self.unit_key(helper), build, ctypes.RTLD_GLOBAL)
        return library

    def unit_key(self, helper: str) -> str:
        """The cache key of ``helper``'s library unit (``<hash>-kernel-<helper>``)."""
        compiler = _compiler_identity(self.require_compiler())
        parts = [kernels.library_source(helper, self._target()), " ".join(self.flags(frozenset()))]
        parts += [compiler, _cpu_signature()]
        digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:40]
        return f"{digest}-kernel-{helper}"

    def _libraries(self, needs: frozenset[str]) -> list[Callable[[], ctypes.CDLL]]:
        """What a module with ``needs`` loads first: the runtime, then its kernel units."""
        units = [functools.partial(self.kernel_unit, h) for h in kernels.units_needed(needs)]
        return [self.runtime, *units]

    def build(
        self,
        source: str,
        needs: frozenset[str] = frozenset(),
        units: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> CompiledModule:
        """Compile ``source`` (or reuse the cached module) and load it.

        Args:
            source: the module's C source (the cache key hashes it).
            needs: "blas", "mvec": what to link; "kernel:<helper>": load that generic kernel
                unit first (:meth:`kernel_unit`; a bare "kernels": every unit). The runtime
                and the units not built yet compile beside the module's own compile, in
                parallel compiler processes; the module is mapped once they are loaded.
            units: the translation units ``source`` is made of, compiled in parallel and
                linked (default: ``source`` as one unit).
            progress: called as ``progress(0, n)`` and then once per compiled unit.
        """
        key = self.key(source, needs)
        flags = self.flags(needs)
        libraries = [f for f in flags if f.startswith(("-l", "-L", "-Wl"))]
        options = [f for f in flags if f not in libraries]
        parts = tuple(units) or (source,)
        first = self._libraries(needs)
        with ThreadPoolExecutor(len(first), thread_name_prefix="opgraph-libraries") as beside:
            ready = [beside.submit(make) for make in first]
            loaded = functools.partial(_settle, ready)  # before the module is mapped

            def build(work: Path, name: str) -> Path:
                log.info("compile cache miss: %s", name)
                return self._run_compiler(source, work, name, options, libraries, parts, progress)

            try:
                library, path, hit = self.cache.load(key, build, ctypes.RTLD_LOCAL, loaded)
            finally:
                _settle(ready)  # a library's failure is raised, not lost
        if hit:
            log.debug("compile cache hit: %s", path)
        return CompiledModule(library, path, key, hit)

    def _run_compiler(
        self,
        source: str,
        work: Path,
        name: str,
        options: list[str],
        libraries: list[str],
        units: tuple[str, ...] = (),
        progress: Progress | None = None,
    ) -> Path:
        """Compile ``source`` into ``work/<name>.so`` (beside ``work/<name>.c``), from its
        ``units`` compiled in parallel when there are several; gcc's own temporary files go to
        ``work`` too, so a killed compile leaves nothing elsewhere."""
        compiler = self.require_compiler()
        c_file = work / f"{name}.c"
        c_file.write_text(source)
        so_file = work / f"{name}.so"
        started = time.perf_counter()
        if len(units) > 1:
            self._compile_units(units, work, so_file, options, libraries, progress)
        else:
            if progress is not None:
                progress(0, 1)
            _run([compiler, *options, str(c_file), "-o", str(so_file), *libraries], work)
            if progress is not None:
                progress(1, 1)
        log.info(
            "C compiler built %s from %d unit(s) in %.2f s",
            so_file.name,
            max(1, len(units)),
            time.perf_counter() - started,
        )
        return so_file

    def _compile_units(
        self,
        units: tuple[str, ...],
        work: Path,
        so_file: Path,
        options: list[str],
        libraries: list[str],
        progress: Progress | None,
    ) -> None:
        """Compile each unit to an object file, ``config.num_threads`` at a time, reporting
        each finished one to ``progress``; then link them into ``so_file``."""
        compiler = self.require_compiler()
        objects = [work / f"unit{i}.o" for i in range(len(units))]
        commands = []
        for i, (unit, obj) in enumerate(zip(units, objects, strict=True)):
            c_file = work / f"unit{i}.c"
            c_file.write_text(unit)
            commands.append([compiler, *options, "-c", str(c_file), "-o", str(obj)])
        if progress is not None:
            progress(0, len(units))
        jobs = max(1, min(self.config.num_threads, len(units)))
        with ThreadPoolExecutor(jobs, thread_name_prefix="opgraph-cc") as pool:
            running = [pool.submit(_timed_run, command, work) for command in commands]
            for done, future in enumerate(as_completed(running), start=1):
                seconds = future.result()  # the first failure raises; the rest still finish
                log.debug("C compiler: %d of %d units done (%.2f s)", done, len(units), seconds)
                if progress is not None:
                    progress(done, len(units))
        _run([compiler, *options, *map(str, objects), "-o", str(so_file), *libraries], work)


def _settle(futures: list[Future[ctypes.CDLL]]) -> None:
    """Wait for every one of ``futures``; raise the first failure."""
    for future in futures:
        future.result()


def _timed_run(command: list[str], work: Path) -> float:
    started = time.perf_counter()
    _run(command, work)
    return time.perf_counter() - started


def _run(command: list[str], work: Path) -> None:
    """Run the C compiler with its temporary files in ``work``; a failure is an OSError when
    the file system is at fault (a full disk), else a CompilerError with command and output."""
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "TMPDIR": str(work)},
        )
    except OSError as error:
        raise _no_compiler(command[0], str(error)) from None
    if done.returncode != 0:
        _raise_for_filesystem(done.stderr, work)
        raise CompilerError(
            f"the C compiler failed on generated code (a CPU backend bug; please "
            f"report it):\n{' '.join(command)}\n{done.stderr[-4000:]}"
        )


#: Compiler messages that mean the disk, not the code, is the problem.
_FILESYSTEM_ERRORS = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Read-only file system": errno.EROFS,
}


def _raise_for_filesystem(stderr: str, work: Path) -> None:
    """Raise OSError when a failed compile was the file system's fault (a full disk), so the
    cache falls back to another directory and no one is told about a backend bug."""
    for message, code in _FILESYSTEM_ERRORS.items():
        if message in stderr:
            raise OSError(code, f"the C compiler could not write its output: {message}")
    try:
        free = shutil.disk_usage(work).free
    except OSError:
        return
    if free < 1 << 20:
        raise OSError(errno.ENOSPC, f"the C compiler failed with {free} bytes free on the disk")
