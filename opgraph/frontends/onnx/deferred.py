"""ONNX nodes converted when the Function runs: the fallback for inputs read as values.

A converter that needs the import-time value of an input (a Reduce's axes, CumSum's axis,
Trilu's k, Split's sizes, Resize's scales, OneHot's depth, the data of NonZero…) raises
``NeedsConstantError``. When that input is a graph input or computed from one, the importer
does not give up: it keeps the node as a :class:`RunTimeOnnxNode`, an op holding the ONNX node
itself, whose output types come from ONNX shape inference (each unknown dimension a fresh
data-dependent symbol, bound when the node runs). Its reference kernel converts the node
again at run time with every input's value as a Constant (``import_model(...,
constant_inputs=)``: the one-node model folds) and returns the result, so any converter works
with no hint, on INTERPRETER (and on CPU through the fallback when every output size is
static). docs/dynamic-shapes.md says which ops take which path.

Such a node has no gradient, and it needs this module imported to run (it is, with
``opgraph.frontends.onnx``); a Function holding one serialises, but loads only where the onnx
extra is installed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from opgraph.core.dim import Dim, Symbol, bare_symbol, fresh_dim
from opgraph.core.element_type import ElementType, from_dtype
from opgraph.core.errors import ConversionError
from opgraph.core.function import Function
from opgraph.core.kernels import REFERENCE_KERNELS
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require
from opgraph.core.tensor_type import TensorType
from opgraph.frontends.onnx.context import NeedsConstantError, NodeContext, constant_value
from opgraph.frontends.onnx.types import from_onnx, to_onnx
from opgraph.runtime.backend import backend
from opgraph.runtime.cache import LruCache

__all__ = ["RunTimeOnnxModel", "RunTimeOnnxNode", "defer", "defer_model"]

#: Converted one-node Functions kept per process, by node and input values.
CACHE_SIZE = 32
_CACHE: LruCache[tuple[Any, ...], tuple[np.ndarray, ...]] = LruCache(CACHE_SIZE)


@opclass
class RunTimeOnnxNode(Op):
    """An ONNX node converted at run time, with its inputs' values (see the module).

    Attributes:
        node: the serialised ``NodeProto`` (base64), inputs renamed ``in0…``, outputs ``out0…``.
        opsets: the ``(domain, version)`` pairs the node is converted at.
        present: per ONNX input, whether it is given (omitted optional inputs are not inputs
            of this op).
        element_types: one per output.
        dims: the output shapes; a dimension ONNX shape inference cannot give is a fresh
            data-dependent symbol, bound when the node runs.
    """

    node: str
    opsets: tuple[tuple[str, int], ...]
    present: tuple[bool, ...]
    outer: tuple[str, ...]
    element_types: tuple[ElementType, ...]
    dims: tuple[tuple[Dim, ...], ...]
    multi_output = True
    differentiable = False

    def __post_init__(self) -> None:
        require(
            len(self.element_types) == len(self.dims),
            f"RunTimeOnnxNode: {len(self.element_types)} element types for {len(self.dims)} "
            "output shapes",
        )

    def infer(self, *inputs: TensorType) -> tuple[TensorType, ...]:
        require(
            len(inputs) == sum(self.present) + len(self.outer),
            f"RunTimeOnnxNode: {len(inputs)} inputs for {sum(self.present)} present ONNX inputs "
            f"and {len(self.outer)} outer-scope values",
        )
        return tuple(TensorType(e, d) for e, d in zip(self.element_types, self.dims, strict=True))

    def bound_symbols(self) -> tuple[Symbol, ...]:
        found = [s for shape in self.dims for s in map(bare_symbol, shape) if s is not None]
        return tuple(dict.fromkeys(found))

    def describe(self) -> str:
        proto = self.proto()
        return f"RunTimeOnnxNode[{proto.op_type}, opset {dict(self.opsets).get(proto.domain, '')}]"

    def proto(self) -> Any:
        """The ONNX node."""
        node = onnx.NodeProto()
        node.ParseFromString(base64.b64decode(self.node))
        return node


@opclass
class RunTimeOnnxModel(Op):
    """A whole ONNX model converted at run time, with its inputs' values: the importer's last
    resort when the sizes of its run-time nodes meet in a type rule that cannot tell them
    equal (two distinct symbols that the values make equal).

    Attributes:
        model: the serialised ``ModelProto`` (base64); the op's inputs are its graph inputs
            that are not initializers, in order.
        element_types: one per graph output.
        dims: the output shapes (declared or inferred; fresh symbols where neither says).
    """

    model: str
    element_types: tuple[ElementType, ...]
    dims: tuple[tuple[Dim, ...], ...]
    multi_output = True
    differentiable = False

    def __post_init__(self) -> None:
        require(
            len(self.element_types) == len(self.dims),
            f"RunTimeOnnxModel: {len(self.element_types)} element types for "
            f"{len(self.dims)} output shapes",
        )

    def infer(self, *inputs: TensorType) -> tuple[TensorType, ...]:
        return tuple(TensorType(e, d) for e, d in zip(self.element_types, self.dims, strict=True))

    def bound_symbols(self) -> tuple[Symbol, ...]:
        found = [s for shape in self.dims for s in map(bare_symbol, shape) if s is not None]
        return tuple(dict.fromkeys(found))

    def describe(self) -> str:
        return f"RunTimeOnnxModel[{self.proto().graph.name or 'model'}]"

    def proto(self) -> Any:
        """The ONNX model."""
        return onnx.load_from_string(base64.b64decode(self.model))


def defer_model(proto: Any, parameters: list[Output], error: ConversionError) -> Function:
    """``proto`` as one :class:`RunTimeOnnxModel` node over ``parameters`` (its graph inputs),
    or ``error`` raised again when its outputs cannot be typed."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
        found = {v.name: v for v in inferred.graph.output}
    except Exception:  # inference errors of any kind: the declarations decide
        found = {}
    types = []
    for info in proto.graph.output:
        typed = [t for t in (_typed(info), _typed(found.get(info.name))) if t is not None]
        element_type = next((e for e, _ in typed if e), 0)
        dims = next((d for _, d in typed if d is not None), None)
        if not element_type or dims is None:
            raise error
        shape = tuple(fresh_dim("onnx") if d is None else d for d in dims)
        types.append((from_onnx(element_type, f"graph output {info.name!r}"), shape))
    op = RunTimeOnnxModel(
        base64.b64encode(proto.SerializeToString()).decode(),
        tuple(t[0] for t in types),
        tuple(t[1] for t in types),
    )
    outputs = list(op(*parameters))
    return Function(outputs, parameters, name=proto.graph.name or "onnx_model")


