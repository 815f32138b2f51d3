"""``og.save`` misuse: a missing directory and an ONNX path get errors that name the cause."""

import errno
import os

import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.errors import SerializationError
from opgraph.serialize import MissingDirectoryError


def small() -> og.Function:
    x = og.parameter(og.f32, (2,), name="x")
    return og.Function([ops.relu(x)], [x], name="small")


def test_missing_directory_is_named_not_the_temporary_file(tmp_path):
    target = tmp_path / "missing" / "model.opgraph"
    with pytest.raises(FileNotFoundError) as info:
        og.save(small(), target)
    message = str(info.value)
    assert f"cannot save {target}" in message
    assert f"the directory {tmp_path / 'missing'} does not exist" in message
    assert ".tmp" not in message
    assert not (tmp_path / "missing").exists()


def test_missing_directory_is_an_opgraph_error_and_an_os_error(tmp_path):
    target = tmp_path / "missing" / "deeper" / "model.opgraph"
    with pytest.raises(og.OpgraphError) as info:
        og.save(small(), target)
    error = info.value
    assert isinstance(error, MissingDirectoryError)
    assert isinstance(error, SerializationError)
    assert isinstance(error, FileNotFoundError)  # `except OSError` keeps working
    assert error.errno == errno.ENOENT
    assert f"the directory {tmp_path / 'missing' / 'deeper'} does not exist" in str(error)
    assert "os.makedirs(" in str(error)  # names the fix
    assert not (tmp_path / "missing").exists()


def test_unwritable_directory_names_the_target(tmp_path):
    target = tmp_path / "not-a-dir" / "model.opgraph"
    (tmp_path / "not-a-dir").write_text("a file, not a directory")
    with pytest.raises(OSError, match=f"cannot save {target}") as info:
        og.save(small(), target)
    assert ".tmp" not in str(info.value)


@pytest.mark.parametrize("name", ["model.onnx", "MODEL.ONNX"])
def test_onnx_path_is_refused_with_the_way_to_export(tmp_path, name):
    with pytest.raises(SerializationError, match=r"og\.onnx\.export_model"):
        og.save(small(), tmp_path / name)
    assert os.listdir(tmp_path) == []


def test_loading_an_onnx_file_points_to_the_importer(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\x07\x12\x04test")  # the start of a ModelProto
    with pytest.raises(SerializationError, match=r"not an opgraph file.*og\.onnx\.import_model"):
        og.load(path)


def test_saving_still_works(tmp_path):
    og.save(small(), tmp_path / "model.opgraph")
    assert str(og.load(tmp_path / "model.opgraph")) == str(small())
