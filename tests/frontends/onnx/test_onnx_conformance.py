"""ONNX's node tests through import → compile → run, on the measured subset (every input and
output a float32/float64/integer/bool tensor).

Every subset test runs on INTERPRETER with the model given as is (only the test's input
shapes; inputs that feed shapes, axes or counts stay run-time tensors); a fixed sample (every
``CPU_STRIDE``-th test) runs on CPU when that backend is registered, as is too (CPU runs
symbolic Functions, and sizes decided at run time between compiled stages). Known failures are listed, with a reason each, in ``expected_failures.txt`` (and
``expected_failures_as_is.txt`` for those that fail only as is, ``expected_failures_cpu.txt``
for CPU-only ones); they are ``xfail(strict=True)``, so a test that starts passing fails the
run until its line goes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")

import onnx_conformance as conformance  # noqa: E402  (tools/, on the path through conftest.py)

import opgraph as og  # noqa: E402

HERE = Path(__file__).parent
CPU_STRIDE = 7


def _expected(filename: str) -> dict[str, str]:
    path = HERE / filename
    if not path.exists():
        return {}
    entries = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition(":")
            entries[name.strip()] = reason.strip()
    return entries


def _subset() -> list[str]:
    names = []
    for name in conformance.test_names():
        model = onnx.load(str(conformance.data_dir() / name / "model.onnx"))
        if conformance.in_subset(model):
            names.append(name)
    return names


SUBSET = _subset()
BASE = _expected("expected_failures.txt")
EXPECTED = {**BASE, **_expected("expected_failures_as_is.txt")}  # INTERPRETER, models as is
EXPECTED_CPU = {**BASE, **_expected("expected_failures_cpu.txt")}  # CPU, models as is


try:
    import PIL  # noqa: F401 - ImageDecoder decodes at import time with Pillow

    NO_PILLOW = ""
except ImportError:
    NO_PILLOW = "ImageDecoder needs Pillow, which is not installed"


def _marks(name: str, expected: dict[str, str]) -> list[pytest.MarkDecorator]:
    if name in expected:
        return [pytest.mark.xfail(strict=True, reason=expected[name])]
    if NO_PILLOW and name.startswith("test_image_decoder"):
        return [pytest.mark.skip(reason=NO_PILLOW)]
    return []


def _params(names: list[str], expected: dict[str, str]) -> list[object]:
    return [pytest.param(n, marks=_marks(n, expected)) for n in names]


def _check(name: str, backend: str, mode: str = conformance.AS_IS) -> None:
    outcome = conformance.run_test(name, backend, mode)
    if not outcome.passed:
        pytest.fail(outcome.message, pytrace=False)


@pytest.mark.skipif(not SUBSET, reason="this onnx wheel ships no node test data")
@pytest.mark.parametrize("name", _params(SUBSET, EXPECTED))
def test_node_interpreter(name: str) -> None:
    _check(name, "INTERPRETER")


@pytest.mark.skipif("CPU" not in og.backends(), reason="the CPU backend is not registered")
@pytest.mark.parametrize("name", _params(SUBSET[::CPU_STRIDE], EXPECTED_CPU))
def test_node_cpu_sample(name: str) -> None:
    _check(name, "CPU")


@pytest.mark.skipif(not SUBSET, reason="this onnx wheel ships no node test data")
def test_expected_failures_name_subset_tests() -> None:
    stale = sorted((set(EXPECTED) | set(EXPECTED_CPU)) - set(SUBSET))
    assert not stale, f"expected-failure entries that are not subset tests: {stale}"


@pytest.mark.skipif(not SUBSET, reason="this onnx wheel ships no node test data")
def test_subset_size_is_the_measured_one() -> None:
    """The measure is defined on onnx 1.22's 1503 subset tests; another wheel changes it."""
    if onnx.__version__ == "1.22.0":
        assert len(SUBSET) == 1503
