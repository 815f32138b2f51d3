"""The zip container: ``graph.json`` plus one raw data member per distinct constant value.

Writing is deterministic (fixed timestamps and attributes), so the same graph gives the same
bytes. Reading checks everything it can from the zip directory *before* reading a byte of a
member: the member names, duplicates, encryption, compression method, that each member lies
inside the file, and the declared sizes against :class:`~opgraph.serialize.schema.Limits`.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Mapping
from typing import BinaryIO

import numpy as np

from opgraph.serialize.schema import (
    DATA_MEMBER,
    GRAPH_MEMBER,
    ZIP_SIGNATURE,
    Limits,
    fail,
)

# Deflate shrinks the JSON about tenfold; constant data (mostly float mantissas) barely
# compresses, and storing it raw keeps save and load at memory-copy speed, lets a reader check
# a member's size from the directory alone, and keeps the bytes where mmap could map them.
_GRAPH_COMPRESSION = zipfile.ZIP_DEFLATED
_DATA_COMPRESSION = zipfile.ZIP_STORED
_ACCEPTED_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
#: graph.json may inflate freely up to this size; beyond it, Limits.max_graph_compression holds.
_GRAPH_RATIO_FREE = 1 << 20
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip epoch: byte-identical files for identical graphs
_LOCAL_HEADER_SIZE = 30

#: What zipfile and zlib raise on a corrupt archive (the fuzz tests exercise them); turned into
#: SerializationError at this one boundary.
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    OverflowError,
    struct.error,
    NotImplementedError,
    RuntimeError,
    IndexError,
    KeyError,
)


def data_member(digest: str) -> str:
    return f"data/{digest}.bin"


def _member_info(name: str, compression: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
    info.compress_type = compression
    info.create_system = 3  # unix, whatever the writing machine (determinism)
    info.external_attr = 0o644 << 16
    return info


def write_archive(out: BinaryIO, graph: bytes, blobs: Mapping[str, np.ndarray]) -> None:
    """Write the archive: ``graph.json`` first, then each blob (a uint8 array) by its digest."""
    with zipfile.ZipFile(out, "w", allowZip64=True) as archive:
        archive.writestr(_member_info(GRAPH_MEMBER, _GRAPH_COMPRESSION), graph, compresslevel=6)
        for digest, data in blobs.items():
            info = _member_info(data_member(digest), _DATA_COMPRESSION)
            info.file_size = data.nbytes  # lets zipfile pick ZIP64 up front for huge members
            with archive.open(info, "w") as member:
                member.write(data.data)  # the array's buffer, no copy


class Archive:
    """A validated, open archive. Member data is read on demand, each member at most once."""

    def __init__(self, file: BinaryIO, size: int, source: str, limits: Limits) -> None:
        self.source = source
        self.size = size
        self._cache: dict[str, bytes] = {}
        if file.read(len(ZIP_SIGNATURE)) != ZIP_SIGNATURE:
            file.seek(0)
            head = file.read(8)
            hint = (
                "; read ONNX with og.onnx.import_model" if source.lower().endswith(".onnx") else ""
            )
            raise fail(
                source,
                "",
                f"not an opgraph file: expected a zip archive, found {head!r} at the start{hint}",
            )
        file.seek(0)
        try:
            self._zip = zipfile.ZipFile(file)
            infos = self._zip.infolist()
        except _ZIP_ERRORS as error:
            raise fail(
                source, "", f"not a readable zip archive (truncated or corrupt): {error}"
            ) from error
        self._members = self._check_directory(infos, limits)

    def _check_directory(
        self, infos: list[zipfile.ZipInfo], limits: Limits
    ) -> dict[str, zipfile.ZipInfo]:
        if len(infos) > limits.max_members:
            raise fail(self.source, "", f"{len(infos)} zip members, more than {limits.max_members}")
        members: dict[str, zipfile.ZipInfo] = {}
        data_bytes = 0
        for info in infos:
            where = f"zip member {info.filename!r:.80}"
            if info.filename in members:
                raise fail(self.source, where, "appears twice in the archive")
            if info.filename != GRAPH_MEMBER and not DATA_MEMBER.fullmatch(info.filename):
                raise fail(
                    self.source,
                    where,
                    f"unexpected member (expected {GRAPH_MEMBER} and data/<sha256>.bin)",
                )
            self._check_member(info, where)
            if info.filename == GRAPH_MEMBER:
                self._check_graph_member(info, where, limits)
            else:
                self._check_data_member(info, where)
                data_bytes += info.file_size
            members[info.filename] = info
        _check_size(
            self.source, "constant data", data_bytes, limits.max_data_bytes, "max_data_bytes"
        )
        if GRAPH_MEMBER not in members:
            raise fail(self.source, "", f"not an opgraph file: the archive has no {GRAPH_MEMBER}")
        return members

    def _check_graph_member(self, info: zipfile.ZipInfo, where: str, limits: Limits) -> None:
        _check_size(self.source, where, info.file_size, limits.max_graph_bytes, "max_graph_bytes")
        ratio = limits.max_graph_compression
        if info.file_size > max(_GRAPH_RATIO_FREE, ratio * info.compress_size):
            raise fail(
                self.source,
                where,
                f"inflates from {info.compress_size} to {info.file_size} bytes, more than "
                f"{ratio} times (Limits.max_graph_compression): a deflate bomb?",
            )

    def _check_data_member(self, info: zipfile.ZipInfo, where: str) -> None:
        # Stored only: the bytes a constant takes in memory are then bytes of the file, so a
        # small file can never make the reader allocate much (a deflate bomb is 1000:1).
        if info.compress_type != zipfile.ZIP_STORED:
            method = _ACCEPTED_COMPRESSION.get(info.compress_type, str(info.compress_type))
            raise fail(
                self.source,
                where,
                f"is {method}; constant data members must be stored uncompressed "
                "(docs/format.md §1)",
            )

    def _check_member(self, info: zipfile.ZipInfo, where: str) -> None:
        if info.flag_bits & 0x1:
            raise fail(self.source, where, "is encrypted")
        if info.compress_type not in _ACCEPTED_COMPRESSION:
            raise fail(
                self.source,
                where,
                f"uses compression method {info.compress_type}; only stored "
                "and deflated members are read",
            )
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise fail(
                self.source,
                where,
                f"is stored with size {info.compress_size} but declares {info.file_size} bytes",
            )
        end = info.header_offset + _LOCAL_HEADER_SIZE + len(info.filename) + info.compress_size
        if end > self.size:
            raise fail(
                self.source,
                where,
                f"extends to byte {end}, past the end of the {self.size}-byte file (truncated?)",
            )

    def graph(self) -> bytes:
        return self._read(GRAPH_MEMBER)

    def data_size(self, digest: str) -> int | None:
        """The declared size of ``data/<digest>.bin``, or None when there is no such member."""
        info = self._members.get(data_member(digest))
        return None if info is None else info.file_size

    def data(self, digest: str) -> bytes:
        return self._read(data_member(digest))

    @property
    def data_bytes(self) -> int:
        """Total bytes of the constant data members."""
        return sum(i.file_size for n, i in self._members.items() if n != GRAPH_MEMBER)

    def _read(self, name: str) -> bytes:
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        info = self._members[name]
        where = f"zip member {name}"
        try:
            with self._zip.open(info) as member:
                data = member.read(info.file_size + 1)
        except _ZIP_ERRORS as error:
            raise fail(self.source, where, f"cannot be read (corrupt archive): {error}") from error
        if len(data) != info.file_size:
            raise fail(
                self.source, where, f"has {len(data)} bytes, the directory says {info.file_size}"
            )
        self._cache[name] = data
        return data

    def close(self) -> None:
        self._cache.clear()
        self._zip.close()


def _check_size(source: str, where: str, size: int, limit: int, name: str) -> None:
    if size > limit:
        raise fail(
            source,
            where,
            f"declares {size} bytes, more than the limit of {limit} (Limits.{name}; to "
            f"accept it, load with limits=opgraph.serialize.Limits({name}=...))",
        )
