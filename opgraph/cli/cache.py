"""``opgraph cache info|clear``: the CPU backend's compile cache (see docs/cpu.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from opgraph.backends.cpu.cache import CacheError, cache_info, clear_cache
from opgraph.backends.cpu.config import CpuConfigError, default_config


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "cache", help="show (info) or empty (clear) the CPU backend's compile cache"
    )
    parser.add_argument("action", choices=("info", "clear"), help="info or clear")
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the cache directory (default: OPGRAPH_CACHE_DIR or ~/.cache/opgraph/cpu)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:

    try:
        config = default_config()
        directory = args.dir if args.dir is not None else config.cache_dir
        if args.action == "clear":
            entries, freed = clear_cache(directory)
            print(f"removed {entries} entries ({_size(freed)}) from {directory}")
            return 0
        info = cache_info(directory, config.cache_max)
    except (CacheError, CpuConfigError, OSError) as error:
        print(f"opgraph cache: {error}", file=sys.stderr)
        return 1
    print(f"directory   {info.directory}{'' if info.directory.exists() else ' (not created yet)'}")
    print(f"entries     {info.entries}")
    print(f"size        {_size(info.total_bytes)} of {_size(info.max_bytes)} (OPGRAPH_CACHE_MAX)")
    if info.builds:
        print(f"builds      {info.builds} in progress or left by killed processes")
    if info.problem:
        print(f"UNSAFE      {info.problem}: the CPU backend refuses this directory")
        return 1
    return 0


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"
