"""The textual form of a Function: one line per node, values numbered locally.

    function f(%0: f32[32,32], %1: f32[32,32]) -> (f32[32,32])
      %0 = Parameter "a" : f32[32,32]
      %2 = Add(%0, %1) : f32[32,32]
      return %2

Numbers are positions in the Function's topological order (parameters first), never global
ids, so printing the same graph twice, or a reloaded graph, gives identical text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opgraph.core.node import Node, Output

if TYPE_CHECKING:
    from opgraph.core.function import Function


def value_names(fn: Function) -> dict[Output, str]:
    """``%n`` names for every Output of ``fn``, multi-output nodes as ``%n.i``."""
    names: dict[Output, str] = {}
    for position, node in enumerate(fn.nodes):
        if len(node.outputs) == 1:
            names[node.outputs[0]] = f"%{position}"
        else:
            for output in node.outputs:
                names[output] = f"%{position}.{output.index}"
    return names


def format_node(node: Node, names: dict[Output, str]) -> str:
    if len(node.outputs) == 1:
        lhs = names[node.outputs[0]]
        types = str(node.output_types[0])
    else:
        lhs = ", ".join(names[o] for o in node.outputs)
        types = ", ".join(str(t) for t in node.output_types)
    label = f' "{node.name}"' if node.name else ""
    args = ", ".join(names[i] for i in node.inputs)
    call = f"({args})" if node.inputs else ""
    return f"{lhs} = {node.op.describe()}{label}{call} : {types}"


def format_function(fn: Function) -> str:
    names = value_names(fn)
    params = ", ".join(f"{names[p]}: {p.type}" for p in fn.parameters)
    results = ", ".join(str(t) for t in fn.result_types)
    lines = [f"function {fn.name}({params}) -> ({results})"]
    lines += ["  " + format_node(node, names) for node in fn.nodes]
    lines.append("  return " + ", ".join(names[r] for r in fn.results))
    return "\n".join(lines)
