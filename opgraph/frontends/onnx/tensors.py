"""TensorProto → numpy, and the one place that decides which external-data files are read.

Every tensor the importer decodes — initializers, sparse initializers, Constant and
ConstantOfShape values, tensors in subgraphs — goes through :class:`TensorReader`. A tensor
whose data is *external* (``data_location = EXTERNAL``) names a file by a ``location``
relative to the model; the reader opens it only when

* a base directory is known: the model's own directory when ``import_model`` was given a path,
  or ``base_dir=`` passed explicitly (bytes and ``ModelProto`` models have none, so they read
  no file at all unless the caller names one);
* the location is relative, has no ``..`` component, and its real path (symbolic links
  resolved) is a regular file inside the base directory.

It reads exactly the bytes the tensor's type and shape need, from ``offset`` (a ``length``
that disagrees is an error), so a tensor can never pull in more of a file than it declares.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from opgraph.core.errors import ConversionError

EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
#: A sparse tensor is densified at import; its dense form may take at most this many bytes.
SPARSE_DENSE_LIMIT = 1 << 30


class TensorReader:
    """Decodes TensorProtos for one import, reading external data only below ``base_dir``."""

    def __init__(self, base_dir: str | os.PathLike[str] | None) -> None:
        self.base_dir = None if base_dir is None else os.path.realpath(os.fspath(base_dir))

    def array(self, tensor: Any, where: str) -> np.ndarray:
        """The value of ``tensor`` (a TensorProto) as an array of its declared shape."""

        label = f"{where}: tensor {tensor.name!r}" if tensor.name else f"{where}: tensor"
        dims = _dims(tensor.dims, label)
        if tensor.data_location == EXTERNAL:
            tensor = self._inline(tensor, dims, label)
        try:
            array = numpy_helper.to_array(tensor)
        except Exception as error:  # onnx raises ValueError, TypeError, KeyError…
            raise ConversionError(f"{label} is malformed: {error}") from error
        if array.shape != dims:
            raise ConversionError(f"{label} holds {array.size} values for shape {list(dims)}")
        return array

    def sparse_array(self, sparse: Any, where: str) -> np.ndarray:
        """The dense value of a SparseTensorProto (zeros except at its indices)."""
        label = f"{where}: sparse tensor {sparse.values.name!r}"
        dims = _dims(sparse.dims, label)
        values = self.array(sparse.values, where).reshape(-1)
        indices = self.array(sparse.indices, where).astype(np.int64, copy=False)
        if values.dtype.itemsize * math.prod(dims) > SPARSE_DENSE_LIMIT:
            raise ConversionError(
                f"{label}: its dense form {list(dims)} takes more than "
                f"SPARSE_DENSE_LIMIT ({SPARSE_DENSE_LIMIT} bytes)"
            )
        flat = _flat_indices(indices, dims, len(values), label)
        dense = np.zeros(math.prod(dims), values.dtype)
        dense[flat] = values
        return dense.reshape(dims)

    def check_locations(self, model: Any) -> None:
        """Refuse every external-data reference of ``model`` that may not be read, before any
        file is touched (also those of tensors that are never converted)."""
        for tensor, where in tensors_of(model):
            if tensor.data_location == EXTERNAL:
                self.resolve(tensor, where)

    def inline_all(self, model: Any) -> None:
        """Read every external tensor of ``model`` (which the caller owns) into it."""
        self.check_locations(model)
        for tensor, where in tensors_of(model):
            if tensor.data_location == EXTERNAL:
                label = f"{where}: tensor {tensor.name!r}"
                tensor.CopyFrom(self._inline(tensor, _dims(tensor.dims, label), label))

    def resolve(self, tensor: Any, where: str) -> str:
        """The real path of ``tensor``'s external data file; ConversionError when forbidden."""
        label = f"{where}: tensor {tensor.name!r}"
        location = _entries(tensor, label).get("location", "")
        if self.base_dir is None:
            raise ConversionError(
                f"{label} keeps its data in the external file {location!r}; a model given as "
                "bytes or an onnx.ModelProto reads no files unless base_dir= names the "
                "directory that holds them"
            )
        if not location or "\0" in location:
            raise ConversionError(f"{label}: external data location {location!r} is not a name")
        if PurePosixPath(location).is_absolute() or PureWindowsPath(location).drive:
            raise ConversionError(
                f"{label}: external data location {location!r} is absolute; it must be "
                f"relative to the model's directory {self.base_dir!r}"
            )
        parts = PurePosixPath(location.replace("\\", "/")).parts
        if ".." in parts:
            raise ConversionError(
                f"{label}: external data location {location!r} leaves the model's directory "
                f"{self.base_dir!r} (it contains '..')"
            )
        real = os.path.realpath(os.path.join(self.base_dir, *parts))
        if os.path.commonpath([real, self.base_dir]) != self.base_dir:
            raise ConversionError(
                f"{label}: external data location {location!r} is a symbolic link to "
                f"{real!r}, outside the model's directory {self.base_dir!r}"
            )
        if not os.path.isfile(real):
            raise ConversionError(
                f"{label}: external data file {location!r} does not exist in {self.base_dir!r} "
                "(or is not a regular file)"
            )
        return real

    def _inline(self, tensor: Any, dims: tuple[int, ...], label: str) -> Any:
        """A copy of ``tensor`` with its external bytes read into ``raw_data``."""

        path = self.resolve(tensor, label)
        entries = _entries(tensor, label)
        try:
            itemsize = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        except Exception as error:
            raise ConversionError(
                f"{label}: external data of type {tensor.data_type} cannot be read: {error}"
            ) from error
        size = itemsize * math.prod(dims)
        offset = _count(entries.get("offset", "0"), "offset", label)
        if "length" in entries and _count(entries["length"], "length", label) != size:
            raise ConversionError(
                f"{label}: external data length {entries['length']} does not match the "
                f"{size} bytes of its type and shape {list(dims)}"
            )
        with open(path, "rb") as stream:
            stream.seek(offset)
            data = stream.read(size)
        if len(data) != size:
            raise ConversionError(
                f"{label}: external data file {entries['location']!r} holds {len(data)} bytes "
                f"at offset {offset}, expected {size}"
            )
        copy = TensorProto()
        copy.CopyFrom(tensor)
        copy.ClearField("external_data")
        copy.data_location = TensorProto.DEFAULT
        copy.raw_data = data
        return copy


