"""Graphviz pictures of Functions (nGraph's ``VisualizeTree``).

``to_dot(fn)`` gives the DOT text; ``visualize(fn, path)`` writes it, and renders SVG or PNG
with the Graphviz ``dot`` program when the path asks for one.

Drawing conventions, chosen so that large graphs stay readable:

* an op is a rounded box: ``%n Op``, one line per attribute not at its default (long values
  truncated), then the output type(s);
* parameters are blue ellipses, drawn once;
* constants — and broadcasts of constants, which is how ``x * 0.5`` spells a scalar — are small
  grey boxes redrawn next to every user (as nGraph did), so a shared constant never pulls long
  edges across the picture;
* results are marked by a double border and a small ``result i`` tag;
* an edge from a multi-output node is labelled with the output index.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

from opgraph.core.errors import OpgraphError
from opgraph.core.function import Function
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Node, Output
from opgraph.core.op import format_value
from opgraph.core.printing import value_names
from opgraph.ops.movement import Broadcast

__all__ = ["VisualizationError", "to_dot", "visualize"]

_FORMATS = {".dot": None, ".gv": None, ".svg": "svg", ".png": "png"}
_RENDER_TIMEOUT_S = 300


class VisualizationError(OpgraphError, RuntimeError):
    """A picture could not be written: unknown file suffix, or Graphviz missing or failing."""


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_constant_like(value: Output) -> bool:
    """A Constant, or a Broadcast (chain) of one: drawn inline at each use."""
    op = value.op
    while isinstance(op, Broadcast):
        value = value.node.inputs[0]
        op = value.op
    return isinstance(op, Constant)


def _constant_label(value: Output, limit: int) -> str:
    op = value.op
    if isinstance(op, Broadcast):
        inner = _constant_label(value.node.inputs[0], limit).split("\n")[0]
        return f"{inner} ⇒\n{value.type}"
    assert isinstance(op, Constant)
    shown = op.format_attributes().removeprefix("value=") if op.value.size <= 8 else "Constant"
    return f"{_truncate(shown, limit)}\n{value.type}"


def _node_label(node: Node, name: str, limit: int) -> str:
    lines = [f"{name} {node.op.name}"]
    if node.name:
        lines[0] += f' "{_truncate(node.name, limit)}"'
    for key, value in _key_attributes(node):
        lines.append(_truncate(f"{key}={format_value(value)}", limit))
    lines.append(_truncate(", ".join(str(t) for t in node.output_types), limit))
    return "\n".join(lines)


def _key_attributes(node: Node) -> list[tuple[str, object]]:
    """The op's attributes, leaving out those at their declared default (``keep_dims=False``)."""
    shown = []
    for field in dataclasses.fields(node.op):  # type: ignore[arg-type]
        value = getattr(node.op, field.name)
        try:
            at_default = field.default is not dataclasses.MISSING and bool(value == field.default)
        except (TypeError, ValueError):
            at_default = False
        if not at_default:
            shown.append((field.name, value))
    return shown


