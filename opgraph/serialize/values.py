"""Attribute values to JSON and back, generic over value kinds (never over ops).

==========================  ==================================================================
value                       JSON
==========================  ==================================================================
None, bool, int, str        null, true/false, integer, string
float                       a number with a fraction or exponent; NaN and ±inf (which JSON
                            cannot spell) as ``{"float": "nan" | "inf" | "-inf"}``
tuple                       an array (recursively); arrays always decode to tuples
enum member                 ``{"enum": ["ClassName", "MEMBER_NAME"]}``
ElementType                 ``{"element_type": "f32"}``
Function                    ``{"function": <index in the file's function table>}``
numpy array                 ``{"array": {"data": <sha256>, "element_type": "f32", "shape": [..]}}``
DimExpr (format 2)          ``{"dim": <expression tree>}`` over the file's symbol table
                            (:mod:`opgraph.serialize.dims`)
==========================  ==================================================================

Decoding is exact by construction (the encoding is tagged), and :func:`conform` then checks each
value against the dataclass field's annotation, so an int stays an int, a bool never passes for
an int, and an enum tag resolves to the member of the enum class the field names. A symbolic
dimension passes where the annotation says ``int`` (shape-valued attributes are annotated with
ints, ``ShapeAttr``); an op whose field may not be symbolic refuses it when the node is rebuilt.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from opgraph.core import element_type as et
from opgraph.core.dim import Dim, DimExpr
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.function import Function
from opgraph.core.shape import Shape


class ValueProblem(Exception):
    """A value that cannot be encoded or decoded; the caller adds where it was."""


class _Mismatch(ValueProblem):
    """A decoded value does not fit the field's annotation. ``specific`` messages (an unknown
    enum member) are kept as they are; others are rewritten as "expected …, got …"."""

    def __init__(self, message: str = "", specific: bool = False) -> None:
        super().__init__(message)
        self.specific = specific


@dataclass(frozen=True)
class EnumRef:
    """A decoded enum tag, resolved to a member by :func:`conform` (the field names the enum)."""

    enum: str
    member: str


class Encoder(Protocol):
    """What encoding needs from the writer: tables for Functions and array data."""

    def function_ref(self, fn: Function) -> int: ...

    def array_ref(self, array: np.ndarray) -> dict[str, Any]: ...

    def dim_ref(self, value: DimExpr) -> Any: ...


class Decoder(Protocol):
    """What decoding needs from the reader: the Functions built so far and the array data."""

    def function(self, payload: Any) -> Function: ...

    def array(self, payload: Any) -> np.ndarray: ...

    def dim(self, payload: Any) -> Dim: ...


_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
SUPPORTED = (
    "None, bool, int, float, str, tuple, enum members, ElementType, Function, numpy arrays, "
    "symbolic dimensions"
)


# ----------------------------------------------------------------------------------- encode
def encode_value(value: Any, encoder: Encoder, max_depth: int = 64, depth: int = 0) -> Any:
    """The JSON form of an attribute value (see the module docstring). Values nested deeper
    than readers accept (``Limits.max_depth``) are refused rather than written unreadable."""
    if depth > max_depth:
        raise ValueProblem(f"value is nested deeper than {max_depth} levels")
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is str:
        check_text(value)
        return value
    if kind is float:
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, enum.Enum):  # before int/str: IntEnum and StrEnum members are enums
        return {"enum": [kind.__name__, value.name]}
    if kind is ElementType:
        return {"element_type": value.name}
    if kind is tuple:
        return [encode_value(v, encoder, max_depth, depth + 1) for v in value]
    if kind is Function:
        return {"function": encoder.function_ref(value)}
    if kind is np.ndarray:
        return {"array": encoder.array_ref(value)}
    if kind is DimExpr:
        return {"dim": encoder.dim_ref(value)}
    raise ValueProblem(
        f"a value of type {kind.__module__}.{kind.__qualname__} ({value!r:.60}) cannot be "
        f"serialized; supported kinds: {SUPPORTED} (normalise it in the op's __post_init__)"
    )


def check_text(text: str) -> None:
    """Strings must be encodable as UTF-8 (a lone surrogate is not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueProblem(f"string {text!r:.60} is not valid Unicode") from None


# ----------------------------------------------------------------------------------- decode
def decode_value(raw: Any, decoder: Decoder, max_depth: int, depth: int = 0) -> Any:
    """The value a JSON attribute stands for; enum tags become :class:`EnumRef`."""
    if depth > max_depth:
        raise ValueProblem(f"value is nested deeper than {max_depth} levels")
    kind = type(raw)
    if raw is None or kind is bool or kind is int or kind is float:
        return raw
    if kind is str:
        check_text(raw)
        return raw
    if kind is list:
        return tuple(decode_value(v, decoder, max_depth, depth + 1) for v in raw)
    if kind is not dict or len(raw) != 1:
        keys = sorted(raw) if kind is dict else None
        raise ValueProblem(f"a tagged value is an object with one key, got {keys or raw!r:.60}")
    ((tag, payload),) = raw.items()
    if tag == "float":
        if type(payload) is not str or payload not in _NONFINITE:
            raise ValueProblem(f'"float" must be "nan", "inf" or "-inf", got {payload!r:.40}')
        return _NONFINITE[payload]
    if tag == "enum":
        if not (
            type(payload) is list and len(payload) == 2 and all(type(p) is str for p in payload)
        ):
            raise ValueProblem(f'"enum" must be [class name, member name], got {payload!r:.60}')
        return EnumRef(payload[0], payload[1])
    if tag == "element_type":
        return element_type_named(payload)
    if tag == "function":
        return decoder.function(payload)
    if tag == "array":
        return decoder.array(payload)
    if tag == "dim":
        return decoder.dim(payload)
    raise ValueProblem(
        f"unknown value tag {tag!r:.40}; expected one of float, enum, element_type, function, "
        "array, dim"
    )


def element_type_named(name: Any) -> ElementType:
    """The element type called ``name``; a :class:`ValueProblem` for anything else."""
    if type(name) is not str:
        raise ValueProblem(f"an element type is a name like 'f32', got {name!r:.40}")
    try:
        return et.from_name(name)
    except OpTypeError as error:
        raise ValueProblem(str(error)) from None


# ---------------------------------------------------------------------------- annotations
UNKNOWN: Any = object()  # an annotation that could not be resolved: values are not checked

#: Names core annotations use that op modules often import only under TYPE_CHECKING.
_FALLBACK_NAMES: dict[str, Any] = {
    "Any": Any,
    "ElementType": ElementType,
    "Function": Function,
    "Shape": Shape,
    "np": np,
    "numpy": np,
}


@dataclass(frozen=True)
class FieldSpec:
    """One attribute of an op class, as serialization sees it."""

    name: str
    annotation: Any
    field: dataclasses.Field[Any]
    namespace: Mapping[str, Any]

    @property
    def required(self) -> bool:
        return (
            self.field.default is dataclasses.MISSING
            and self.field.default_factory is dataclasses.MISSING
        )

    def default(self) -> Any:
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return self.field.default


_SPECS: dict[type, dict[str, FieldSpec]] = {}


def field_specs(cls: type) -> dict[str, FieldSpec]:
    """The init fields of an op class with their resolved annotations, in declaration order
    (computed once per class)."""
    cached = _SPECS.get(cls)
    if cached is not None:
        return cached
    specs = {}
    for field in dataclasses.fields(cls):
        if not field.init:  # derived fields are recomputed by the op itself
            continue
        namespace = _declaring_namespace(cls, field.name)
        specs[field.name] = FieldSpec(field.name, _resolve(field.type, namespace), field, namespace)
    _SPECS[cls] = specs
    return specs


def _declaring_namespace(cls: type, name: str) -> Mapping[str, Any]:
    for klass in cls.__mro__:
        if name in inspect.get_annotations(klass):
            return vars(sys.modules[klass.__module__])
    return vars(sys.modules[cls.__module__])


def _resolve(annotation: Any, namespace: Mapping[str, Any]) -> Any:
    if not isinstance(annotation, str):
        return annotation
    holder = type("_Annotation", (), {"__annotations__": {"value": annotation}})
    try:
        hints = typing.get_type_hints(holder, globalns={**_FALLBACK_NAMES, **namespace})
    except Exception:  # an annotation we cannot evaluate: tags still decode exactly, unchecked
        return UNKNOWN
    return hints["value"]


def conform(value: Any, spec: FieldSpec) -> Any:
    """``value`` checked against the field's annotation, enum tags resolved to members.

    Raises:
        ValueProblem: the value does not fit ("expected tuple[int, ...], got float 1.5").
    """
    try:
        return _conform(value, spec.annotation, spec.namespace)
    except _Mismatch as error:
        if error.specific:
            raise
        raise ValueProblem(
            f"expected {describe_annotation(spec.annotation)}, got {describe_value(value)}"
        ) from None


def _conform(value: Any, ann: Any, namespace: Mapping[str, Any]) -> Any:
    if ann is UNKNOWN or ann is Any:
        return _resolve_loosely(value, namespace)
    origin = typing.get_origin(ann)
    if origin is typing.Union or origin is types.UnionType:
        return _conform_union(value, typing.get_args(ann), namespace)
    if origin is tuple:
        return _conform_tuple(value, typing.get_args(ann), namespace)
    if origin is typing.Literal:
        if any(type(value) is type(a) and value == a for a in typing.get_args(ann)):
            return value
        raise _Mismatch()
    if ann is None or ann is type(None):
        return _require(value, value is None)
    if ann is float:  # PEP 484: an int is acceptable where a float is expected
        return _require(value, type(value) is float or type(value) is int)
    if ann is int:  # a shape-valued attribute may hold a symbolic dimension
        return _require(value, type(value) is int or type(value) is DimExpr)
    if ann is bool or ann is str:
        return _require(value, type(value) is ann)
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return _conform_enum(value, (ann,))
    if isinstance(ann, type):  # ElementType, Function, np.ndarray, a bare tuple…
        return _resolve_loosely(_require(value, isinstance(value, ann)), namespace)
    if isinstance(origin, type):  # another generic (Sequence[int]…): check the container only
        return _resolve_loosely(_require(value, isinstance(value, origin)), namespace)
    return _resolve_loosely(value, namespace)


def _require(value: Any, ok: bool) -> Any:
    if not ok:
        raise _Mismatch()
    return value


def _conform_union(value: Any, alternatives: tuple[Any, ...], namespace: Mapping[str, Any]) -> Any:
    enums = tuple(a for a in alternatives if isinstance(a, type) and issubclass(a, enum.Enum))
    if isinstance(value, EnumRef) and enums:
        return _conform_enum(value, enums)
    for alternative in alternatives:
        try:
            return _conform(value, alternative, namespace)
        except _Mismatch:
            continue
    raise _Mismatch()


def _conform_tuple(value: Any, args: tuple[Any, ...], namespace: Mapping[str, Any]) -> Any:
    if type(value) is not tuple:
        raise _Mismatch()
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_conform(v, args[0], namespace) for v in value)
    if len(value) != len(args):  # tuple[int, int] (and tuple[()], whose args are empty)
        raise _Mismatch()
    return tuple(_conform(v, a, namespace) for v, a in zip(value, args, strict=True))