def tensors_of(model: Any) -> Iterator[tuple[Any, str]]:
    """Every TensorProto of ``model`` (initializers, sparse parts, node attributes in every
    subgraph and local function), each with a description of where it is."""
    for item, where in protos_of(model):
        if hasattr(item, "indices"):  # a SparseTensorProto
            yield item.values, where
            yield item.indices, where
        else:
            yield item, where


def protos_of(model: Any) -> Iterator[tuple[Any, str]]:
    """Every TensorProto and SparseTensorProto of ``model``, with where it is."""
    if model.HasField("graph"):
        yield from _graph_protos(model.graph, "graph")
    for function in model.functions:
        for node in function.node:
            yield from _node_protos(node, f"function {function.name!r}")


def _graph_protos(graph: Any, where: str) -> Iterator[tuple[Any, str]]:
    for tensor in graph.initializer:
        yield tensor, f"{where} initializer"
    for sparse in graph.sparse_initializer:
        yield sparse, f"{where} sparse initializer"
    for node in graph.node:
        yield from _node_protos(node, where)


def _node_protos(node: Any, where: str) -> Iterator[tuple[Any, str]]:
    label = f"ONNX node {node.name or '<unnamed>'!r} ({node.op_type})"
    for attribute in node.attribute:
        at = f"{label} attribute {attribute.name!r}"
        if attribute.HasField("t"):
            yield attribute.t, at
        if attribute.HasField("sparse_tensor"):
            yield attribute.sparse_tensor, at
        for tensor in attribute.tensors:
            yield tensor, at
        for sparse in attribute.sparse_tensors:
            yield sparse, at
        if attribute.HasField("g"):
            yield from _graph_protos(attribute.g, f"{at} subgraph")
        for graph in attribute.graphs:
            yield from _graph_protos(graph, f"{at} subgraph")


def _entries(tensor: Any, label: str) -> dict[str, str]:
    entries: dict[str, str] = {}
    for entry in tensor.external_data:
        if not isinstance(entry.key, str) or not isinstance(entry.value, str):
            raise ConversionError(f"{label}: an external data entry is not valid UTF-8")
        entries[entry.key] = entry.value
    return entries


def _count(text: str, what: str, label: str) -> int:
    if not text.isdigit():
        raise ConversionError(f"{label}: external data {what} {text!r} is not a byte count")
    return int(text)


def _dims(dims: Any, label: str) -> tuple[int, ...]:
    shape = tuple(int(d) for d in dims)
    if any(d < 0 for d in shape):
        raise ConversionError(f"{label} has a negative dimension in {list(shape)}")
    return shape


def _flat_indices(indices: np.ndarray, dims: tuple[int, ...], count: int, label: str) -> np.ndarray:
    """Linear positions from ONNX sparse indices ([NNZ] linear or [NNZ, rank] coordinates)."""
    size = math.prod(dims)
    if indices.ndim == 1 and len(indices) == count:
        flat = indices
    elif indices.ndim == 2 and indices.shape == (count, len(dims)):
        if np.any(indices < 0) or np.any(indices >= np.array(dims, np.int64)):
            raise ConversionError(f"{label}: an index is outside the shape {list(dims)}")
        flat = np.ravel_multi_index(tuple(indices.T), dims) if count else indices.reshape(-1)
    else:
        raise ConversionError(
            f"{label}: indices of shape {list(indices.shape)} do not fit {count} values of "
            f"a tensor of shape {list(dims)} (expected [{count}] or [{count}, {len(dims)}])"
        )
    if np.any(flat < 0) or np.any(flat >= size):
        raise ConversionError(f"{label}: an index is outside the shape {list(dims)}")
    return flat
