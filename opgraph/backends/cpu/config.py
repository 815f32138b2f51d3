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
* ``OPGRAPH_NUM_THREADS``: threads per parallel kernel (default: the number of CPUs, at most 8);
* ``OPGRAPH_CPU_ISA``: the instruction set generated code targets (``native``, ``avx2``,
  ``avx512``; default ``native``);
* ``OPGRAPH_BLAS_CORETYPE``: which OpenBLAS kernels the backend's BLAS loads with
  (:attr:`CpuConfig.blas_core`; default ``isa``: those of the generated code's instruction
  set; ``env``: OpenBLAS's own rule, ``OPENBLAS_CORETYPE`` when it is set; or a core name).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
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


#: Instruction sets the generated code can be compiled for: the compiler's target flags, and
#: the CPU flags (``/proc/cpuinfo``) a forced one needs (x86-64-v3 and v4 of the x86-64 psABI).
#: ``native`` is the CPU the compiler runs on. Kernels pick their register blocking from the
#: compiler's predefined macros (``__AVX512F__``, ``__AVX2__``), so each ISA gets its own.
ISA_FLAGS: dict[str, tuple[str, ...]] = {
    "native": ("-march=native",),
    "avx2": ("-march=x86-64-v3", "-mtune=native"),
    "avx512": ("-march=x86-64-v4", "-mtune=native"),
}
#: The OpenBLAS kernels (``OPENBLAS_CORETYPE``) of each forced instruction set; ``native``
#: has none: OpenBLAS detects the CPU, as ``-march=native`` does for the generated code.
BLAS_CORES: dict[str, str] = {"avx2": "Haswell", "avx512": "SkylakeX"}
_ISA_CPU_FLAGS: dict[str, frozenset[str]] = {
    "native": frozenset(),
    "avx2": frozenset({"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"}),
    "avx512": frozenset(
        {"avx", "avx2", "fma", "bmi2", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
    ),
}


class CpuConfigError(OpgraphError, ValueError):
    """A CPU backend configuration that cannot work here: an environment variable with a value
    it cannot use, or an unknown or unsupported ISA."""


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
        isa: the instruction set of the generated code: ``"native"`` (the CPU the compiler
            runs on), ``"avx2"`` (x86-64-v3) or ``"avx512"`` (x86-64-v4), forced even on a CPU
            that has more (to measure both paths on one machine). Part of the cache key.
        blas_core: the OpenBLAS kernels (an ``OPENBLAS_CORETYPE`` name) the backend's BLAS
            is loaded with, once per process: ``"isa"`` (default) those of :attr:`isa`
            (``avx2``: Haswell, ``avx512``: SkylakeX, ``native``: OpenBLAS's detection of
            this CPU, whatever ``OPENBLAS_CORETYPE`` says), ``"env"`` OpenBLAS's own rule
            (``OPENBLAS_CORETYPE`` when set), or a core name (``"Haswell"``, ...).
    """

    cache_dir: Path
    compiler: str | None
    num_threads: int = 2
    parallel_threshold: int = DEFAULT_PARALLEL_THRESHOLD
    optimize: bool = True
    extra_cflags: tuple[str, ...] = field(default=())
    cache_max: int = DEFAULT_CACHE_MAX
    isa: str = "native"
    blas_core: str = "isa"

    def __post_init__(self) -> None:
        if isinstance(self.cache_dir, (str, os.PathLike)) and not isinstance(self.cache_dir, Path):
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))  # a str is a path too
        if not isinstance(self.cache_dir, Path):
            raise CpuConfigError(
                "CpuConfig: cache_dir must be a path (str or os.PathLike), got "
                f"{type(self.cache_dir).__name__} {self.cache_dir!r}"
            )
        if self.isa not in ISA_FLAGS:
            raise CpuConfigError(
                f"CpuConfig: isa must be one of {', '.join(ISA_FLAGS)}, got {self.isa!r}"
            )

    def with_compiler(self, compiler: str | None) -> CpuConfig:
        """This configuration with another compiler (a path or a name on ``PATH``)."""
        return dataclasses.replace(self, compiler=compiler)

    def target_flags(self) -> tuple[str, ...]:
        """The compiler's target flags for :attr:`isa`.

        Raises:
            CpuConfigError: the CPU this runs on lacks the instruction set (code compiled for
                it would stop the process with an illegal instruction).
        """
        missing = sorted(_ISA_CPU_FLAGS[self.isa] - cpu_flags())
        if missing and self.isa != "native":
            raise CpuConfigError(
                f"CpuConfig(isa={self.isa!r}): this CPU ({platform.machine()}) lacks "
                f"{', '.join(missing)}; use isa='native' or one it supports"
            )
        return ISA_FLAGS[self.isa]

    def blas_coretype(self) -> str | None:
        """The ``OPENBLAS_CORETYPE`` to load the BLAS with: a core name, ``""`` for none
        (OpenBLAS detects the CPU), or None to leave the environment as it is."""
        if self.blas_core == "env":
            return None
        if self.blas_core != "isa":
            return self.blas_core
        return BLAS_CORES.get(self.isa, "")

    def panel_halves(self) -> bool:
        """Whether products by constant matrices store each 32-column panel as two 16-column
        halves (``TargetFeatures.panel_halves``): the layout AVX2's 6 x 16 tile streams
        (``codegen/dialect.py``, ``HALF_PANELS``), for code generated for AVX2 without
        AVX-512 (``isa="avx2"``, or ``"native"`` on such a CPU)."""
        if self.isa == "native":
            flags = cpu_flags()
            return "avx2" in flags and "fma" in flags and "avx512f" not in flags
        return self.isa == "avx2"

    def vector_lanes(self) -> int:
        """The f32 lanes of the generated kernels' vectors (``TargetFeatures.vector_lanes``):
        8 where they are AVX2's (:meth:`panel_halves`), else 16 (AVX-512, and the portable
        build's 64-byte vector types)."""
        return 8 if self.panel_halves() else 16


def _cpuinfo_field(name: str) -> str:
    """The first CPU's ``name`` field in ``/proc/cpuinfo`` ("" where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        if line.split(":")[0].strip() == name:
            return line.split(":", 1)[1].strip()
    return ""


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where there is none, or off x86)."""
    return frozenset(_cpuinfo_field("flags").split())


@functools.cache
def cpu_vendor() -> str:
    """The CPU's vendor as it reports it (``GenuineIntel``, ``AuthenticAMD``; "" where
    ``/proc/cpuinfo`` has none)."""
    return _cpuinfo_field("vendor_id")


#: The L2 cache size assumed where the CPU does not say (Zen 5's and Sapphire Rapids' per core
#: are 1 and 2 MiB; Zen 4's 1 MiB).
DEFAULT_L2_BYTES = 1 << 20
#: The L3 cache size assumed where the CPU does not say (a Zen 4 or Zen 5 CCD's 32 MiB;
#: Sapphire Rapids' 1.875 MiB a core).
DEFAULT_L3_BYTES = 32 << 20
_SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20}


def _cache_index(level: str) -> tuple[Path, int] | None:
    """The first core's data (or unified) cache of ``level``: its sysfs directory
    (``cpu0/cache/index*``) and size in bytes; None where none is listed or its size does not
    read as a number of bytes, KiB or MiB."""
    for index in sorted(_SYSFS_CACHES.glob("index*")):
        try:
            found_level, kind, size = (
                (index / name).read_text().strip() for name in ("level", "type", "size")
            )
        except OSError:
            continue
        found = re.fullmatch(r"(\d+)([KM]?)", size)
        if found_level == level and kind in ("Data", "Unified") and found and int(found[1]) > 0:
            return index, int(found[1]) * _SIZE_UNITS[found[2]]
    return None


def _cache_bytes(level: str, default: int) -> int:
    """The size of :func:`_cache_index`'s cache of ``level``; ``default`` where it has none."""
    found = _cache_index(level)
    return default if found is None else found[1]


@functools.cache
def l2_cache_bytes() -> int:
    """The first core's level-2 cache in bytes (:data:`DEFAULT_L2_BYTES` where unknown)."""
    return _cache_bytes("2", DEFAULT_L2_BYTES)


@functools.cache
def l3_cache_bytes() -> int:
    """The first core's level-3 cache in bytes (:data:`DEFAULT_L3_BYTES` where unknown)."""
    return _cache_bytes("3", DEFAULT_L3_BYTES)


#: The most L3 a listed CPU is counted to have to itself (:func:`l3_held_bytes`): above every
#: real core's share (Zen 4 and 5 X3D: 96 MiB over 8 cores, 12 MiB; Zen 5: 4 MiB; Xeons
#: 1.875-5 MiB). An L3 of more a CPU sharing it is a socket's seen from a guest given a few of
#: its cores (the seventeenth session's KVM guest: 260 MiB over 2 CPUs), the rest of it filled
#: by other tenants' data.
L3_BYTES_PER_CPU = 16 << 20


def _cpu_count(cpu_list: str) -> int:
    """How many CPUs a sysfs CPU list (``0-1,4,6-7``) names."""
    count = 0
    for part in cpu_list.split(","):
        first, _, last = part.partition("-")
        count += int(last or first) - int(first) + 1
    return count


@functools.cache
def l3_held_bytes() -> int:
    """The L3 bytes a module can count on keeping between its calls: :func:`l3_cache_bytes`,
    at most :data:`L3_BYTES_PER_CPU` for each CPU that sysfs lists sharing it
    (``shared_cpu_list``; not capped where it lists none or cannot be read)."""
    found = _cache_index("3")
    if found is None:
        return DEFAULT_L3_BYTES
    index, size = found
    try:
        sharing = _cpu_count((index / "shared_cpu_list").read_text().strip())
    except (OSError, ValueError):
        return size
    return min(size, L3_BYTES_PER_CPU * max(sharing, 1))


#: Precisions ``CpuBackend.compile(fn, precision=...)`` accepts, and the CPU flags each needs
#: (any one of them): bf16 runs ``vdpbf16ps`` (AVX512-BF16; every CPU with AMX-BF16 has it too).
PRECISIONS: dict[str, frozenset[str]] = {
    "f32": frozenset(),
    "bf16": frozenset({"avx512_bf16"}),
}


def check_precision(precision: str, isa: str) -> None:
    """Refuse a ``precision`` that is unknown or that this CPU (or the forced ``isa``) cannot run.

    Raises:
        CpuConfigError: saying what was asked, what is missing, and what works instead.
    """
    if precision not in PRECISIONS:
        raise CpuConfigError(
            f"compile(precision={precision!r}): expected one of "
            f"{', '.join(repr(p) for p in PRECISIONS)}"
        )
    needed = PRECISIONS[precision]
    if needed and not needed & cpu_flags():
        raise CpuConfigError(
            f"compile(precision={precision!r}) needs a CPU with {' or '.join(sorted(needed))} "
            f"(bf16 dot products, vdpbf16ps); this CPU ({platform.machine()}) has none of them; "
            "use precision='f32'"
        )
    if needed and isa == "avx2":
        raise CpuConfigError(
            f"compile(precision={precision!r}) generates AVX-512 code, but CpuConfig(isa='avx2') "
            "forces AVX2; use isa='native' or 'avx512', or precision='f32'"
        )


def supports_isa(isa: str) -> bool:
    """Whether code compiled for ``isa`` runs on this CPU."""
    return isa == "native" or (isa in _ISA_CPU_FLAGS and _ISA_CPU_FLAGS[isa] <= cpu_flags())


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
    1024). Raises CpuConfigError naming ``name`` otherwise."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise CpuConfigError(
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


def _default_isa() -> str:
    return os.environ.get("OPGRAPH_CPU_ISA") or "native"


def _default_blas_core() -> str:
    return os.environ.get("OPGRAPH_BLAS_CORETYPE") or "isa"


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
        isa=_default_isa(),
        blas_core=_default_blas_core(),
    )
