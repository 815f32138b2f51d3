"""Configuration of the CPU backend: the one module of it that reads environment variables.

Everything else takes a :class:`CpuConfig` explicitly. ``default_config()`` builds one from the
environment once per process:

* ``OPGRAPH_CC``: the C compiler (a path, or a command looked up on ``PATH``). When it is set,
  it is the only compiler tried: one that does not exist makes the CPU backend unavailable
  with a message naming the variable (never a silent fall back to ``gcc``);
* ``CC``: the C compiler when ``OPGRAPH_CC`` is not set (skipped when it is not found, as
  build tools do), then ``gcc``, then ``cc``;
* ``OPGRAPH_CACHE_DIR`` (or its older name ``OPGRAPH_CPU_CACHE_DIR``): where compiled modules
  are cached (default ``$XDG_CACHE_HOME/opgraph/cpu`` or ``~/.cache/opgraph/cpu``);
* ``OPGRAPH_CACHE_MAX``: the cache's size limit in bytes, with an optional K/M/G/T suffix
  (powers of 1024; default 1G);
* ``OPGRAPH_NUM_THREADS``: threads per parallel kernel (default: the number of CPUs, at most 8).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from opgraph.core.errors import OpgraphError

#: Work (elements times per-element cost) below which a kernel runs serially: an OpenMP region
#: costs about a microsecond, a serial element about a nanosecond.
DEFAULT_PARALLEL_THRESHOLD = 32768

#: The compile cache's default size limit: least recently used modules are evicted above it.
DEFAULT_CACHE_MAX = 1 << 30


class ConfigError(OpgraphError, ValueError):
    """An environment variable of the CPU backend has a value it cannot use."""


@dataclass(frozen=True)
class CpuConfig:
    """How the CPU backend compiles and runs.

    Attributes:
        cache_dir: directory of the compiled-module cache (created on first use).
        compiler: the C compiler command (a name looked up on ``PATH`` or a path); None means
            none was found, and compiling raises a clear error.
        num_threads: threads used by parallel kernels and BLAS calls.
        parallel_threshold: work below which kernels run on one thread.
        optimize: run the default optimization pipeline (``opgraph.passes.optimize``) when it
            exists.
        extra_cflags: appended to the compiler flags (part of the cache key).
        cache_max: the compile cache's size limit in bytes (least recently used modules are
            evicted above it).
    """

    cache_dir: Path
    compiler: str | None
    num_threads: int = 2
    parallel_threshold: int = DEFAULT_PARALLEL_THRESHOLD
    optimize: bool = True
    extra_cflags: tuple[str, ...] = field(default=())
    cache_max: int = DEFAULT_CACHE_MAX

    def with_compiler(self, compiler: str | None) -> CpuConfig:
        """This configuration with another compiler (a path or a name on ``PATH``)."""
        return dataclasses.replace(self, compiler=compiler)


def resolve_compiler(name: str | None) -> str | None:
    """The full path of compiler ``name`` (a path or a command on ``PATH``), or None."""
    if not name:
        return None
    if os.sep in name:
        return name if os.access(name, os.X_OK) and os.path.isfile(name) else None
    return shutil.which(name)


def _default_cache_dir() -> Path:
    explicit = os.environ.get("OPGRAPH_CACHE_DIR") or os.environ.get("OPGRAPH_CPU_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    return root / "opgraph" / "cpu"


#: How to get a C compiler, for the messages of an unavailable CPU backend.
INSTALL_HINT = (
    "install one (Debian/Ubuntu: apt-get install gcc; Fedora/RHEL: dnf install gcc; Alpine: "
    "apk add gcc musl-dev) or set OPGRAPH_CC to a C compiler's path; og.backend('INTERPRETER') "
    "runs without one"
)


@functools.cache
def compiler_problem() -> str:
    """Why the CPU backend has no C compiler here ("" when it has one): the message names
    ``OPGRAPH_CC`` and its value when that is what points at nothing."""
    explicit = os.environ.get("OPGRAPH_CC")
    if explicit and resolve_compiler(explicit) is None:
        return (
            f"OPGRAPH_CC={explicit!r} names no executable C compiler (neither an executable "
            "file nor a command on PATH); point it at one (e.g. OPGRAPH_CC=gcc) or unset it"
        )
    if _default_compiler() is None:
        return f"no C compiler found (looked for $CC, gcc and cc on PATH); {INSTALL_HINT}"
    return ""


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_size(text: str, name: str = "OPGRAPH_CACHE_MAX") -> int:
    """Bytes from ``"1073741824"``, ``"500M"``, ``"2G"``, ``"1.5GiB"`` (K/M/G/T are powers of
    1024). Raises ConfigError naming ``name`` otherwise."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise ConfigError(
            f"{name}={text!r} is not a size: expected bytes or a number with a K, M, G or T "
            "suffix, e.g. 500M or 2G"
        )
    number, unit = match.groups()
    return int(float(number) * 1024 ** "_kmgt".index(unit.lower() or "_"))


def _default_cache_max() -> int:
    raw = os.environ.get("OPGRAPH_CACHE_MAX")
    return parse_size(raw) if raw else DEFAULT_CACHE_MAX


def _default_compiler() -> str | None:
    explicit = os.environ.get("OPGRAPH_CC")
    if explicit:  # the user's explicit choice: no fall back (compiler_problem says why)
        return resolve_compiler(explicit)
    for name in (os.environ.get("CC"), "gcc", "cc"):
        found = resolve_compiler(name)
        if found:
            return found
    return None


def _default_threads() -> int:
    explicit = os.environ.get("OPGRAPH_NUM_THREADS")
    if explicit and explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    return max(1, min(os.cpu_count() or 1, 8))


@functools.cache
def default_config() -> CpuConfig:
    """The configuration ``og.backend("CPU")`` uses, read from the environment once."""
    return CpuConfig(
        cache_dir=_default_cache_dir(),
        compiler=_default_compiler(),
        num_threads=_default_threads(),
        cache_max=_default_cache_max(),
    )