def _run_model(op: RunTimeOnnxModel, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The reference kernel: import the model with every input a constant, then run it."""
    key = (op.model, tuple((a.dtype.str, a.shape, a.tobytes()) for a in arrays))
    return _CACHE.get_or_make(key, lambda: _import_and_run(op, arrays))


def _import_and_run(op: RunTimeOnnxModel, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    # A cycle: the importer imports this module to defer nodes.
    from opgraph.frontends.onnx.importer import import_model

    proto = op.proto()
    initializers = {t.name for t in proto.graph.initializer}
    names = [i.name for i in proto.graph.input if i.name not in initializers]
    try:
        fn = import_model(
            proto, constant_inputs=dict(zip(names, arrays, strict=True)), run_time_values=False
        )
    except ConversionError as error:
        raise ConversionError(f"{op.describe()} with its run-time inputs: {error}") from None
    return tuple(np.asarray(r) for r in backend("INTERPRETER").compile(fn)())


def defer(ctx: NodeContext, error: NeedsConstantError) -> list[Output | None]:
    """``ctx``'s node as a :class:`RunTimeOnnxNode`, or ``error`` raised again when the
    node cannot wait for run time (outputs neither the model nor ONNX can type)."""
    node = ctx.node
    present = tuple(v is not None for v in ctx.inputs)
    outer = tuple(sorted(_outer_names(node)))
    named = [(f"in{i}", v) for i, v in enumerate(ctx.inputs) if v is not None]
    named += [(name, _outer_value(ctx, name)) for name in outer]
    inputs = [v for _, v in named]
    renamed = onnx.NodeProto()
    renamed.CopyFrom(node)
    del renamed.input[:]
    renamed.input.extend(f"in{i}" if p else "" for i, p in enumerate(present))
    del renamed.output[:]
    renamed.output.extend(f"out{i}" if name else "" for i, name in enumerate(node.output))
    opsets = tuple(sorted(ctx.graph.opsets.items()))
    main = ctx.graph is ctx.importer.main
    declared = [ctx.importer.declared_info(name) if main and name else None for name in node.output]
    given = [d for d, n in zip(declared, node.output, strict=True) if n]
    types = _output_types(renamed, opsets, named, ctx.inputs, given)
    if types is None:
        raise error
    ctx.importer.run_time_nodes += 1
    op = RunTimeOnnxNode(
        base64.b64encode(renamed.SerializeToString()).decode(),
        opsets,
        present,
        outer,
        tuple(t[0] for t in types),
        tuple(t[1] for t in types),
    )
    outputs = list(op(*inputs))
    produced: list[Output | None] = []
    for name in node.output:
        produced.append(outputs.pop(0) if name else None)
    return produced


def _outer_names(node: Any) -> set[str]:
    """The names ``node``'s subgraphs read from outside themselves."""
    found: set[str] = set()
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else []
        graphs += list(attribute.graphs) if attribute.type == onnx.AttributeProto.GRAPHS else []
        for graph in graphs:
            defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
            defined |= {t.values.name for t in graph.sparse_initializer}
            used: set[str] = set()
            for inner in graph.node:
                used |= {name for name in inner.input if name} | _outer_names(inner)
                defined |= set(inner.output)
            found |= used - defined
    return found


def _outer_value(ctx: NodeContext, name: str) -> Output:
    value = ctx.graph.lookup(name, ctx.where)
    if value is None:
        raise ctx.fail(f"a subgraph reads {name!r}, an omitted optional value")
    return value


def _output_types(
    node: Any,
    opsets: tuple[tuple[str, int], ...],
    named: list[tuple[str, Output]],
    inputs: list[Output | None],
    declared: list[Any],
) -> list[tuple[ElementType, tuple[Dim, ...]]] | None:
    """The outputs' element types and shapes (None: unknown): as the model declares them
    (graph outputs, value_info), else by ONNX shape inference; a dimension neither gives is a
    fresh data-dependent symbol."""
    graph_inputs = [
        helper.make_tensor_value_info(
            name,
            to_onnx(v.element_type),
            [d if type(d) is int else f"d{i}_{axis}" for axis, d in enumerate(v.shape)],
        )
        for i, (name, v) in enumerate(named)
    ]
    initializers = [_initializer(name, v) for name, v in named if _known(v)]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "deferred", graph_inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        found = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    except Exception:  # inference errors of any kind: the declarations and rank rules decide
        found = {}
    rule = RANKS.get(node.op_type)
    ranks = rule(node, inputs) if rule is not None else None
    result = []
    for i, (name, given) in enumerate(zip([o for o in node.output if o], declared, strict=True)):
        typed = [t for t in (_typed(given), _typed(found.get(name))) if t is not None]
        if ranks is not None and i < len(ranks) and all(t[1] is None for t in typed):
            element_type = next((e for e, _ in typed if e), 0) or to_onnx(named[0][1].element_type)
            typed = [(element_type, [None] * ranks[i])]
        if not typed:
            return None
        element_type = next((e for e, _ in typed if e), 0)
        dims = next((d for _, d in typed if d is not None), None)
        if not element_type or dims is None:
            return None
        for _, other in typed[1:]:  # inference may know a dimension the model leaves open
            if other is not None and len(other) == len(dims):
                dims = [d if d is not None else o for d, o in zip(dims, other, strict=True)]
        where = f"output {name}"
        shape = tuple(fresh_dim("onnx") if d is None else d for d in dims)
        result.append((from_onnx(element_type, where), shape))
    return result


def _attribute(node: Any, name: str, default: Any) -> Any:
    for attribute in node.attribute:
        if attribute.name == name:
            return helper.get_attribute_value(attribute)
    return default


def _length(value: Output | None) -> int | None:
    """The static length of a vector input (axes), or None."""
    if value is None or value.rank != 1 or type(value.shape[0]) is not int:
        return None
    return int(value.shape[0])


def _reduce_rank(node: Any, inputs: list[Output | None]) -> list[int] | None:
    x = inputs[0]
    assert x is not None
    if _attribute(node, "keepdims", 1):
        return [x.rank]
    count = _length(inputs[1] if len(inputs) > 1 else None)
    if count is None:
        return None
    if count == 0:
        return [x.rank if _attribute(node, "noop_with_empty_axes", 0) else 0]
    return [x.rank - count]


def _unsqueeze_rank(node: Any, inputs: list[Output | None]) -> list[int] | None:
    count = _length(inputs[1] if len(inputs) > 1 else None)
    x = inputs[0]
    return None if count is None or x is None else [x.rank + count]


def _squeeze_rank(node: Any, inputs: list[Output | None]) -> list[int] | None:
    count = _length(inputs[1] if len(inputs) > 1 else None)
    x = inputs[0]
    return None if count is None or x is None else [x.rank - count]


def _same_rank(node: Any, inputs: list[Output | None]) -> list[int] | None:
    x = inputs[0]
    return None if x is None else [x.rank] * len(node.output)


def _carried_ranks(node: Any, inputs: list[Output | None]) -> list[int] | None:
    """Loop: the loop-carried outputs have their initial values' ranks (scan outputs are
    typed by the model's declarations or by inference)."""
    return [v.rank for v in inputs[2:] if v is not None]


#: Output ranks where ONNX shape inference gives none for a run-time input (axes, sizes),
#: by op type.
RANKS: dict[str, Callable[[Any, list[Output | None]], list[int] | None]] = {
    **{
        op: _reduce_rank
        for op in (
            "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
            "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
        )
    },
    "Unsqueeze": _unsqueeze_rank,
    "Squeeze": _squeeze_rank,
    "Split": _same_rank,
    "Loop": _carried_ranks,
    "Pad": _same_rank,
    "Resize": _same_rank,
    "Tile": _same_rank,
    "Slice": _same_rank,
}  # fmt: skip


def _typed(info: Any) -> tuple[int, list[int | None] | None] | None:
    """A ValueInfoProto's element type and dimensions (None where unknown)."""
    if info is None or info.type.WhichOneof("value") != "tensor_type":
        return None
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return tensor.elem_type, None
    return tensor.elem_type, [
        int(d.dim_value) if d.HasField("dim_value") else None for d in tensor.shape.dim
    ]


def _known(value: Output) -> bool:
    return constant_value(value) is not None


def _initializer(name: str, value: Output) -> Any:
    array = constant_value(value)
    assert array is not None
    return numpy_helper.from_array(np.asarray(array), name)


def _run(op: RunTimeOnnxNode, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """The reference kernel: import the node with every input a constant, then run it."""
    key = (op.node, op.opsets, tuple((a.dtype.str, a.shape, a.tobytes()) for a in arrays))
    return _CACHE.get_or_make(
        key, lambda: tuple(_convert_and_run(op, [np.asarray(a) for a in arrays]))
    )


def _convert_and_run(op: RunTimeOnnxNode, arrays: list[np.ndarray]) -> list[np.ndarray]:
    # A cycle: the importer imports this module to defer nodes.
    from opgraph.frontends.onnx.importer import import_model

    node = op.proto()
    names = [n for n in node.input if n] + list(op.outer)
    graph_inputs = [
        helper.make_tensor_value_info(n, _onnx_type(a), list(a.shape))
        for n, a in zip(names, arrays, strict=True)
    ]
    outputs = [
        helper.make_tensor_value_info(o, to_onnx(e), None)
        for o, e in zip([o for o in node.output if o], op.element_types, strict=True)
    ]
    graph = helper.make_graph([node], "run_time_node", graph_inputs, outputs)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in op.opsets]
    )
    try:
        fn = import_model(model, constant_inputs=dict(zip(names, arrays, strict=True)))
    except ConversionError as error:
        raise ConversionError(f"{op.describe()} with its run-time inputs: {error}") from None
    return [np.asarray(r) for r in backend("INTERPRETER").compile(fn)()]


def _onnx_type(array: np.ndarray) -> int:
    return to_onnx(from_dtype(array.dtype))


REFERENCE_KERNELS.add(RunTimeOnnxNode, _run)
REFERENCE_KERNELS.add(RunTimeOnnxModel, _run_model)
