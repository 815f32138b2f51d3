"""``opgraph info FILE``."""

from pathlib import Path

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.cli import main
from opgraph.serialize import save

FIXTURE = Path(__file__).resolve().parent / "data" / "v1_small.opgraph"


def test_info_summarizes_a_file(capsys):
    assert main(["info", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    size = FIXTURE.stat().st_size
    for line in [
        f"file            {FIXTURE} ({size:,} bytes)",
        "format version  1 (written by opgraph 0.1.0)",
        "function        v1_small",
        "parameters      3",
        "  a: f32[2,3]",
        "  b: i32[2,3]",
        "  unused: f16[]",
        "results         4",
        "  (f32[4], f32[2,1])",
        "nodes           25 in 2 functions",
        "  Constant         5",
        "  Parameter        4",
        "  Relu             1",
        "constants       5 (58 bytes; 58 bytes stored after deduplication)",
        "called          inner",
    ]:
        assert line in out.splitlines(), line


def test_info_counts_shared_constants_once_in_storage(tmp_path, capsys):
    value = np.ones((10, 10), np.float32)
    total = ops.add(og.constant(value), og.constant(value))
    path = tmp_path / "m.opgraph"
    save(og.Function([total], [], name="m"), path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "constants       2 (800 bytes; 400 bytes stored after deduplication)" in out
    assert "parameters      0" in out and "called" not in out


def test_info_unnamed_parameters_show_their_position(tmp_path, capsys):
    a = og.parameter(og.i8, (3,))
    path = tmp_path / "m.opgraph"
    save(og.Function([a], [a]), path)
    assert main(["info", str(path)]) == 0
    assert "  #0: i8[3]" in capsys.readouterr().out.splitlines()


def test_info_reports_a_bad_file(tmp_path, capsys):
    path = tmp_path / "bad.opgraph"
    path.write_bytes(b"not a zip")
    assert main(["info", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("opgraph info: ") and "not an opgraph file" in err


def test_info_reports_a_missing_file(tmp_path, capsys):
    assert main(["info", str(tmp_path / "none.opgraph")]) == 1
    assert "No such file" in capsys.readouterr().err
