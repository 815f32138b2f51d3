"""ONNX converters, keyed by (domain, op type), each with the opset version it applies from."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opgraph.core.errors import RegistryError

if TYPE_CHECKING:
    from opgraph.frontends.onnx.context import NodeContext

#: ``converter(ctx) -> Output | sequence of Outputs`` (one per ONNX node output).
Converter = Callable[["NodeContext"], Any]

_CONVERTERS: dict[tuple[str, str], list[tuple[int, Converter]]] = {}


def onnx_op(name: str, since: int = 1, domain: str = "") -> Callable[[Converter], Converter]:
    """Register a converter for ONNX op ``name`` from opset ``since`` on.

    A model at opset N uses the newest converter whose ``since`` ≤ N. Duplicates are refused.
    """

    def register(fn: Converter) -> Converter:
        versions = _CONVERTERS.setdefault((_domain(domain), name), [])
        if any(v == since for v, _ in versions):
            raise RegistryError(f"ONNX converter {name} since {since} is already registered")
        versions.append((since, fn))
        versions.sort(key=lambda item: item[0])
        return fn

    return register


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def lookup(op_type: str, domain: str, opset: int) -> Converter | None:
    """The converter for ``op_type`` at ``opset``, or None."""
    chosen = None
    for since, fn in _CONVERTERS.get((_domain(domain), op_type), []):
        if since <= opset:
            chosen = fn
    return chosen


def registered() -> list[tuple[str, str, int]]:
    """(domain, op type, since) of every converter, for documentation and coverage."""
    return sorted((d, n, v) for (d, n), versions in _CONVERTERS.items() for v, _ in versions)
