"""The op reference, generated from the op registry (``docs/ops.md``)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.op import OP_REGISTRY, Op


def _family(cls: type[Op]) -> str:
    return cls.__module__.rsplit(".", 1)[-1]


def _attributes(cls: type[Op]) -> str:
    parts = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        annotation = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        default = ""
        if f.default is not dataclasses.MISSING:
            default = f" = {f.default!r}"
        parts.append(f"`{f.name}: {annotation}{default}`")
    return ", ".join(parts) or "—"


def _summary(cls: type[Op]) -> str:
    doc = inspect.getdoc(cls) or ""
    text = " ".join(doc.split("\n\n")[0].split())
    accepted = getattr(cls, "accepted", None)
    if accepted:
        text += " Element types: " + ", ".join(t.name for t in accepted) + "."
    return text


def _implementation(cls: type[Op]) -> str:

    parts = []
    if cls.lowered_by:
        parts.append(f"removed by `{cls.lowered_by}`")
    if cls.has_decomposition():
        parts.append("decomposition")
    if cls in KERNELS:
        parts.append("reference kernel")
    return ", ".join(parts)


def _gradient(cls: type[Op]) -> str:
    if not cls.differentiable:
        return "not differentiable"
    if cls.has_vjp():
        return "vjp"
    if cls.has_decomposition():
        return "via decomposition"
    return "—"


def op_classes() -> list[type[Op]]:
    return sorted(
        (cls for _, cls in OP_REGISTRY.items() if _is_library_op(cls)),
        key=lambda c: (_family(c), c.__name__),
    )


def _is_library_op(cls: type[Op]) -> bool:
    """opgraph's own catalogue ops: not test-only ones (tests may register ops while they run),
    nor the ops a bridge defines for itself (the ONNX bridge's ``RunTimeOnnxNode``, registered
    only once that bridge is imported)."""
    module = cls.__module__
    return module.startswith("opgraph.") and not module.startswith(
        ("opgraph.testing", "opgraph.frontends.")
    )


def markdown() -> str:
    """The whole op reference as Markdown."""
    classes = op_classes()
    lines = [
        "# Op reference",
        "",
        "Generated from the op registry by `opgraph ops --markdown > docs/ops.md`; do not edit.",
        f"{len(classes)} ops. Builders are in `opgraph.ops` beside their classes.",
        "",
    ]
    family = None
    for cls in classes:
        if _family(cls) != family:
            family = _family(cls)
            lines += [
                f"## {family}",
                "",
                "| op | attributes | semantics and type rule | implementation | gradient |",
                "|---|---|---|---|---|",
            ]
        row = (cls.__name__, _attributes(cls), _summary(cls), _implementation(cls), _gradient(cls))
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        if cls is classes[-1] or _family(classes[classes.index(cls) + 1]) != family:
            lines.append("")
    return "\n".join(lines)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")
