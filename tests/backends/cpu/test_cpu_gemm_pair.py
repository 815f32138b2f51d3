"""``bench/gemm_pair.py``'s harness: two threads run the panel GEMM's column blocks side by side
(or, ``--bands``, the column blocks of their half of the rows) on weight copies cycled per
round (``--copies``), and it checks the last round's product."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]  # bench/ lives beside the library

from bench.gemm_pair import build  # noqa: E402
from opgraph.backends.cpu import default_config  # noqa: E402
from opgraph.backends.cpu.config import resolve_compiler  # noqa: E402


def _harness(tmp_path: Path, copies: int, bands: bool = False) -> Path:
    if resolve_compiler(default_config().compiler) is None:
        pytest.skip("no C compiler on this machine")
    args = argparse.Namespace(
        rows=24, inner=64, cols=256, block=64, copies=copies, isa="native", bands=bands
    )
    return build(tmp_path, args)


@pytest.mark.parametrize("copies", [1, 3])
def test_rounds_over_weight_copies_compute_the_last_copys_product(
    tmp_path: Path, copies: int
) -> None:
    """Five rounds (alone, pair, alone, pair, alone): the last ran copy ``4 % copies`` on one
    thread after pairs on the others; its product is checked in double precision."""
    exe = _harness(tmp_path, copies)
    out = subprocess.run([str(exe), "5"], check=True, capture_output=True, text=True)
    alone_n, pair_n, alone, pair, err, span = out.stdout.split()
    assert 0 <= int(alone_n) <= 3 and 0 <= int(pair_n) <= 2
    assert float(err) < 1e-4  # 64 products of floats in [-0.5, 0.5]
    assert float(span) >= 0


def test_pairs_in_bands_compute_the_whole_product(tmp_path: Path) -> None:
    """Four rounds, the last a pair in bands (each thread its 12 rows, every column block) on
    the second of two weight copies, after a round alone on the first: a band left undone
    would keep the first copy's product, so both bands are checked in double precision."""
    exe = _harness(tmp_path, 2, bands=True)
    out = subprocess.run([str(exe), "4"], check=True, capture_output=True, text=True)
    assert float(out.stdout.split()[4]) < 1e-4


def test_harness_reports_a_wrong_product(tmp_path: Path) -> None:
    """The check is not vacuous: the same harness with the product scaled reports the error."""
    exe = _harness(tmp_path, 2)
    source = tmp_path / "gemm_pair.c"
    text = source.read_text()
    wrong = text.replace("double s = -C[m * N + n];", "double s = -2 * C[m * N + n];")
    assert wrong != text
    source.write_text(wrong)
    compiler = resolve_compiler(default_config().compiler)
    assert compiler is not None
    flags = ["-O2", "-march=native", "-pthread"]
    subprocess.run([compiler, *flags, str(source), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), "4"], check=True, capture_output=True, text=True)
    assert float(out.stdout.split()[4]) > 1e-2


def test_copies_below_one_are_refused() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gemm_pair.py"), "--copies", "0"],
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0 and "--copies must be at least 1" in run.stderr
