"""The package metadata: one source of the version, and the license it declares is shipped."""

import os
import re
import tomllib
from pathlib import Path

import opgraph as og
from opgraph import _version

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_is_written_once() -> None:
    project = PROJECT["project"]
    assert "version" not in project, "pyproject.toml must not repeat the version"
    assert "version" in project["dynamic"]
    attr = PROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "opgraph._version.__version__"
    assert og.__version__ == _version.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+([ab]|rc)?\d*(\.dev\d+)?", og.__version__)


def test_the_declared_license_is_shipped() -> None:
    project = PROJECT["project"]
    assert project["license"] == "Apache-2.0"
    for name in project["license-files"]:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_metadata_names_authors_and_classifiers() -> None:
    project = PROJECT["project"]
    assert project["authors"], "pyproject.toml names no authors"
    assert "Operating System :: POSIX :: Linux" in project["classifiers"]
    for name in ("CHANGELOG.md", "CONTRIBUTING.md", "LICENSE"):
        assert (ROOT / name).is_file(), f"{name} is missing"


def test_peers_the_tests_compare_against_are_bounded_above() -> None:
    # A new release of a peer on the package index must not fail a fresh install's tests.
    extras = PROJECT["project"]["optional-dependencies"]
    # pytest-xdist too: the test run's addopts name its options.
    peers = (
        "onnxruntime",
        "openvino",
        "onnxscript",
        "transformers",
        "ruff",
        "mypy",
        "pytest-xdist",
    )
    for requirement in (r for group in extras.values() for r in group):
        name = re.split(r"[<>=!\[ ]", requirement, maxsplit=1)[0]
        if name in peers:
            assert "<" in requirement or "==" in requirement, f"{requirement} is unbounded"


def test_the_test_run_never_uses_the_users_compile_cache() -> None:
    from opgraph.backends.cpu.config import default_config

    users = Path.home() / ".cache" / "opgraph"
    cache = default_config().cache_dir.resolve()
    assert not cache.is_relative_to(users.resolve()), f"tests write to the user's cache {cache}"


def test_the_test_run_uses_every_cpu_through_the_test_extra() -> None:
    # `python -m pytest -q` (the README's and .ci/run's command) runs on every logical CPU: the
    # options are in addopts, and the plugin that reads them is in the test extra.
    addopts = PROJECT["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "--numprocesses=logical" in addopts
    assert any(
        r.startswith("pytest-xdist") for r in PROJECT["project"]["optional-dependencies"]["test"]
    )
    assert "python3 -m pytest -q\n" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_workers_of_a_run_share_its_compile_cache() -> None:
    # conftest.py: the controller makes the run's cache and its xdist workers inherit it (a
    # serial run is its own controller).
    from opgraph.backends.cpu.config import default_config

    run_cache = Path(os.environ["OPGRAPH_TEST_RUN_CACHE_DIR"])
    if os.environ.get("OPGRAPH_TEST_CACHE_DIR") is None:
        assert run_cache.name.startswith("opgraph-test-cache-")
    assert default_config().cache_dir.resolve() == run_cache.resolve()


def test_readme_states_the_system_requirements() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## System requirements", 1)[1].split("\n## ", 1)[0]
    for needed in ("Linux", "glibc", "C compiler", "OPGRAPH_CC", "graphviz", "INTERPRETER"):
        assert needed in section, f"README's system requirements do not mention {needed}"
    assert "OpenMP" not in readme, "the CPU backend runs its own thread pool, not OpenMP"
