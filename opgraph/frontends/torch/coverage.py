"""ATen overload coverage: which overloads some graphs use, and which have converters.

Example::

    program = torch.export.export(model, args).run_decompositions()
    report = overload_coverage([program.graph])
    print(report.table())
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from opgraph.frontends.torch.registry import lookup, name_of


@dataclass
class Coverage:
    """Overloads seen in some graphs (with node counts) and those that have converters."""

    seen: Counter[str] = field(default_factory=Counter)
    converted: set[str] = field(default_factory=set)

    @property
    def missing(self) -> list[str]:
        """Seen overloads without a converter, sorted."""
        return sorted(set(self.seen) - self.converted)

    def summary(self) -> str:
        """``converted / seen`` overloads (and nodes)."""
        nodes = sum(self.seen.values())
        converted_nodes = sum(n for name, n in self.seen.items() if name in self.converted)
        return (
            f"{len(self.converted)}/{len(self.seen)} overloads converted "
            f"({converted_nodes}/{nodes} nodes)"
        )

    def table(self) -> str:
        """One line per overload: count, converted or not; then the summary."""
        lines = [
            f"{'yes' if name in self.converted else 'NO ':3}  {count:5d}  {name}"
            for name, count in sorted(self.seen.items())
        ]
        return "\n".join([*lines, self.summary()])


def overload_coverage(graphs: Iterable[torch.fx.Graph]) -> Coverage:
    """Count the ``call_function`` targets of ``graphs`` and check each has a converter."""
    report = Coverage()
    for graph in graphs:
        for node in graph.nodes:
            if node.op == "call_function":
                name = name_of(node.target)
                report.seen[name] += 1
                if lookup(node.target) is not None:
                    report.converted.add(name)
    return report