def _conform_enum(value: Any, enums: tuple[type[enum.Enum], ...]) -> Any:
    if not isinstance(value, EnumRef):
        raise _Mismatch()
    for cls in enums:
        if cls.__name__ == value.enum:
            return _member(cls, value.member)
    raise _Mismatch()


def _member(cls: type[enum.Enum], name: str) -> enum.Enum:
    try:
        return cls.__members__[name]
    except KeyError:
        members = ", ".join(cls.__members__)
        raise _Mismatch(
            f"enum {cls.__name__} has no member {name!r:.40} (members: {members})", specific=True
        ) from None


def _resolve_loosely(value: Any, namespace: Mapping[str, Any]) -> Any:
    """Resolve enum tags by class name in the op's module (the field's type is unknown)."""
    if isinstance(value, EnumRef):
        cls = namespace.get(value.enum)
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum)):
            raise _Mismatch(
                f"enum class {value.enum!r:.40} is not defined in the op's module", specific=True
            )
        return _member(cls, value.member)
    if type(value) is tuple:
        return tuple(_resolve_loosely(v, namespace) for v in value)
    return value


# ------------------------------------------------------------------------------- messages
def describe_annotation(ann: Any) -> str:
    """``tuple[int, ...] | None`` for an annotation (short class names)."""
    if ann is UNKNOWN:
        return "any value"
    if ann is None or ann is type(None):
        return "None"
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(describe_annotation(a) for a in args)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else describe_annotation(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    return getattr(ann, "__name__", str(ann))


def describe_value(value: Any) -> str:
    """``float 1.5``, ``enum PadMode.EDGE``, ``tuple (1, 2)`` for a decoded value."""
    if value is None:
        return "None"
    if isinstance(value, EnumRef):
        return f"enum {value.enum}.{value.member}"
    if isinstance(value, np.ndarray):
        return f"array of {value.dtype} {list(value.shape)}"
    if isinstance(value, Function):
        return f"function {value.name!r}"
    return f"{type(value).__name__} {value!r:.60}"
