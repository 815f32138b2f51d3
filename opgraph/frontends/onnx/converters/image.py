"""ImageDecoder: decoding is not a tensor computation, and the output shape depends on the
encoded bytes, so a constant input is decoded at import time (with Pillow, when installed)."""

from __future__ import annotations

import io

import numpy as np

from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.frontends.onnx.context import NodeContext
from opgraph.frontends.onnx.registry import onnx_op


@onnx_op("ImageDecoder", since=20)
def _image_decoder(ctx: NodeContext) -> Output:
    encoded = ctx.const(0, "encoded_stream (the decoded shape depends on it)")
    try:
        # deferred: Pillow is an optional dependency
        import PIL.Image
    except ImportError as error:
        raise ctx.fail("decoding images needs Pillow (pip install pillow)") from error
    image = PIL.Image.open(io.BytesIO(np.asarray(encoded, dtype=np.uint8).tobytes()))
    pixel_format = str(ctx.attr("pixel_format", "RGB"))
    if pixel_format == "Grayscale":
        decoded = np.asarray(image.convert("L"))[:, :, None]
    elif pixel_format in ("RGB", "BGR"):
        decoded = np.asarray(image.convert("RGB"))
        decoded = decoded[:, :, ::-1] if pixel_format == "BGR" else decoded
    else:
        raise ctx.fail(f"unknown pixel_format {pixel_format!r}")
    return constant(np.ascontiguousarray(decoded, dtype=np.uint8))
