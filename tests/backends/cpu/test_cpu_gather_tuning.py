"""GCC's gather tuning (``gather_tuning.gather_flags``): vector gathers turned on only where GCC
falls back to generic tuning on an Intel CPU the kernel reports not affected by Gather Data
Sampling; GCC's own tuning decides everywhere else."""

import dataclasses
import platform
import shutil

import pytest

from opgraph.backends.cpu import default_config, gather_tuning
from opgraph.backends.cpu.compiler import Toolchain
from opgraph.backends.cpu.gather_tuning import GATHER_FLAG, gather_flags, resolved_tune

NATIVE = ("-march=native",)


@pytest.fixture
def cpu(monkeypatch, tmp_path):
    """Sets what the CPU, the kernel and GCC report, and clears the cached answers."""

    def set_cpu(
        report: str | None = "Not affected", vendor: str = "GenuineIntel", tune: str = "generic"
    ) -> None:
        path = tmp_path / "gather_data_sampling"
        if report is not None:
            path.write_text(report + "\n")
        monkeypatch.setattr(gather_tuning, "GDS_REPORT", path)
        monkeypatch.setattr(gather_tuning, "cpu_vendor", lambda: vendor)
        monkeypatch.setattr(gather_tuning, "resolved_tune", lambda *_: tune)
        monkeypatch.setattr(platform, "machine", lambda: "x86_64")
        gather_flags.cache_clear()

    yield set_cpu
    gather_flags.cache_clear()


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("Not affected", (GATHER_FLAG,)),
        ("Mitigation: Microcode", ()),
        ("Vulnerable", ()),
        (None, ()),
    ],
)
def test_gathers_follow_the_kernels_report(cpu, report, expected):
    cpu(report=report)
    assert gather_flags("gcc", NATIVE) == expected


@pytest.mark.parametrize("tune", ["icelake-server", "sapphirerapids", "znver4", None])
def test_a_tuning_gcc_knows_keeps_its_own_choice(cpu, tune):
    cpu(tune=tune)
    assert gather_flags("gcc", NATIVE) == ()


@pytest.mark.parametrize("vendor", ["AuthenticAMD", ""])
def test_only_on_intel(cpu, vendor):
    cpu(vendor=vendor)
    assert gather_flags("gcc", NATIVE) == ()


def test_not_without_a_compiler_or_off_x86(cpu, monkeypatch):
    cpu()
    assert gather_flags(None, NATIVE) == ()
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    gather_flags.cache_clear()
    assert gather_flags("gcc", NATIVE) == ()


def test_the_flag_is_in_every_module_and_extra_cflags_come_last(cpu):
    cpu()
    config = dataclasses.replace(default_config(), extra_cflags=("-DOG_TEST=1",))
    flags = Toolchain(config).flags(frozenset())
    assert flags.index(GATHER_FLAG) < flags.index("-DOG_TEST=1")


def test_the_tuning_is_asked_of_the_whole_target_with_extra_cflags(cpu, monkeypatch):
    cpu()
    asked: list[tuple[str, ...]] = []

    def tune(_compiler: str, target: tuple[str, ...]) -> str:
        asked.append(target)
        return "znver4"

    monkeypatch.setattr(gather_tuning, "resolved_tune", tune)
    config = dataclasses.replace(default_config(), extra_cflags=("-mtune=znver4",))
    assert GATHER_FLAG not in Toolchain(config).flags(frozenset())
    assert asked and asked[-1][-1] == "-mtune=znver4"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc on PATH to ask its tuning")
def test_gcc_reports_the_tuning_it_resolves():
    assert resolved_tune("gcc", ("-march=x86-64", "-mtune=skylake-avx512")) == "skylake-avx512"
    assert resolved_tune("gcc", ("-march=x86-64", "-mtune=generic")) == "generic"
    assert resolved_tune("gcc", ("-mno-such-flag",)) is None


def test_no_tuning_from_a_compiler_that_is_not_there():
    assert resolved_tune("/nonexistent/cc", NATIVE) is None
