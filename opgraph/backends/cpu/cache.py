"""The on-disk cache of compiled modules: safe on any directory, self-repairing, bounded.

Layout: ``<dir>/<key>.so`` (the module), ``<key>.json`` (its integrity record: size and
SHA-256), ``<key>.c`` (the source, kept for reading) and ``<key>.lock`` (serializes builds of
one key across threads and processes). Builds run in ``<dir>/.build-<pid>-*``.

* The directory is created 0700 and refused (:class:`CacheError`) when it is not a directory
  owned by this user, or when it is group- or world-writable: nothing is loaded from a place
  another user can write.
* A module is loaded only after its file — opened once, without following links, owned by
  this user and not writable by others — matches its record, and is still the file at that
  path when ``dlopen`` maps it. A
  missing or wrong record, a short or altered file, or a load failure discards the entry and
  rebuilds it, with a :class:`CacheWarning`; a bad file is never mapped (a truncated ``.so``
  would SIGBUS).
* Writes go to a private build directory, are fsynced, then renamed into place (module first,
  record last, then the directory is fsynced): readers see a whole entry or none.
* ``.build-*`` directories of dead processes, or older than a day, are removed when a process
  first uses the cache.
* A read-only or full cache directory falls back to a private temporary directory for the rest
  of the process, with a CacheWarning naming the cause.
* The cache is bounded (``OPGRAPH_CACHE_MAX``, default 1 GiB): after an install, entries are
  evicted least recently used first (a hit refreshes the record's modification time).
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from opgraph.core.errors import OpgraphError

#: Errors that mean "this directory cannot take the module": fall back to a private one.
UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT})
#: A build directory older than this whose process is gone is stale.
STALE_BUILD_SECONDS = 600.0
#: A build directory older than this is stale whatever its name says (another pid namespace).
ABANDONED_BUILD_SECONDS = 86400.0
#: Installs between two full scans of the cache's size (other processes add entries too).
RESCAN_EVERY = 64
ENTRY_SUFFIXES = (".so", ".c", ".json", ".lock")


class CacheError(OpgraphError, RuntimeError):
    """The compile cache cannot be used safely (unsafe directory, unwritable fallback, …)."""


class CacheWarning(UserWarning):
    """The compile cache repaired an entry or fell back to a private directory."""


@dataclass(frozen=True)
class CacheInfo:
    """What ``opgraph cache info`` reports."""

    directory: Path
    max_bytes: int
    entries: int
    total_bytes: int
    builds: int
    problem: str | None


class ModuleCache:
    """One cache directory, shared by the threads of this process (see :func:`module_cache`)."""

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.configured = directory
        self.directory = directory
        self.max_bytes = max_bytes
        self.fallback_reason: str | None = None
        self._prepared = False
        self._lock = threading.RLock()
        self._estimate: int | None = None
        self._installs = 0

    # ----------------------------------------------------------------------- loading
    def load(
        self,
        key: str,
        build: Callable[[Path, str], Path],
        mode: int,
        before_load: Callable[[], None] | None = None,
    ) -> tuple[ctypes.CDLL, Path, bool]:
        """The library for ``key`` (loaded with ``mode``) and its path, and whether it came
        from the cache; on a miss ``build(work_dir, key)`` writes ``<key>.so`` and
        ``<key>.c`` into ``work_dir`` and returns the module's path. ``before_load`` runs
        just before a verified file is mapped (a module waits there for the libraries it
        resolves symbols against, which may be building beside its own compile)."""
        self.prepare()
        at = self.directory  # one attempt stays in one directory (see _fall_back)
        library, _ = self._try_load(key, mode, before_load, at)
        if library is not None:
            return library, self.path(key, at=at), True
        try:
            library = self._load_or_build(key, build, mode, before_load, at)
        except OSError as error:
            # a fallback made by another thread meanwhile (libraries build side by side)
            # still gets this attempt's retry in the new directory
            if error.errno not in UNWRITABLE or at != self.configured:
                raise self._write_error(error) from error
            self._fall_back(error)
            at = self.directory
            try:
                library = self._load_or_build(key, build, mode, before_load, at)
            except OSError as second:
                raise self._write_error(second) from second
        return library, self.path(key, at=at), False

    def path(self, key: str, suffix: str = ".so", at: Path | None = None) -> Path:
        """Where ``key``'s file with ``suffix`` lives in ``at`` (default: the directory in
        use)."""
        return (self.directory if at is None else at) / f"{key}{suffix}"

    def _load_or_build(
        self,
        key: str,
        build: Callable[[Path, str], Path],
        mode: int,
        before_load: Callable[[], None] | None,
        at: Path,
    ) -> ctypes.CDLL:
        with self._locked(key, at):
            library, problem = self._try_load(key, mode, before_load, at)
            if library is not None:
                return library
            if problem is not None:
                warnings.warn(
                    f"opgraph: compile cache entry {self.path(key, at=at)} is unusable "
                    f"({problem}); deleting it and compiling again",
                    CacheWarning,
                    stacklevel=4,
                )
                self._discard(key, at)
            self._build_and_install(key, build, at)
            library, problem = self._try_load(key, mode, before_load, at)
            if library is None:
                raise CacheError(
                    f"the module just compiled into {self.path(key, at=at)} cannot be loaded: "
                    f"{problem}"
                )
        self._evict(keep=key)
        return library

    def _try_load(
        self, key: str, mode: int, before_load: Callable[[], None] | None, at: Path
    ) -> tuple[ctypes.CDLL | None, str | None]:
        """(library, None) after verifying it; (None, None) when there is no entry; (None,
        why) when the entry is damaged."""
        record_path = self.path(key, ".json", at)
        try:
            record = json.loads(_read_private(record_path, limit=4096))
            size, digest = int(record["size"]), str(record["sha256"])
        except FileNotFoundError:
            return None, None
        except (OSError, ValueError, KeyError, TypeError) as error:
            return None, f"integrity record unreadable: {error}"
        so_path = self.path(key, at=at)
        try:
            fd = _open_private(so_path)
        except FileNotFoundError:
            return None, "the module file is missing"
        except OSError as error:
            return None, str(error)
        try:
            found = os.fstat(fd).st_size
            if found != size:
                return None, f"the module is {found} bytes, its record says {size}"
            if _sha256(fd) != digest:
                return None, "the module's SHA-256 does not match its record"
            if before_load is not None:
                before_load()
            try:
                library = _dlopen_verified(fd, so_path, mode)
            except OSError as error:
                return None, f"the dynamic loader refused it: {error}"
        finally:
            os.close(fd)
        with suppress(OSError):  # a read-only cache still serves hits
            os.utime(record_path)  # least recently used = oldest record
        return library, None

    # ---------------------------------------------------------------------- building
    @contextmanager
    def _locked(self, key: str, at: Path) -> Iterator[None]:
        fd = os.open(self.path(key, ".lock", at), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _build_and_install(self, key: str, build: Callable[[Path, str], Path], at: Path) -> None:
        work = Path(tempfile.mkdtemp(prefix=f".build-{os.getpid()}-", dir=at))
        try:
            so_file = build(work, key)
            data = so_file.read_bytes()
            os.chmod(so_file, 0o600)
            _fsync_file(so_file)
            record = json.dumps({"size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            record_file = work / f"{key}.json"
            record_file.write_text(record)
            _fsync_file(record_file)
            c_file = work / f"{key}.c"
            if c_file.exists():
                os.replace(c_file, self.path(key, ".c", at))
            os.replace(so_file, self.path(key, at=at))  # the module first, its record last
            os.replace(record_file, self.path(key, ".json", at))
            _fsync_dir(at)
            self._added(len(data) + len(record))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _discard(self, key: str, at: Path) -> None:
        for suffix in (".json", ".so", ".c"):  # the record first: readers then see a miss
            with suppress(FileNotFoundError):
                self.path(key, suffix, at).unlink()

    # ---------------------------------------------------------------- the directory
    def prepare(self) -> None:
        """Create or check the directory and sweep stale builds (once per process)."""
        with self._lock:
            if self._prepared:
                return
            try:
                make_private_dir(self.directory)
            except OSError as error:
                if error.errno not in UNWRITABLE:
                    raise self._write_error(error) from error
                self._fall_back(error)
            else:
                sweep_builds(self.directory)
            self._prepared = True

    def _fall_back(self, error: OSError) -> None:
        with self._lock:
            if self.fallback_reason is not None:
                return
            try:
                private = Path(tempfile.mkdtemp(prefix="opgraph-cache-"))
            except OSError as second:
                raise CacheError(
                    f"the compile cache {self.configured} cannot be written ({_cause(error)}) "
                    f"and no private temporary directory could be made ({_cause(second)})"
                ) from second
            atexit.register(shutil.rmtree, private, ignore_errors=True)
            self.fallback_reason = _cause(error)
            self.directory = private
            self._estimate = None
            warnings.warn(
                f"opgraph: the compile cache {self.configured} cannot be written "
                f"({self.fallback_reason}); compiling into the private temporary directory "
                f"{private} for this process. Set OPGRAPH_CACHE_DIR to a writable directory "
                "to keep compiled modules.",
                CacheWarning,
                stacklevel=5,
            )

    def _write_error(self, error: OSError) -> CacheError:
        return CacheError(
            f"the compile cache {self.directory} cannot be used: {_cause(error)}"
            + (f" (after falling back from {self.configured})" if self.fallback_reason else "")
        )

    # ---------------------------------------------------------------------- eviction
    def _added(self, nbytes: int) -> None:
        with self._lock:
            self._installs += 1
            if self._estimate is not None and self._installs % RESCAN_EVERY:
                self._estimate += nbytes
            else:
                self._estimate = None

    def _evict(self, keep: str) -> None:
        with self._lock:
            if self._estimate is not None and self._estimate <= self.max_bytes:
                return
            self._estimate = evict(self.directory, self.max_bytes, keep)


def make_private_dir(directory: Path) -> None:
    """Create ``directory`` (mode 0700) or check an existing one: a directory owned by this
    user that no one else can write. Raises CacheError when unsafe, OSError when it cannot
    be created."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    problem = unsafe_reason(directory)
    if problem:
        raise CacheError(
            f"refusing the compile cache {directory}: {problem}. Modules loaded from it could "
            "have been written by someone else; use a private directory (chmod 700 it, or set "
            "OPGRAPH_CACHE_DIR to one you own)"
        )


