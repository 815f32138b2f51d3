"""Resize (nearest and linear) with explicit sizes."""

from __future__ import annotations

import numpy as np

from opgraph import ops
from opgraph.core.errors import ConversionError
from opgraph.core.node import Node
from opgraph.frontends.onnx.exporters.base import ExportContext, exports


@exports(ops.Resize, since=13)
def _resize(ctx: ExportContext, op: ops.Resize, node: Node, inputs: list[str]) -> list[str]:
    attributes = {
        "mode": op.mode.value,
        "coordinate_transformation_mode": op.coordinate_transformation_mode.value,
        "nearest_mode": op.nearest_mode.value,
    }
    what = "an exported Resize's scales or sizes"
    shape_in = node.inputs[0].static_shape(what, ConversionError)
    shape_out = node.outputs[0].static_shape(what, ConversionError)
    implied = [o / i if i else 1.0 for o, i in zip(shape_out, shape_in, strict=True)]
    if op.scales is not None and not np.allclose(op.scales, implied, rtol=1e-12, atol=0):
        # The scales feed the coordinate transformation (float32 in ONNX)…
        stored = np.asarray(op.scales, dtype=np.float32)
        rounded = [int(d * float(s)) for d, s in zip(shape_in, stored, strict=True)]
        if list(shape_out) == rounded:  # …when float32 scales give the same sizes
            scales = ctx.constant(stored, "scales")
            return [ctx.one("Resize", [inputs[0], "", scales], **attributes)]
    sizes = ctx.ints(shape_out, "sizes")
    return [ctx.one("Resize", [inputs[0], "", "", sizes], **attributes)]
