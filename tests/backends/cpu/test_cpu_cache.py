"""The compile cache: private directory, integrity records, repair, fallback, eviction, CLI."""

import dataclasses
import errno
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import (
    CacheError,
    CacheWarning,
    CpuBackend,
    CpuConfigError,
    compiler,
    config,
    default_config,
)
from opgraph.backends.cpu import cache as cache_module
from opgraph.cli import main


def backend_at(directory: Path, **changes) -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), cache_dir=directory, **changes))


def function(scale: float = 2.0, name: str = "f") -> og.Function:
    x = og.parameter(og.f32, (5,))
    return og.Function(
        [ops.multiply(ops.exp(x), og.constant(np.full(5, scale, np.float32)))], [x], name=name
    )


def check_runs(exe, scale: float = 2.0) -> None:
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(exe(x)[0], np.exp(x) * scale, rtol=1e-6)


def test_cache_directory_is_created_private(tmp_path):
    directory = tmp_path / "a" / "b"
    check_runs(backend_at(directory).compile(function()))
    assert os.stat(directory).st_mode & 0o777 == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o775, 0o757])
def test_group_or_world_writable_directory_is_refused(tmp_path, mode):
    directory = tmp_path / "shared"
    directory.mkdir()
    os.chmod(directory, mode)
    with pytest.raises(CacheError, match="writable by its group or by everyone") as info:
        backend_at(directory).compile(function())
    assert "use a private directory" in str(info.value)
    assert list(directory.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_directory_of_another_user_is_refused(tmp_path):
    directory = tmp_path / "theirs"
    directory.mkdir(mode=0o700)
    os.chown(directory, 65534, 65534)
    with pytest.raises(CacheError, match="owned by uid 65534, not by this user"):
        backend_at(directory).compile(function())


def test_entries_carry_an_integrity_record(tmp_path):
    exe = backend_at(tmp_path).compile(function())
    record = json.loads(exe.compiled.path.with_suffix(".json").read_text())
    data = exe.compiled.path.read_bytes()
    assert record == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert exe.compiled.path.stat().st_mode & 0o022 == 0


def _rewrite(so: Path, data: bytes) -> None:
    """Replace the file (a new inode): this process has the old one mapped, and changing a
    mapped library in place would crash it — which is why the cache only ever renames."""
    fresh = so.with_name("fresh.tmp")
    fresh.write_bytes(data)
    os.chmod(fresh, 0o600)
    os.replace(fresh, so)


def _truncate(so: Path) -> None:
    _rewrite(so, so.read_bytes()[: so.stat().st_size // 2])


def _garbage(so: Path) -> None:
    size = so.stat().st_size
    _rewrite(so, bytes(range(256)) * (size // 256) + bytes(size % 256))


def _flip_byte(so: Path) -> None:
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    _rewrite(so, bytes(data))


def _symlink(so: Path) -> None:
    target = so.with_name("elsewhere.bin")
    os.replace(so, target)
    so.symlink_to(target)


DAMAGE = {
    "truncated": (_truncate, "record says"),
    "empty": (lambda so: _rewrite(so, b""), "record says"),
    "garbage": (_garbage, "SHA-256 does not match"),
    "one byte flipped": (_flip_byte, "SHA-256 does not match"),
    "group-writable": (lambda so: os.chmod(so, 0o666), "writable by others"),
    "symlink": (_symlink, "Too many levels of symbolic links"),
    "record garbage": (lambda so: so.with_suffix(".json").write_text("{"), "record unreadable"),
    "record wrong hash": (
        lambda so: so.with_suffix(".json").write_text(
            json.dumps({"size": so.stat().st_size, "sha256": "0" * 64})
        ),
        "SHA-256 does not match",
    ),
    "module missing": (lambda so: so.unlink(), "module file is missing"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_entry_is_deleted_and_rebuilt(tmp_path, damage):
    first = backend_at(tmp_path).compile(function(3.0))
    harm, reason = DAMAGE[damage]
    harm(first.compiled.path)
    with pytest.warns(CacheWarning, match=f"is unusable \\(.*{reason}.*\\); deleting it"):
        again = backend_at(tmp_path).compile(function(3.0))
    assert not again.compiled.cache_hit
    check_runs(again, 3.0)
    third = backend_at(tmp_path).compile(function(3.0))
    assert third.compiled.cache_hit


def test_module_without_record_is_never_loaded(tmp_path):
    """A file under a module's name with no record (planted, or an interrupted install) is a
    miss: it is compiled over, never opened."""
    exe = backend_at(tmp_path).compile(function(4.0))
    exe.compiled.path.with_suffix(".json").unlink()
    _rewrite(exe.compiled.path, b"not a library")
    again = backend_at(tmp_path).compile(function(4.0))
    assert not again.compiled.cache_hit
    assert again.compiled.path.read_bytes()[:4] == b"\x7fELF"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_build_directories_are_swept(tmp_path):
    now = time.time()
    dead, alive = _dead_pid(), os.getpid()
    ages = {
        f".build-{dead}-old": 3600,  # dead and old: stale
        f".build-{dead}-new": 5,  # dead but recent: maybe another pid namespace; kept
        f".build-{alive}-old": 3600,  # a living process may still be compiling: kept
        f".build-{alive}-ancient": 3 * 86400,  # older than a day: stale whatever the pid
        ".build-legacy": 3600,  # no pid (older versions): stale when old
    }
    for name, age in ages.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "x.c").write_text("")
        os.utime(tmp_path / name, (now - age, now - age))
    removed = cache_module.sweep_builds(tmp_path, now=now)
    assert sorted(removed) == sorted(
        [f".build-{dead}-old", f".build-{alive}-ancient", ".build-legacy"]
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f".build-{dead}-new", f".build-{alive}-old"]
    )


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_unwritable_cache_falls_back_to_a_private_directory(tmp_path, monkeypatch, code):
    directory = tmp_path / "cache"
    real = cache_module.ModuleCache._build_and_install

    def failing(self, key, build, at):
        if at == directory:
            raise OSError(code, os.strerror(code))
        return real(self, key, build, at)

    monkeypatch.setattr(cache_module.ModuleCache, "_build_and_install", failing)
    with pytest.warns(CacheWarning, match=f"cannot be written \\({os.strerror(code)}"):
        exe = backend_at(directory, cache_max=(1 << 30) + code).compile(function(5.0))
    assert exe.compiled.path.parent != directory
    assert exe.compiled.path.parent.name.startswith("opgraph-cache-")
    assert os.stat(exe.compiled.path.parent).st_mode & 0o777 == 0o700
    check_runs(exe, 5.0)


def test_full_disk_everywhere_names_the_cause(tmp_path, monkeypatch):
    def full(self, key, build, at):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache_module.ModuleCache, "_build_and_install", full)
    with pytest.warns(CacheWarning), pytest.raises(CacheError) as info:
        backend_at(tmp_path / "c", cache_max=(1 << 30) + 1).compile(function(6.0))
    assert "the disk or quota holding it is full" in str(info.value)
    assert "bug" not in str(info.value)


def test_compiler_messages_about_the_disk_are_not_bugs(tmp_path):
    with pytest.raises(OSError) as info:
        compiler._raise_for_filesystem("cc1: fatal error: No space left on device", tmp_path)
    assert info.value.errno == errno.ENOSPC
    compiler._raise_for_filesystem("error: expected ';' before '}' token", tmp_path)  # no raise


def _entry_sizes(directory: Path) -> dict[str, int]:
    groups, _ = cache_module._entries(directory)
    return {key: cache_module._size_and_use(files)[0] for key, files in groups.items()}


def test_least_recently_used_entries_are_evicted(tmp_path):
    backend = backend_at(tmp_path)
    a, b, c = (backend.compile(function(s)) for s in (7.0, 8.0, 9.0))
    keys = [e.compiled.key for e in (a, b, c)]
    old = time.time() - 1000
    for age, key in enumerate(keys):  # a is the oldest, c the newest
        os.utime(tmp_path / f"{key}.json", (old + age, old + age))
        os.utime(tmp_path / f"{key}.so", (old + age, old + age))
    assert backend.compile(function(7.0)).compiled.cache_hit  # using a refreshes it
    sizes = _entry_sizes(tmp_path)
    limit = sum(sizes.values()) - sizes[keys[1]]
    left = cache_module.evict(tmp_path, limit)
    assert left <= limit
    remaining = _entry_sizes(tmp_path)
    assert keys[1] not in remaining and keys[0] in remaining and keys[2] in remaining


def test_cache_max_bounds_the_directory(tmp_path):
    backend = backend_at(tmp_path, cache_max=1)
    for scale in (10.0, 11.0, 12.0):
        exe = backend.compile(function(scale))
        check_runs(exe, scale)
    assert list(_entry_sizes(tmp_path)) == [exe.compiled.key]  # only the newest is kept


def test_environment_names_the_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("OPGRAPH_CACHE_DIR", raising=False)
    monkeypatch.setenv("OPGRAPH_CPU_CACHE_DIR", str(tmp_path / "old"))
    assert config._default_cache_dir() == tmp_path / "old"  # the older name still works
    monkeypatch.setenv("OPGRAPH_CACHE_DIR", str(tmp_path / "new"))
    assert config._default_cache_dir() == tmp_path / "new"  # the new name wins
    monkeypatch.delenv("OPGRAPH_CACHE_MAX", raising=False)
    assert config._default_cache_max() == 1 << 30
    for text, expected in [
        ("500M", 500 << 20),
        ("2G", 2 << 30),
        ("1.5GiB", 3 << 29),
        ("4096", 4096),
    ]:
        monkeypatch.setenv("OPGRAPH_CACHE_MAX", text)
        assert config._default_cache_max() == expected
    monkeypatch.setenv("OPGRAPH_CACHE_MAX", "lots")
    with pytest.raises(CpuConfigError, match="OPGRAPH_CACHE_MAX='lots' is not a size"):
        config._default_cache_max()


def test_cli_cache_info_and_clear(tmp_path, capsys):
    exe = backend_at(tmp_path).compile(function(13.0))
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"directory   {tmp_path}" in out and "entries     2" in out  # module and runtime
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert not exe.compiled.path.exists()
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 0
    assert "entries     0" in capsys.readouterr().out
    os.chmod(tmp_path, 0o777)
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 1
    assert "UNSAFE" in capsys.readouterr().out
    assert main(["cache", "clear", "--dir", str(tmp_path)]) == 1
    assert "refusing to clear" in capsys.readouterr().err
