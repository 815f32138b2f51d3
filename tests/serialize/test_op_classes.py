"""Every op class in the package declares attributes the format can store, so a new op with a
list, dict or free-form attribute fails here, naming itself, rather than at a user's save."""

import enum
import types
import typing

import numpy as np
import pytest

import opgraph.ops  # noqa: F401 - registers every op family
from opgraph.core.dim import DimExpr
from opgraph.core.element_type import ElementType
from opgraph.core.function import Function
from opgraph.core.op import OP_REGISTRY
from opgraph.serialize.values import UNKNOWN, describe_annotation, field_specs

# DimExpr: format version 2 stores symbolic dimensions (docs/format.md).
LEAVES = (type(None), bool, int, float, str, ElementType, Function, np.ndarray, DimExpr)
PACKAGE_OPS = sorted(
    (name, cls) for name, cls in OP_REGISTRY.items() if cls.__module__.startswith("opgraph.")
)


def storable(annotation: typing.Any) -> bool:
    """The annotation is built only from kinds the format encodes exactly."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return all(storable(a) for a in args)
    if origin is tuple:
        return all(a is Ellipsis or storable(a) for a in args)
    if origin is typing.Literal:
        return all(type(a) in LEAVES for a in args)
    if annotation is None or annotation in LEAVES:
        return True
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


@pytest.mark.parametrize(("name", "cls"), PACKAGE_OPS, ids=[n for n, _ in PACKAGE_OPS])
def test_op_attributes_are_storable(name, cls):
    for field, spec in field_specs(cls).items():
        assert spec.annotation is not UNKNOWN, f"{name}.{field}: annotation cannot be evaluated"
        assert storable(spec.annotation), (
            f"{name}.{field}: {describe_annotation(spec.annotation)} is not a kind the file "
            "format stores (see docs/format.md, Attribute values)"
        )


def test_storable_rejects_free_form_kinds():
    assert storable(tuple[int, ...] | None)
    assert not storable(list[int])
    assert not storable(dict[str, int])
    assert not storable(typing.Any)
