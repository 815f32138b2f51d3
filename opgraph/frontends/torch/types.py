"""torch dtypes ↔ opgraph element types, and numpy views of torch tensors."""

from __future__ import annotations

import numpy as np
import torch

from opgraph.core import element_type as et
from opgraph.core.element_type import ElementType
from opgraph.core.errors import ConversionError

_TO_OPGRAPH: dict[torch.dtype, ElementType] = {
    torch.bool: et.boolean,
    torch.float16: et.f16,
    torch.bfloat16: et.bf16,
    torch.float32: et.f32,
    torch.float64: et.f64,
    torch.int8: et.i8,
    torch.int16: et.i16,
    torch.int32: et.i32,
    torch.int64: et.i64,
    torch.uint8: et.u8,
    torch.uint16: et.u16,
    torch.uint32: et.u32,
    torch.uint64: et.u64,
}
_TO_TORCH: dict[ElementType, torch.dtype] = {v: k for k, v in _TO_OPGRAPH.items()}


def from_torch(dtype: torch.dtype, where: str = "") -> ElementType:
    """The element type of a torch dtype; ConversionError for complex, quantized, fp8…"""
    try:
        return _TO_OPGRAPH[dtype]
    except KeyError:
        prefix = f"{where}: " if where else ""
        raise ConversionError(f"{prefix}torch dtype {dtype} has no opgraph element type") from None


def to_torch(element_type: ElementType) -> torch.dtype:
    """The torch dtype of an element type."""
    return _TO_TORCH[element_type]


def supported_dtype(dtype: torch.dtype) -> bool:
    """True when opgraph has an element type for ``dtype``."""
    return dtype in _TO_OPGRAPH


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A numpy array sharing memory with ``tensor`` (a CPU tensor without autograd history).

    bf16 has no numpy dtype in torch, so its bits are viewed as ``ml_dtypes.bfloat16``.
    """
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(et.bf16.dtype)
    return tensor.numpy()
