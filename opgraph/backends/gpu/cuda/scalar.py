"""Scalar renderers: the CPU backend's (``SCALAR_OPS``), except where CUDA needs another
form. Overrides are registered here by op class; everything else is the CPU template as is.

CUDA-specific forms (the complete list):

* ``Convert`` f64 → f16: the CPU template rounds once through ``_Float16``; CUDA rounds once
  through ``__double2half``.

Every other difference is a dialect matter (types, literals, math names, helper text) and is
handled by :class:`~opgraph.backends.gpu.cuda.context.CudaScalarContext` and
:mod:`~opgraph.backends.gpu.cuda.dialect`.
"""

from __future__ import annotations

from collections.abc import Sequence

from opgraph.backends.fused.lowering import SCALAR_OPS, ScalarContext
from opgraph.backends.fused.lowering.registry import ScalarRenderer
from opgraph.core import element_type as et
from opgraph.core.registry import Registry
from opgraph.ops.conversion import Convert

CUDA_SCALAR_OPS: Registry[type, ScalarRenderer] = Registry("CUDA scalar renderer override")


def scalar_renderer(cls: type) -> ScalarRenderer:
    """The renderer of op class ``cls`` for CUDA: an override, else the CPU template."""
    override = CUDA_SCALAR_OPS.get(cls)
    return override if override is not None else SCALAR_OPS[cls]


@CUDA_SCALAR_OPS.register(Convert)
def _convert(op: Convert, args: Sequence[str], ctx: ScalarContext) -> str:
    if ctx.output is et.f16 and ctx.inputs[0] is et.f64:  # one rounding, straight from double
        return f"__half2float(__double2half({args[0]}))"
    return SCALAR_OPS[Convert](op, args, ctx)
