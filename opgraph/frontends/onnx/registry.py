"""ONNX converters, keyed by (domain, op type), each with the opset version it applies from."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opgraph.core.registry import VersionedRegistry

if TYPE_CHECKING:
    from opgraph.frontends.onnx.context import NodeContext

#: ``converter(ctx) -> Output | sequence of Outputs`` (one per ONNX node output).
Converter = Callable[["NodeContext"], Any]


def _key_name(key: tuple[str, str]) -> str:
    domain, op_type = key
    return f"{domain}::{op_type}" if domain else op_type


CONVERTERS: VersionedRegistry[tuple[str, str], Converter] = VersionedRegistry(
    "ONNX converter", "opset", _key_name
)


def onnx_op(name: str, since: int = 1, domain: str = "") -> Callable[[Converter], Converter]:
    """Register a converter for ONNX op ``name`` from opset ``since`` on.

    A model at opset N uses the newest converter whose ``since`` ≤ N. Duplicates are refused.
    """
    return CONVERTERS.register((_domain(domain), name), since=since)


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def lookup(op_type: str, domain: str, opset: int) -> Converter | None:
    """The converter for ``op_type`` at ``opset``, or None."""
    return CONVERTERS.lookup((_domain(domain), op_type), opset)


def registered() -> list[tuple[str, str, int]]:
    """(domain, op type, since) of every converter opgraph ships, for documentation and
    coverage (converters that tests or users register elsewhere are left out)."""
    return sorted(
        (d, n, v)
        for (d, n), v, converter in CONVERTERS.entries()
        if getattr(converter, "__module__", "").startswith("opgraph.")
    )
