"""``Output.shape`` is symbolic-typed; code that needs ints narrows with ``Output.static_shape``
and ``core.shape.static_dim``/``static_shape``, which name the value and what needs the sizes."""

from __future__ import annotations

import pytest

import opgraph as og
from opgraph.core.errors import ConversionError, OpTypeError
from opgraph.core.shape import is_static, static_dim, static_shape
from opgraph.optim import softmax_cross_entropy

batch = og.dim("batch")


def test_static_shape_of_a_static_value_is_its_shape() -> None:
    x = og.parameter(og.f32, (2, 3))
    assert x.static_shape("a test") == (2, 3)
    assert x.shape == x.dims == (2, 3)


def test_static_shape_of_a_symbolic_value_names_the_value_and_the_need() -> None:
    x = og.parameter(og.f32, (batch, 3))
    with pytest.raises(OpTypeError, match=r"a numpy constant needs static sizes.*batch"):
        x.static_shape("a numpy constant")


def test_static_shape_raises_the_layers_error() -> None:
    x = og.parameter(og.f32, (batch, 3))
    with pytest.raises(ConversionError, match="the importer"):
        x.static_shape("the importer", ConversionError)
    with pytest.raises(ConversionError, match="the kernel size needs a static size.*batch"):
        static_dim(x.shape[0], "the kernel size", ConversionError)
    with pytest.raises(OpTypeError, match=r"filters \[batch,3\] must be static"):
        static_shape(x.shape, "filters")


def test_is_static() -> None:
    assert is_static((1, 2))
    assert not is_static((batch, 2))


def test_cross_entropy_of_a_symbolic_batch_says_what_needs_the_size() -> None:
    logits = og.parameter(og.f32, (batch, 4))
    labels = og.parameter(og.f32, (batch, 4))
    with pytest.raises(OpTypeError, match="batch mean of softmax_cross_entropy"):
        softmax_cross_entropy(logits, labels)
