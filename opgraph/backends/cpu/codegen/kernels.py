"""Generic kernels compiled once per cache and instruction set, shared by every module.

The register-blocked panel GEMM for products by constant matrices (``og_gemm_panels``:
:mod:`~opgraph.backends.cpu.codegen.dialect`) costs the C compiler about 0.4 s at -O3, most of
a small model's compile, and GCC used to clone it per module for its callers' constant sizes
without measurable gain. It takes every size as an argument, so it is compiled once into a
small library (flags and ``-march`` of the modules), loaded with ``RTLD_GLOBAL`` before the
modules that call it, like the thread pool's runtime. The panel GEMV (0.04 s) stays in the
modules. The 8-bit products of quantized models (``og_q8_gemm``, ``og_q8_conv_gemm``:
:mod:`~opgraph.backends.cpu.codegen.int8`, 12 register-blocked micro-kernels each, 3.5 s and
1.2 s of GCC) are served the same way.

**One library unit per helper, built on demand.** Each library helper is its own translation
unit and its own cached library (``<hash>-kernel-<helper>.so``), built the first time a module
that calls it is compiled (beside that module's own compile, in parallel compiler processes)
and loaded before it. A float model never waits for the 8-bit kernels: in an empty cache the
demo MLP builds only the runtime and ``gemm_panels`` (0.4 s of GCC), where the one library of
all three cost 5 s (2026-11-26). A new expensive helper that takes its sizes as arguments
joins with :func:`library_helper` beside its ``@dialect.helper`` registration; modules that
call it then declare it instead of compiling it, and it lands in its own unit.

The exported names carry a hash of the unit's source and target flags
(``og_gemm_panels_<hash>``): a module calls exactly the build it was generated for, and
modules of two instruction sets (``CpuConfig.isa``) in one process never share one. A module
refers to them through ``#define og_gemm_panels og_gemm_panels_<hash>`` and an ``extern``
declaration, so the step emitters keep writing ``og_gemm_panels(...)``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable

from opgraph.backends.cpu.codegen import dialect, winograd_f4
from opgraph.backends.cpu.codegen import int8 as _int8  # noqa: F401 - registers q8_* helpers
from opgraph.core.errors import RegistryError

#: Helpers (``dialect.HELPERS`` names) served by library units instead of each module's code:
#: the C functions each one defines and exports, with their prototypes (``{name}`` standing
#: for the exported symbol). Grown by :func:`library_helper`; each helper is one unit.
LIBRARY_HELPERS: dict[str, dict[str, str]] = {}

#: The prefix of a module's ``needs`` entry naming a library unit it calls
#: (``"kernel:gemm_panels"``); :func:`needs_of` writes them, :func:`units_needed` reads them.
NEED_PREFIX = "kernel:"


def library_helper(name: str, prototypes: str | dict[str, str]) -> None:
    """Serve the helper ``name`` (registered with ``@dialect.helper``) from its own library
    unit. ``prototypes``: the C declaration of each function its code defines as ``static
    void <function>(...)`` and modules call, by function name, with ``{name}`` for the
    exported symbol; a single declaration is that of ``og_<name>``."""
    functions = {f"og_{name}": prototypes} if isinstance(prototypes, str) else dict(prototypes)
    for function, prototype in functions.items():
        if "{name}" not in prototype:
            raise RegistryError(
                f"the prototype of {function} (library helper {name!r}) must contain {{name}}"
            )
    LIBRARY_HELPERS[name] = functions


_PANELS = (
    "void {name}(const float* restrict A, long lda, const float* restrict P, "
    "float* restrict C, long ldc, long M, long K, long n0, long n1);"
)
library_helper("gemm_panels", _PANELS)
# The same function over half panels (AVX2 builds: dialect.HALF_PANELS), and without the
# next-slice prefetch for modules whose panels stay in L3 (dialect.RESIDENT_BYTES).
library_helper("gemm_half_panels", {"og_gemm_panels": _PANELS})
library_helper("gemm_panels_resident", {"og_gemm_panels": _PANELS})
library_helper(  # codegen/int8.py
    "q8_gemm",
    "void {name}(const uint8_t* restrict A, long lda, const int8_t* restrict P, "
    "int32_t* restrict C, long ldc, long M, long K, long n0, long n1, "
    "const int32_t* restrict col, uint32_t flip);",
)
library_helper(
    "q8_conv_gemm",
    "void {name}(const int8_t* restrict W, const uint8_t* restrict B, long pitch, "
    "int32_t* restrict Y, long ldy, long O, long quads, long cols, "
    "const int32_t* restrict row);",
)
# Not the bf16 GEMMs (``gemm_bf16``: og_gemm_bf16_panels and og_sgemm_bf16, 1.8 s of gcc per
# bf16 module): served from a unit they ran 0.5-2 % slower than compiled into the module
# (BERT layer and ResNet-18 in bf16, one thread, alternating, 2026-11-26).
for _helper, _prototype in winograd_f4.PROTOTYPES.items():  # F(4x4, 3x3) transforms
    library_helper(_helper, _prototype)


@functools.cache
def _definition(helper: str) -> str:
    """The helper's code with its ``static`` dropped (exported), under its plain name."""
    code = dialect.HELPERS[helper]()
    for function in LIBRARY_HELPERS[helper]:
        exported = code.replace(f"static void {function}(", f"void {function}(")
        if exported == code:
            raise RegistryError(f"library helper {helper!r} defines no 'static void {function}('")
        code = exported
    return dialect.PRELUDE + "\n\n" + code + "\n"


