"""save / load / serialize / deserialize: Functions to opgraph files and back."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import uuid
from typing import BinaryIO

from opgraph.core.errors import SerializationError
from opgraph.core.function import Function
from opgraph.serialize.container import Archive, write_archive
from opgraph.serialize.decode import Loaded, read_archive
from opgraph.serialize.encode import encode_function
from opgraph.serialize.schema import DEFAULT_LIMITS, Limits

PathLike = str | os.PathLike[str]


def serialize(fn: Function) -> bytes:
    """The opgraph file for ``fn``, as bytes (see ``docs/format.md``).

    Deterministic: the same graph (with the same names and provenance) gives the same bytes.

    Args:
        fn: the Function; Functions it calls are stored with it.

    Returns:
        A zip archive holding ``graph.json`` and the constants' raw data.

    Raises:
        SerializationError: an op attribute holds a value of a kind the format cannot store,
            an op class is not the one registered under its name, or a name is not valid
            Unicode.

    Example:
        >>> data = og.serialize(fn)
        >>> str(og.deserialize(data)) == str(fn)
        True
    """
    encoded = encode_function(fn)
    buffer = io.BytesIO()
    write_archive(buffer, encoded.graph, encoded.blobs)
    return buffer.getvalue()


def save(fn: Function, path: PathLike) -> None:
    """Write ``fn`` to the file ``path`` atomically.

    The archive is written to a temporary file beside ``path``, flushed to disk, then renamed
    over ``path``: a crash or an error never leaves a partial file, and an existing file at
    ``path`` stays intact until the new one is complete.

    Args:
        fn: the Function to save.
        path: the file to write (conventionally ``*.opgraph``). A path ending in ``.onnx`` is
            refused: this writes opgraph files only (write ONNX with
            ``onnx.save(og.onnx.export_model(fn), path)``).

    Raises:
        SerializationError: as :func:`serialize`, or ``path`` ends in ``.onnx`` (nothing is
            written then).
        MissingDirectoryError: the directory of ``path`` does not exist (a
            ``FileNotFoundError`` and a ``SerializationError``); the message names it and says
            to create it.
        OSError: the file cannot be written otherwise; the message names ``path``, never the
            temporary file.
    """
    target = os.fspath(path)
    if target.lower().endswith(".onnx"):
        raise SerializationError(
            f"{target}: og.save writes opgraph files, not ONNX; to write an ONNX model use "
            "onnx.save(og.onnx.export_model(fn), path), or save to a .opgraph path"
        )
    encoded = encode_function(fn)  # encoding errors surface before the filesystem is touched
    directory, base = os.path.split(os.path.abspath(target))
    temporary = os.path.join(directory, f".{base}.{uuid.uuid4().hex}.tmp")
    descriptor = _create(temporary, target, directory)
    try:
        with os.fdopen(descriptor, "wb") as out:
            write_archive(out, encoded.graph, encoded.blobs)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        _remove_quietly(temporary)
        raise


class MissingDirectoryError(FileNotFoundError, SerializationError):
    """``og.save``'s target directory does not exist.

    Both an ``OSError`` (``FileNotFoundError``, so ``except OSError`` keeps working) and a
    ``SerializationError`` (so ``except og.OpgraphError`` catches every misuse of the library).
    """


def _create(temporary: str, target: str, directory: str) -> int:
    """Open the temporary file, or raise an OSError that names ``target``, not the temporary."""
    try:
        # O_EXCL: never write through someone else's file; 0o666 lets the umask decide the
        # mode, as for any file the user creates.
        return os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as error:
        if not os.path.lexists(directory):
            raise MissingDirectoryError(
                errno.ENOENT,
                f"cannot save {target}: the directory {directory} does not exist; create it "
                f"first (os.makedirs({directory!r}, exist_ok=True)) or save elsewhere",
            ) from None
        if not os.path.isdir(directory):
            problem = f"{directory} is not a directory"
        else:
            problem = f"cannot create a file in {directory}: {error.strerror}"
        raise type(error)(error.errno, f"cannot save {target}: {problem}") from None


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def deserialize(
    data: bytes | bytearray | memoryview, *, limits: Limits = DEFAULT_LIMITS
) -> Function:
    """The Function stored in ``data`` (the bytes of an opgraph file).

    Every node is rebuilt through its op class, so the graph is type-checked again.

    Args:
        data: the file's bytes.
        limits: caps on sizes and nesting checked before anything is read or allocated.

    Returns:
        The stored Function (the last one in the file; the Functions it calls come with it).

    Raises:
        SerializationError: the data is not an opgraph file, is corrupt or truncated, has a
            newer format version, names an unknown op or version, or describes an ill-typed
            graph (then the op's ``OpTypeError`` is the ``__cause__``). The message says what
            is wrong and where (function, node index, op and node name).
        TypeError: ``data`` is not bytes-like.
    """
    return read_bytes(data, limits).function


def load(path: PathLike, *, limits: Limits = DEFAULT_LIMITS) -> Function:
    """The Function stored in the file ``path`` (see :func:`deserialize`).

    The file is read member by member, never as a whole, and sizes are checked before reading.

    Raises:
        SerializationError: as :func:`deserialize`, the message starting with ``path``.
        OSError: the file cannot be opened.
    """
    return read_file(path, limits).function


def read_bytes(data: bytes | bytearray | memoryview, limits: Limits = DEFAULT_LIMITS) -> Loaded:
    """Like :func:`deserialize`, with what ``opgraph info`` reports about the file."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"deserialize expects bytes, got {type(data).__name__}")
    view = memoryview(data)
    return _read(io.BytesIO(view), view.nbytes, "<bytes>", limits)


def read_file(path: PathLike, limits: Limits = DEFAULT_LIMITS) -> Loaded:
    """Like :func:`load`, with what ``opgraph info`` reports about the file."""
    name = os.fspath(path)
    with open(name, "rb") as file:
        return _read(file, os.fstat(file.fileno()).st_size, name, limits)


def _read(file: BinaryIO, size: int, source: str, limits: Limits) -> Loaded:
    archive = Archive(file, size, source, limits)
    try:
        return read_archive(archive, limits)
    finally:
        archive.close()
