"""``opgraph info FILE``: what a saved opgraph file holds (the file is loaded and checked)."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import Any

from opgraph.core.errors import SerializationError
from opgraph.serialize.api import read_file


def register(commands: Any) -> None:
    info = commands.add_parser(
        "info", help="summarize a saved opgraph file (functions, types, ops, constants)"
    )
    info.add_argument("file", help="an opgraph file written by og.save")
    info.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:

    try:
        loaded = read_file(args.file)
        size = os.path.getsize(args.file)
    except (SerializationError, OSError) as error:
        print(f"opgraph info: {error}", file=sys.stderr)
        return 1
    for line in summary_lines(args.file, size, loaded):
        print(line)
    return 0


def summary_lines(path: str, size: int, loaded: Any) -> list[str]:
    """The report, one line per entry (``loaded`` is a ``decode.Loaded``)."""
    fn = loaded.function
    producer = f" (written by {loaded.producer})" if loaded.producer else ""
    lines = [
        f"file            {path} ({size:,} bytes)",
        f"format version  {loaded.format_version}{producer}",
        f"function        {fn.name}",
        f"parameters      {len(fn.parameters)}",
    ]
    for position, p in enumerate(fn.parameters):
        lines.append(f"  {p.node.name or f'#{position}'}: {p.type}")
    lines.append(f"results         {len(fn.results)}")
    lines += [f"  {t}" for t in fn.result_types]
    counts = Counter(node.op.name for function in loaded.functions for node in function.nodes)
    nodes = sum(counts.values())
    scope = f" in {len(loaded.functions)} functions" if len(loaded.functions) > 1 else ""
    lines.append(f"nodes           {nodes:,}{scope}")
    width = max((len(name) for name in counts), default=0)
    lines += [f"  {name:<{width}}  {count:,}" for name, count in counts.most_common()]
    lines.append(
        f"constants       {loaded.constants:,} ({loaded.constant_bytes:,} bytes; "
        f"{loaded.stored_bytes:,} bytes stored after deduplication)"
    )
    if len(loaded.functions) > 1:
        callees = ", ".join(f.name for f in loaded.functions[:-1])
        lines.append(f"called          {callees}")
    return lines
