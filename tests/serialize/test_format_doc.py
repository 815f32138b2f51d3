"""docs/format.md stays true: its example is what the writer produces, byte for byte."""

import re
from pathlib import Path

import numpy as np
from serialize_ops import members

import opgraph as og
from opgraph import ops
from opgraph.serialize import FORMAT_VERSION, deserialize, serialize

DOC = Path(__file__).resolve().parents[2] / "docs" / "format.md"


def example() -> og.Function:
    def at(line: int) -> str:
        return f"model.py:{line}"

    x = ops.Parameter(og.f32, (4,)).build(name="x", provenance=at(3)).outputs[0]
    inner = og.Function([ops.Relu().build(x, provenance=at(4)).outputs[0]], [x], name="inner")
    a = ops.Parameter(og.f32, (2, 2)).build(name="a", provenance=at(6)).outputs[0]
    eye = ops.Constant(og.f32, (2, 2), np.eye(2, dtype=np.float32)).build(provenance=at(7))
    y = ops.Dot().build(a, eye.outputs[0], name="y", provenance=at(8)).outputs[0]
    flat = ops.Reshape((4,)).build(y, provenance=at(9)).outputs[0]
    (called,) = ops.Call(inner).build(flat, provenance=at(10)).outputs
    return og.Function([called], [a], name="model")


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_json_example_is_what_the_writer_writes():
    written = members(serialize(example()))["graph.json"].decode()
    assert code_blocks("json")[0] == written


def test_the_printed_example_is_the_loaded_function():
    (printed,) = re.findall(r"```\n(function model.*?)```", DOC.read_text(), re.DOTALL)
    printed = printed.strip()
    assert str(deserialize(serialize(example()))) == printed


def test_the_document_describes_the_current_format_version():
    assert f"(format version {FORMAT_VERSION})" in DOC.read_text().splitlines()[0]