def unsafe_reason(directory: Path) -> str | None:
    """Why ``directory`` may not hold modules this process loads, or None when it is safe."""
    st = os.stat(directory)
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"it is writable by its group or by everyone (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def sweep_builds(directory: Path, now: float | None = None) -> list[str]:
    """Remove build directories left by processes that died (kill -9 during a compile); a
    build of a living process, or a recent one, is left alone. Returns the names removed."""
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(".build-"):
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if age > ABANDONED_BUILD_SECONDS or (
            age > STALE_BUILD_SECONDS and not _alive(_build_pid(entry.name))
        ):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    return removed


def _build_pid(name: str) -> int | None:
    part = name[len(".build-") :].split("-", 1)[0]
    return int(part) if part.isdigit() else None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _entries(directory: Path) -> tuple[dict[str, list[os.DirEntry[str]]], int]:
    """Files of the cache by entry key, and how many build directories there are."""
    groups: dict[str, list[os.DirEntry[str]]] = {}
    builds = 0
    for entry in os.scandir(directory):
        if entry.name.startswith(".build-"):
            builds += 1
            continue
        key, dot, suffix = entry.name.partition(".")
        if dot and f".{suffix}" in ENTRY_SUFFIXES and entry.is_file(follow_symlinks=False):
            groups.setdefault(key, []).append(entry)
    return groups, builds


