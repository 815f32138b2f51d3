"""Assemble the CUDA module of one executable: the prelude, the CPU-dialect helpers its
kernels call (translated), and the kernels."""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.gpu.cuda import dialect
from opgraph.backends.gpu.cuda.kernel import CudaKernel


def assemble(kernels: Sequence[CudaKernel], name: str) -> str:
    """The source of a module holding ``kernels`` (names must be unique)."""
    names = [k.name for k in kernels]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"duplicate kernel names {duplicates} (a GPU backend bug)"
    helpers = dict.fromkeys(h for k in kernels for h in k.helpers)
    parts = [
        f"/* opgraph GPU module for function {name}: {len(kernels)} kernel(s) */",
        dialect.PRELUDE,
        *(dialect.helper_code(h) for h in helpers),
        *(k.source for k in kernels),
    ]
    return "\n\n".join(part.strip("\n") for part in parts) + "\n"
