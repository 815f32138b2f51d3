"""Run the reliability fuzzers longer than CI does.

    python tools/fuzz.py            # ten times the CI-sized case counts
    python tools/fuzz.py --scale 50 -k onnx

Every fuzzer in ``tests/reliability`` takes its case count from the ``fuzz_cases`` fixture,
which multiplies it by ``OPGRAPH_FUZZ_SCALE``; this script sets that and runs pytest there.
Extra arguments go to pytest.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=10, help="case-count multiplier (10)")
    args, rest = parser.parse_known_args(argv)
    if args.scale < 1:
        parser.error(f"--scale must be at least 1, got {args.scale}")
    suite = Path(__file__).resolve().parent.parent / "tests" / "reliability"
    env = {**os.environ, "OPGRAPH_FUZZ_SCALE": str(args.scale)}
    command = [sys.executable, "-m", "pytest", "-q", str(suite), *rest]
    return subprocess.call(command, env=env)


if __name__ == "__main__":
    sys.exit(main())
