"""Regenerate the golden CUDA modules of ``tests/backends/gpu/golden`` (review the diff!).

    python tests/backends/gpu/regen_golden.py --write

Without ``--write`` it only lists the files that would change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from gpu_cases import CASES, GOLDEN, generated_source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="overwrite the golden files")
    args = parser.parse_args()
    GOLDEN.mkdir(exist_ok=True)
    changed = 0
    for name, build in CASES.items():
        path = GOLDEN / f"{name}.cu"
        source = generated_source(build)
        if path.exists() and path.read_text() == source:
            continue
        changed += 1
        print(f"{'writing' if args.write else 'would change'}: {path}")
        if args.write:
            path.write_text(source)
    print(f"{changed} golden file(s) {'written' if args.write else 'differ'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
