"""``bench/load_split.py`` splits ``bench/run.py --load N``'s quotient into its parts: the share
of opgraph's loaded calls in its fast mode, and the quotient ``bench/run.py --repeat 3`` reports
for three sessions (``run.summarize``'s ratio, loaded over quiet). Checked on made-up sessions:
nothing here is timed."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx", reason="onnx is not installed (the bench extra)")
pytest.importorskip("torch", reason="torch is not installed (bench/models.py needs it)")
pytest.importorskip("openvino", reason="openvino is not installed (the bench extra)")


from bench import load_split, models, runners


def _prepared() -> dict[str, runners.Prepared]:
    return {
        name: runners.Prepared(lambda: None, lambda: [], 0.0, {})
        for name in ("opgraph", "opgraph exe()", "onnxruntime", "openvino")
    }


def _session(opgraph: list[float], onnxruntime: float, openvino: float) -> load_split.Session:
    return {
        "opgraph": opgraph,
        "opgraph exe()": opgraph,
        "onnxruntime": [onnxruntime] * 3,
        "openvino": [openvino] * 3,
    }


def test_fast_share_counts_loaded_calls_within_the_bound_of_the_quiet_median() -> None:
    quiet = _session([1.0, 1.0, 3.0], 9.0, 9.0)  # median 1.0: fast up to 1.25
    loaded = _session([1.0, 1.25, 1.3, 2.0], 9.0, 9.0)
    assert load_split.fast_share(quiet, loaded) == 0.5


def test_quotients_are_run_py_ratios_of_three_sessions_loaded_over_quiet() -> None:
    case = models.w1(32)
    quiet = _session([1.0], 5.0, 4.0)
    # opgraph 1.5x slower beside the loop; the faster peer (openvino 4 -> onnxruntime 6) 1.5x too
    loaded = _session([1.5], 6.0, 8.0)
    rows = [(quiet, loaded)] * 3 + [(quiet, _session([1.5], 4.0, 4.0))] * 3 + [(quiet, quiet)]
    found = load_split.quotients(case, _prepared(), rows, ("onnxruntime", "openvino"))
    assert found == pytest.approx([1.0, 1.5])  # the seventh session is no full three
    # against OpenVINO alone (``--peer-isa``): its 4 -> 8 ms
    assert load_split.quotients(case, _prepared(), rows[:3], ("openvino",)) == pytest.approx([0.75])
