"""``config.l2_cache_bytes`` reads the first core's L2 size from sysfs (the panel GEMM's L2
budget, ``dialect.NEXT_GROUP_L2_BYTES``, is a share of it): KiB and MiB sizes, data or unified
caches of level 2 only, and ``DEFAULT_L2_BYTES`` where sysfs lists none or an unreadable size;
``config.l3_cache_bytes`` the L3's the same way (``DEFAULT_L3_BYTES``), and
``config.l3_held_bytes`` the L3 at most ``L3_BYTES_PER_CPU`` a CPU sharing it."""

from __future__ import annotations

import pytest

from opgraph.backends.cpu import config as cpu_config


def _caches(root, *indexes, first=0):
    for i, (level, kind, size, *shared) in enumerate(indexes, first):
        index = root / f"index{i}"
        index.mkdir()
        files = [("level", level), ("type", kind), ("size", size)]
        files += [("shared_cpu_list", cpus) for cpus in shared]  # where given
        for name, value in files:
            (index / name).write_text(value + "\n")


@pytest.mark.parametrize(
    ("indexes", "want"),
    [
        ([("1", "Data", "48K"), ("1", "Instruction", "32K"), ("2", "Unified", "1024K")], 1 << 20),
        ([("1", "Data", "48K"), ("2", "Unified", "2M"), ("3", "Unified", "32768K")], 2 << 20),
        ([("2", "Instruction", "512K"), ("2", "Data", "256K")], 256 << 10),
        ([("1", "Data", "48K"), ("3", "Unified", "32M")], cpu_config.DEFAULT_L2_BYTES),
        ([("2", "Unified", "1.5M")], cpu_config.DEFAULT_L2_BYTES),  # not a whole size
        ([("2", "Unified", "0K")], cpu_config.DEFAULT_L2_BYTES),
        ([], cpu_config.DEFAULT_L2_BYTES),  # no sysfs caches (another OS, a container)
    ],
)
def test_l2_cache_bytes_reads_sysfs(monkeypatch, tmp_path, indexes, want):
    assert _read(monkeypatch, tmp_path, indexes, cpu_config.l2_cache_bytes) == want


def _read(monkeypatch, tmp_path, indexes, reader):
    """``reader()`` (a cached sysfs reader of ``config``) over the caches ``indexes``."""
    _caches(tmp_path, *indexes)
    monkeypatch.setattr(cpu_config, "_SYSFS_CACHES", tmp_path)
    reader.cache_clear()
    try:
        return reader()
    finally:
        reader.cache_clear()


def test_l2_cache_bytes_skips_an_unreadable_index(monkeypatch, tmp_path):
    (tmp_path / "index0").mkdir()  # no level/type/size files
    _caches(tmp_path, ("2", "Unified", "512K"), first=1)
    monkeypatch.setattr(cpu_config, "_SYSFS_CACHES", tmp_path)
    cpu_config.l2_cache_bytes.cache_clear()
    try:
        assert cpu_config.l2_cache_bytes() == 512 << 10
    finally:
        cpu_config.l2_cache_bytes.cache_clear()


@pytest.mark.parametrize(
    ("indexes", "want"),
    [
        ([("2", "Unified", "1024K"), ("3", "Unified", "32768K")], 32 << 20),
        ([("1", "Data", "48K"), ("3", "Unified", "105M")], 105 << 20),
        ([("2", "Unified", "1024K")], cpu_config.DEFAULT_L3_BYTES),  # no L3 listed
        ([("3", "Instruction", "8M")], cpu_config.DEFAULT_L3_BYTES),
    ],
)
def test_l3_cache_bytes_reads_sysfs(monkeypatch, tmp_path, indexes, want):
    """``config.l3_cache_bytes`` (``dialect.RESIDENT_BYTES`` is half of it) reads the same way."""
    assert _read(monkeypatch, tmp_path, indexes, cpu_config.l3_cache_bytes) == want


@pytest.mark.parametrize(
    ("indexes", "want"),
    [
        # a Zen 5 guest's CCD (2 CPUs listed): 32 MiB, not capped
        ([("2", "Unified", "1024K", "0"), ("3", "Unified", "32768K", "0-1")], 32 << 20),
        # a 2-CPU guest of a 260 MiB Emerald Rapids socket: 16 MiB a CPU
        ([("2", "Unified", "2048K", "0"), ("3", "Unified", "266240K", "0-1")], 32 << 20),
        ([("3", "Unified", "266240K", "0-3,8,10-11")], 7 * cpu_config.L3_BYTES_PER_CPU),
        ([("3", "Unified", "96M", "0-7")], 96 << 20),  # an X3D CCD: 12 MiB a CPU
        ([("3", "Unified", "105M")], 105 << 20),  # no shared_cpu_list: not capped
        ([("3", "Unified", "105M", "")], 105 << 20),  # unreadable: not capped
        ([("2", "Unified", "1024K")], cpu_config.DEFAULT_L3_BYTES),  # no L3 listed
    ],
)
def test_l3_held_bytes_caps_the_l3_per_cpu_sharing_it(monkeypatch, tmp_path, indexes, want):
    """``config.l3_held_bytes`` (``dialect.RESIDENT_BYTES`` is half of it)."""
    assert _read(monkeypatch, tmp_path, indexes, cpu_config.l3_held_bytes) == want
