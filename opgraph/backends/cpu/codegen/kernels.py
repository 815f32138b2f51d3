"""Generic kernels compiled once per cache and instruction set, shared by every module.

The register-blocked panel GEMM for products by constant matrices (``og_gemm_panels``:
:mod:`~opgraph.backends.cpu.codegen.dialect`) costs the C compiler about 0.5 s at -O3, most of
a small model's compile (the demo MLP's 17 KB module: 0.59 s of CPU, 0.48 s of it this
helper), and GCC used to clone it per module for its callers' constant sizes without
measurable gain. It takes every size as an argument, so it is compiled once into a small
library (flags and ``-march`` of the modules), loaded with ``RTLD_GLOBAL`` before the modules
that call it, like the thread pool's runtime. The panel GEMV (0.04 s) stays in the modules:
a model whose only products by constants are GEMVs (ResNet-18's classifier at batch 1) needs
no library. The 8-bit products of quantized models (``og_q8_gemm``, ``og_q8_conv_gemm``:
:mod:`~opgraph.backends.cpu.codegen.int8`, 24 register-blocked micro-kernels, several seconds
of GCC per module) are served the same way.

The exported names carry a hash of the library's source and target flags
(``og_gemm_panels_<hash>``): a module calls exactly the build it was generated for, and
modules of two instruction sets (``CpuConfig.isa``) in one process never share one. A module
refers to them through ``#define og_gemm_panels og_gemm_panels_<hash>`` and an ``extern``
declaration, so the step emitters keep writing ``og_gemm_panels(...)``.
"""

from __future__ import annotations

import functools
import hashlib

from opgraph.backends.cpu.codegen import dialect, winograd_f4
from opgraph.backends.cpu.codegen import int8 as _int8  # noqa: F401 - registers q8_* helpers

#: Helpers (``dialect.HELPERS`` names) served by the library instead of each module's code.
LIBRARY_HELPERS: tuple[str, ...] = (
    "gemm_panels",
    "q8_gemm",
    "q8_conv_gemm",
    "wino4_in",
    "wino4_out",
)

#: Their C prototypes, ``{name}`` standing for the exported symbol.
_PROTOTYPES = {
    "gemm_panels": (
        "void {name}(const float* restrict A, long lda, const float* restrict P, "
        "float* restrict C, long ldc, long M, long K, long n0, long n1);"
    ),
    "q8_gemm": (  # codegen/int8.py
        "void {name}(const uint8_t* restrict A, long lda, const int8_t* restrict P, "
        "int32_t* restrict C, long ldc, long M, long K, long n0, long n1, "
        "const int32_t* restrict col, uint32_t flip);"
    ),
    "q8_conv_gemm": (
        "void {name}(const int8_t* restrict W, const uint8_t* restrict B, long pitch, "
        "int32_t* restrict Y, long ldy, long O, long quads, long cols, "
        "const int32_t* restrict row);"
    ),
    **winograd_f4.PROTOTYPES,  # Winograd F(4x4, 3x3) transforms
}


@functools.cache
def _definitions() -> str:
    """The helpers' code with their ``static`` dropped (exported), under their plain names."""
    parts = [dialect.PRELUDE]
    for helper in LIBRARY_HELPERS:
        code = dialect.HELPERS[helper]()
        parts.append(code.replace(f"static void og_{helper}(", f"void og_{helper}("))
    return "\n\n".join(parts) + "\n"


@functools.cache
def suffix(target_flags: tuple[str, ...]) -> str:
    """The hash every exported name of the library for ``target_flags`` carries."""
    text = _definitions() + "\0" + " ".join(target_flags)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def symbol(helper: str, target_flags: tuple[str, ...]) -> str:
    """The exported name of ``helper`` in the library for ``target_flags``."""
    return f"og_{helper}_{suffix(target_flags)}"


def library_source(target_flags: tuple[str, ...]) -> str:
    """The C source of the library for ``target_flags`` (the plain names renamed by macros)."""
    renames = [f"#define og_{h} {symbol(h, target_flags)}" for h in LIBRARY_HELPERS]
    return "\n".join(renames) + "\n" + _definitions()


def declarations(helpers: list[str], target_flags: tuple[str, ...]) -> str:
    """What a module that calls ``helpers`` (library helpers among them) needs to see."""
    lines = []
    for helper in helpers:
        if helper in LIBRARY_HELPERS:
            name = symbol(helper, target_flags)
            lines.append(f"#define og_{helper} {name}")
            lines.append("extern " + _PROTOTYPES[helper].format(name=name))
    return "\n".join(lines)
