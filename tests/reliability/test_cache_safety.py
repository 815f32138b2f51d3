"""The compile cache under attack and on hostile file systems (repros 02, 04 and 12).

Every victim runs in a subprocess with faulthandler on, so a SIGBUS/SIGILL from a bad module
fails the test with a traceback instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

VICTIM = textwrap.dedent(
    """
    import json, warnings
    import numpy as np, opgraph as og
    from opgraph import ops
    warnings.simplefilter("always")
    x = og.parameter(og.f32, (7,), name="x")
    c = og.constant(np.full(7, 3.25, np.float32))
    fn = og.Function([ops.add(ops.multiply(ops.relu(x), c), x)], [x], name="victim")
    try:
        exe = og.backend("CPU").compile(fn)
        out = exe(np.arange(-3, 4, dtype=np.float32))[0]
        print("RESULT", json.dumps({"ok": True, "hit": exe.compiled.cache_hit,
              "path": str(exe.compiled.path), "out": out.tolist()}))
    except og.OpgraphError as e:
        print("RESULT", json.dumps({"ok": False, "exc": type(e).__name__, "msg": str(e)}))
    """
)
EXPECTED = [float(v) for v in np.maximum(np.arange(-3, 4), 0) * 3.25 + np.arange(-3, 4)]


def run_victim(cache: Path, prefix: list[str] | None = None) -> tuple[dict, str]:
    env = {
        **os.environ,
        "OPGRAPH_CACHE_DIR": str(cache),
        "OPGRAPH_CPU_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [*(prefix or []), sys.executable, "-X", "faulthandler", "-c", VICTIM]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-3000:]}"
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :]), done.stderr


def _rewrite(path: Path, data: bytes) -> None:
    path.write_bytes(data)  # in place: another process's torn write


CORRUPTIONS = {
    "truncate": lambda p, rng: os.truncate(p, int(rng.integers(0, p.stat().st_size))),
    "flip bytes": lambda p, rng: _flip(p, rng),
    "garbage": lambda p, rng: _rewrite(p, rng.bytes(p.stat().st_size)),
    "empty": lambda p, rng: _rewrite(p, b""),
    "append": lambda p, rng: _rewrite(p, p.read_bytes() + rng.bytes(64)),
    "record garbage": lambda p, rng: _rewrite(p.with_suffix(".json"), rng.bytes(40)),
    "record deleted": lambda p, rng: p.with_suffix(".json").unlink(),
    "module deleted": lambda p, rng: p.unlink(),
}


def _flip(path: Path, rng: np.random.Generator) -> None:
    data = bytearray(path.read_bytes())
    for at in rng.integers(0, len(data), size=int(rng.integers(1, 8))):
        data[at] ^= int(rng.integers(1, 256))
    _rewrite(path, bytes(data))


def test_repro_04_corrupted_entries_are_repaired(tmp_path, fuzz_cases):
    """Each case damages the module or the runtime library of a warm cache; the next run
    must detect it, rebuild, and give the right answer — twice in a row."""
    cache = tmp_path / "cache"
    first, _ = run_victim(cache)
    assert first["ok"] and first["out"] == EXPECTED
    module = Path(first["path"])
    runtime = next(cache.glob("*-runtime.so"))
    rng = np.random.default_rng(4)
    for case in range(fuzz_cases(8)):
        name = list(CORRUPTIONS)[case % len(CORRUPTIONS)]
        target = module if rng.integers(2) else runtime
        CORRUPTIONS[name](target, rng)
        for attempt in range(2):
            result, stderr = run_victim(cache)
            assert result["ok"] and result["out"] == EXPECTED, (name, target, result)
            if attempt == 1:
                assert result["hit"], (name, "the repaired entry is reused")


def test_repro_02_planted_library_in_shared_directory_never_runs(tmp_path):
    """A world-writable shared cache is refused; a library planted in a private cache
    without a valid record is compiled over, never loaded."""
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil.c"
    evil.write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void pwn(void) "
        f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n'
    )
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    result, _ = run_victim(shared)
    assert not result["ok"] and result["exc"] == "CacheError"
    assert "writable by its group or by everyone" in result["msg"]
    # a private cache, warmed, then every module replaced by the attacker's library
    private = tmp_path / "private"
    run_victim(private)
    for so in private.glob("*.so"):
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(evil)], check=True)
    result, stderr = run_victim(private)
    assert result["ok"] and result["out"] == EXPECTED
    assert "SHA-256 does not match" in stderr or "record says" in stderr
    assert not marker.exists()


def _can_mount() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


needs_mount = pytest.mark.skipif(
    not _can_mount(), reason="needs root and a private mount namespace (unshare -m) for tmpfs"
)


def _in_namespace(cache: Path, setup: str) -> list[str]:
    """A command prefix running the victim in a private mount namespace after ``setup``."""
    script = f'mkdir -p {cache} && {setup} && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh"]


@needs_mount
def test_repro_12_read_only_empty_cache_falls_back(tmp_path):
    cache = tmp_path / "ro"
    setup = f"mount -t tmpfs -o size=20m,mode=0700 tmpfs {cache} && mount -o remount,ro {cache}"
    result, stderr = run_victim(cache, _in_namespace(cache, setup))
    assert result["ok"] and result["out"] == EXPECTED
    assert "CacheWarning" in stderr and "read-only file system" in stderr
    assert not result["path"].startswith(str(cache))


@needs_mount
def test_repro_12_read_only_warm_cache_serves_hits(tmp_path):
    cache = tmp_path / "warm"
    first, _ = run_victim(cache)
    setup = f"mount --bind {cache} {cache} && mount -o remount,bind,ro {cache}"
    result, stderr = run_victim(cache, _in_namespace(cache, setup))
    assert result["ok"] and result["hit"] and result["out"] == EXPECTED
    assert "CacheWarning" not in stderr


@needs_mount
def test_repro_12_full_disk_falls_back_and_blames_the_disk(tmp_path):
    cache = tmp_path / "full"
    setup = (
        f"mount -t tmpfs -o size=200k,mode=0700 tmpfs {cache} && "
        f"head -c 190000 /dev/zero > {cache}/filler"
    )
    result, stderr = run_victim(cache, _in_namespace(cache, setup))
    assert result["ok"] and result["out"] == EXPECTED
    assert "the disk or quota holding it is full" in stderr
    assert "bug" not in stderr


def test_repro_12_kill_during_compile_leaves_a_build_that_is_swept(tmp_path):
    """kill -9 during gcc leaves ``.build-<pid>-*`` (with gcc's temporary files inside it,
    none in /tmp); once it is old and its process dead, the next process removes it."""
    cache = tmp_path / "killed"
    run_victim(cache)  # the runtime library is built: the next compile is the big one
    big = textwrap.dedent(
        """
        import numpy as np, opgraph as og
        from opgraph import ops
        x = og.parameter(og.f32, (64, 64)); y = x
        for k in range(40):
            y = ops.tanh(ops.add(ops.dot(y, og.constant(np.full((64, 64), 0.37 / (k + 1),
                np.float32))), og.constant(np.full((64, 64), k, np.float32))))
        og.backend("CPU").compile(og.Function([ops.softmax(y, 1)], [x]))
        """
    )
    env = {
        **os.environ,
        "OPGRAPH_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    child = subprocess.Popen([sys.executable, "-c", big], env=env, start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(cache.glob(".build-*/*.c")) and child.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    builds = list(cache.glob(".build-*"))
    if not builds:
        pytest.skip("the compile finished before it could be killed")
    old = time.time() - 3600
    for build in builds:
        os.utime(build, (old, old))
    result, _ = run_victim(cache)
    assert result["ok"] and result["hit"]
    assert list(cache.glob(".build-*")) == []