def _size_and_use(files: list[os.DirEntry[str]]) -> tuple[int, float]:
    size, used = 0, 0.0
    for f in files:
        try:
            st = f.stat(follow_symlinks=False)
        except OSError:
            continue
        size += st.st_size
        if f.name.endswith((".json", ".so")):
            used = max(used, st.st_mtime)
    return size, used


def evict(directory: Path, max_bytes: int, keep: str | None = None) -> int:
    """Delete least recently used entries until the cache holds at most ``max_bytes`` (never
    ``keep``); returns the bytes left."""
    try:
        groups, _ = _entries(directory)
    except OSError:
        return 0
    sized = {key: _size_and_use(files) for key, files in groups.items()}
    total = sum(size for size, _ in sized.values())
    for key in sorted(sized, key=lambda k: sized[k][1]):
        if total <= max_bytes:
            break
        if key != keep and _remove_entry(directory, key):
            total -= sized[key][0]
    return total


def _remove_entry(directory: Path, key: str) -> bool:
    """Delete an entry's files unless a build of it holds its lock right now."""
    try:
        fd = os.open(directory / f"{key}.lock", os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        fd = -1  # no lock file: nobody is building it
    try:
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # being built or repaired
        for suffix in (".json", ".so", ".c", ".lock"):  # the record first
            with suppress(OSError):
                (directory / f"{key}{suffix}").unlink()
        return True
    finally:
        if fd >= 0:
            os.close(fd)


def cache_info(directory: Path, max_bytes: int) -> CacheInfo:
    """Entries and bytes held by the cache in ``directory`` (which need not exist)."""
    if not directory.exists():
        return CacheInfo(directory, max_bytes, 0, 0, 0, None)
    problem = unsafe_reason(directory)
    groups, builds = _entries(directory)
    total = sum(_size_and_use(files)[0] for files in groups.values())
    return CacheInfo(directory, max_bytes, len(groups), total, builds, problem)


def clear_cache(directory: Path) -> tuple[int, int]:
    """Delete every entry and stale build of the cache in ``directory``; builds in progress
    are left alone. Returns (entries removed, bytes freed). Refuses an unsafe directory."""
    if not directory.exists():
        return 0, 0
    problem = unsafe_reason(directory)
    if problem:
        raise CacheError(f"refusing to clear {directory}: {problem}")
    groups, _ = _entries(directory)
    freed, removed = 0, 0
    for key, files in groups.items():
        size = _size_and_use(files)[0]
        if _remove_entry(directory, key):
            freed, removed = freed + size, removed + 1
    sweep_builds(directory)
    return removed, freed


_DLOPEN_LOCK = threading.Lock()
_CACHES: dict[tuple[Path, int], ModuleCache] = {}
_CACHES_LOCK = threading.Lock()


def module_cache(directory: Path, max_bytes: int) -> ModuleCache:
    """The process-wide ModuleCache of ``directory`` (one per directory and limit)."""
    with _CACHES_LOCK:
        key = (directory, max_bytes)
        found = _CACHES.get(key)
        if found is None:
            found = _CACHES[key] = ModuleCache(directory, max_bytes)
        return found


# --------------------------------------------------------------------------- file helpers
def _open_private(path: Path) -> int:
    """A read descriptor of ``path``: a regular file (not a link) owned by this user and not
    writable by others; raises OSError saying what is wrong."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(st.st_mode):
        problem = "not a regular file"
    elif st.st_uid != os.geteuid():
        problem = f"owned by uid {st.st_uid}, not this user"
    elif st.st_mode & 0o022:
        problem = f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    if problem:
        os.close(fd)
        raise OSError(errno.EPERM, f"{path} is {problem}")
    return fd


def _read_private(path: Path, limit: int) -> bytes:
    fd = _open_private(path)
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _sha256(fd: int) -> str:
    digest = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def _dlopen_verified(fd: int, path: Path, mode: int) -> ctypes.CDLL:
    """dlopen ``path`` if it is still the file verified through ``fd``. (dlopen by
    ``/proc/self/fd/N`` would close even this window, but glibc identifies a loaded library
    by its name first, and descriptor numbers are reused.) Only this user can replace a file
    in the private cache directory."""
    verified, current = os.fstat(fd), os.stat(path, follow_symlinks=False)
    if (verified.st_dev, verified.st_ino) != (current.st_dev, current.st_ino):
        raise OSError(errno.ESTALE, "the module file was replaced while it was being checked")
    with _DLOPEN_LOCK:
        return ctypes.CDLL(str(path), mode=mode)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _cause(error: OSError) -> str:
    text = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{text}: the disk or quota holding it is full"
    if error.errno == errno.EROFS:
        return f"{text}: it is on a read-only file system"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"{text}: no permission to write there"
    return text