def to_dot(fn: Function, max_label: int = 40) -> str:
    """The DOT text of ``fn`` (see the module docstring for the conventions).

    Args:
        fn: the Function to draw.
        max_label: longest attribute or type line before it is truncated with "…".
    """
    names = value_names(fn)
    ids = {node: f"n{i}" for i, node in enumerate(fn.nodes)}
    results = {r.node for r in fn.results}
    lines = [
        f'digraph "{_escape(fn.name)}" {{',
        "  rankdir=TB;",
        '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica, '
        "fontsize=10];",
        "  edge [fontname=Helvetica, fontsize=8, color=gray40];",
    ]
    for node in fn.nodes:
        if all(_is_constant_like(o) for o in node.outputs) and node not in results:
            continue  # drawn inline at each user
        lines.append(_node_line(node, ids[node], names, results, max_label))
        for k, value in enumerate(node.inputs):
            lines.extend(_edge_lines(value, node, k, ids, max_label))
    for k, r in enumerate(fn.results):
        lines.append(f'  r{k} [label="result {k}", shape=plaintext, fontsize=8, style=""];')
        lines.append(f"  {ids[r.node]} -> r{k} [style=dashed{_port_label(r)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node_line(
    node: Node, node_id: str, names: dict[Output, str], results: set[Node], limit: int
) -> str:
    name = names[node.outputs[0]].split(".")[0] if node.outputs else "%?"
    extra = ", peripheries=2" if node in results else ""
    if isinstance(node.op, Parameter):
        label = f"{name} {node.name or 'Parameter'}\n{node.output_types[0]}"
        style = "shape=ellipse, fillcolor=lightblue"
    elif all(_is_constant_like(o) for o in node.outputs):
        label = _constant_label(node.outputs[0], limit)
        style = "fillcolor=gray90, fontsize=8"
    else:
        label = _node_label(node, name, limit)
        style = ""
    attrs = ", ".join(a for a in (f'label="{_escape(label)}"', style) if a)
    return f"  {node_id} [{attrs}{extra}];"


def _port_label(value: Output) -> str:
    return f', label="{value.index}"' if len(value.node.outputs) > 1 else ""


def _edge_lines(
    value: Output, user: Node, position: int, ids: dict[Node, str], limit: int
) -> list[str]:
    if _is_constant_like(value):
        inline = f"{ids[value.node]}_{ids[user]}_{position}"
        label = _escape(_constant_label(value, limit))
        return [
            f'  {inline} [label="{label}", fillcolor=gray90, fontsize=8, style="filled,dashed"];',
            f"  {inline} -> {ids[user]};",
        ]
    attrs = _port_label(value).lstrip(", ")
    return [f"  {ids[value.node]} -> {ids[user]}" + (f" [{attrs}];" if attrs else ";")]


def visualize(fn: Function, path: str | Path, max_label: int = 40) -> Path:
    """Draw ``fn`` into ``path``; the suffix picks the format.

    ``.dot`` (or ``.gv``) writes the Graphviz text. ``.svg`` and ``.png`` write the text beside
    the picture (same name, ``.dot`` suffix) and render it with Graphviz's ``dot`` program.

    Args:
        fn: the Function to draw.
        path: where to write; the folder must exist.
        max_label: longest attribute or type line before it is truncated.

    Returns:
        The path written.

    Raises:
        VisualizationError: an unknown suffix; ``dot`` is not installed (the ``.dot`` file is
            still written) or it failed.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _FORMATS:
        raise VisualizationError(
            f"visualize: cannot tell the format of {str(path)!r}: expected a .dot, .gv, .svg or "
            f".png suffix, got {suffix or 'none'!r}"
        )
    text = to_dot(fn, max_label)
    image_format = _FORMATS[suffix]
    dot_path = path if image_format is None else path.with_suffix(".dot")
    dot_path.write_text(text)
    if image_format is None:
        return path
    program = shutil.which("dot")
    if program is None:
        raise VisualizationError(
            f"visualize: rendering {path.name} needs the Graphviz 'dot' program, which is not on "
            f"PATH (install graphviz, e.g. apt-get install graphviz); wrote {dot_path} instead"
        )
    _render(program, dot_path, path, image_format)
    return path


def _render(program: str, source: Path, target: Path, image_format: str) -> None:
    try:
        done = subprocess.run(
            [program, f"-T{image_format}", "-o", str(target), str(source)],
            capture_output=True,
            text=True,
            timeout=_RENDER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise VisualizationError(
            f"visualize: dot took more than {_RENDER_TIMEOUT_S} s on {source}"
        ) from None
    if done.returncode != 0:
        raise VisualizationError(
            f"visualize: dot failed (exit {done.returncode}) on {source}: {done.stderr.strip()}"
        )