@functools.cache
def suffix(helper: str, target_flags: tuple[str, ...]) -> str:
    """The hash the exported name of ``helper``'s unit for ``target_flags`` carries."""
    text = _definition(helper) + "\0" + " ".join(target_flags)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def symbol(function: str, helper: str, target_flags: tuple[str, ...]) -> str:
    """The exported name of ``function`` (of ``helper``) in its unit for ``target_flags``."""
    return f"{function}_{suffix(helper, target_flags)}"


def _renames(helper: str, target_flags: tuple[str, ...]) -> list[str]:
    return [f"#define {f} {symbol(f, helper, target_flags)}" for f in LIBRARY_HELPERS[helper]]


def library_source(helper: str, target_flags: tuple[str, ...]) -> str:
    """The C source of ``helper``'s unit for ``target_flags`` (renamed by macros)."""
    return "\n".join(_renames(helper, target_flags)) + "\n" + _definition(helper)


def declarations(helpers: Iterable[str], target_flags: tuple[str, ...]) -> str:
    """What a module that calls ``helpers`` (library helpers among them) needs to see."""
    lines = []
    for helper in helpers:
        for function, prototype in LIBRARY_HELPERS.get(helper, {}).items():
            name = symbol(function, helper, target_flags)
            lines.append(f"#define {function} {name}")
            lines.append("extern " + prototype.format(name=name))
    return "\n".join(lines)


def needs_of(helpers: Iterable[str]) -> set[str]:
    """The ``needs`` entries of a module calling ``helpers``: ``"kernels"`` and one
    ``"kernel:<helper>"`` per library unit (none when it calls no library helper)."""
    units = {NEED_PREFIX + h for h in helpers if h in LIBRARY_HELPERS}
    return units | {"kernels"} if units else set()


#: Library units of one panel layout (``CpuConfig.panel_halves()``): whether each serves the
#: half-panel layout. A target builds only its own layout's unit by default (the half-panel
#: unit refuses to compile for any other target); units not named serve every target.
LAYOUT_UNITS = {"gemm_panels": False, "gemm_panels_resident": False, "gemm_half_panels": True}


def target_units(panel_halves: bool) -> tuple[str, ...]:
    """Every library unit a target of this panel layout can call, sorted: what a cache
    share prebuilds (``Toolchain.kernels()``)."""
    return tuple(
        h for h in sorted(LIBRARY_HELPERS) if LAYOUT_UNITS.get(h, panel_halves) == panel_halves
    )


def units_needed(needs: Iterable[str]) -> tuple[str, ...]:
    """The library units a module with ``needs`` calls, sorted (for a bare ``"kernels"``,
    as modules generated before the split declared, every unit of the whole-panel layout
    they were generated for)."""
    needs = set(needs)
    named = sorted(n[len(NEED_PREFIX) :] for n in needs if n.startswith(NEED_PREFIX))
    unknown = [h for h in named if h not in LIBRARY_HELPERS]
    if unknown:
        raise RegistryError(f"a module needs unknown library units {unknown}")
    if not named and "kernels" in needs:
        return target_units(panel_halves=False)
    return tuple(named)
