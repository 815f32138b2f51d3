"""ONNX ModelProto -> opgraph Function.

Initializers become Constants, graph inputs Parameters (in model order), and each node is
converted by the newest registered converter whose ``since`` is at most the opset of its
domain; an op without a converter whose schema defines a function body is expanded through it
(``functions.py``). Values computed only from constants fold at import time, so
shape-computing subgraphs (Shape, ConstantOfShape, Range, computed Reshape targets…) become
constants. See docs/onnx.md.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx.defs
from onnx import AttributeProto

from opgraph.core.dim import Dim, Symbol, dim, free_symbols
from opgraph.core.errors import ConversionError, OpgraphError, OpTypeError
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.literals import Parameter, constant, parameter
from opgraph.core.node import Node, Output
from opgraph.core.provenance import provenance_scope
from opgraph.frontends.onnx import converters as _converters  # noqa: F401 - registers them
from opgraph.frontends.onnx.context import GraphContext, NeedsConstantError, NodeContext, fold
from opgraph.frontends.onnx.deferred import defer, defer_model
from opgraph.frontends.onnx.functions import function_converter
from opgraph.frontends.onnx.registry import Converter, lookup
from opgraph.frontends.onnx.symbolic import SymbolicValues
from opgraph.frontends.onnx.tensors import TensorReader
from opgraph.frontends.onnx.types import from_onnx
from opgraph.frontends.onnx.validate import (
    check_declared,
    check_header,
    check_input_types,
    check_model,
)
from opgraph.frontends.onnx.validate import check_names as _check_names  # noqa: F401 - session
from opgraph.ops.shape_tensors import ShapeTensorOp

OLDEST_OPSET = 1
#: The default of ``import_model(max_unroll=)``: Loop, Scan and recurrent iterations unrolled.
MAX_UNROLL = 4096
Progress = Callable[[int, int], None]


def import_model(
    model: Any,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    initializers_as_parameters: bool = False,
    progress: Progress | None = None,
    constant_inputs: Mapping[str, np.ndarray] | None = None,
    *,
    base_dir: str | os.PathLike[str] | None = None,
    max_unroll: int = MAX_UNROLL,
    run_time_values: bool = True,
) -> Function:
    """Convert an ONNX model to a Function.

    Args:
        model: a path, the serialized bytes, or an ``onnx.ModelProto``.
        input_shapes: shapes for inputs whose dimensions are symbolic or unknown (name → tuple
            of ints; may name only some inputs). A shape conflicting with a static dimension of
            the model is an error.
        initializers_as_parameters: make initializers that are also graph inputs Parameters
            (default: Constants).
        progress: called as ``progress(done, total)`` while nodes are converted.
        constant_inputs: values for graph inputs that should be specialised into Constants
            (e.g. a shape tensor fed as an input; opgraph shapes are static). Those inputs are
            not parameters of the Function.
        base_dir: the directory external tensor data is read from. A model given as a path
            reads from its own directory by default; bytes and ModelProtos read no file at all
            unless this is given. Locations must stay inside it (docs/onnx.md).
        max_unroll: the most iterations import may unroll, summed over every Loop, Scan and
            recurrent layer of the model (nested ones included); more is a ConversionError.
        run_time_values: inputs that feed shapes, axes or counts may be known only at run time
            (default): such nodes become run-time ops (``ops.dynamic_reshape``…) or ONNX nodes
            converted when the Function runs (``deferred.RunTimeOnnxNode``). False: they
            raise ``NeedsConstantError`` instead, so every shape is fixed at import.

    Returns:
        The Function; parameters in model input order, results in model output order.

    Raises:
        ConversionError: the model cannot be read, uses ops or types opgraph does not support
            (all of them are listed at once), is malformed, or needs input shapes.
        NeedsConstantError: (a ConversionError) a converter needs the import-time value of
            ``error.value_name`` (a shape, axes, a trip count…) and neither the model nor ONNX
            shape inference types the node's outputs (or ``run_time_values=False``);
            specialise that input with ``constant_inputs`` when it is a graph input.

    Example:
        >>> fn = import_model("bert.onnx", input_shapes={"input_ids": (1, 128)})
    """
    if progress is not None and not callable(progress):
        raise ConversionError(
            f"progress must be callable as progress(done, total), got {progress!r}"
        )
    if constant_inputs is not None and not isinstance(constant_inputs, Mapping):
        raise ConversionError(
            f"constant_inputs must map input names to arrays, got {type(constant_inputs).__name__}"
        )
    if base_dir is not None and not isinstance(base_dir, str | os.PathLike):
        raise ConversionError(f"base_dir must be a directory path, got {base_dir!r}")
    proto, own_dir = _load_lazily(model)
    importer = Importer(proto, _input_shapes(input_shapes), initializers_as_parameters, progress)
    importer.constant_inputs = dict(constant_inputs or {})
    importer.tensors = TensorReader(base_dir if base_dir is not None else own_dir)
    importer.max_unroll = _count(max_unroll, "max_unroll")
    importer.run_time_values = bool(run_time_values)
    try:
        return importer.run()
    except ConversionError as error:
        # A value needed at import that nothing could type a node for, or run-time sizes met
        # in a type rule that cannot tell them equal: the whole model is converted when it
        # runs, with its inputs' values (deferred.py), if nothing else specialised it and its
        # outputs can be typed.
        wait = isinstance(error, NeedsConstantError) or _sizes_met(error)
        if not wait or not run_time_values or importer.constant_inputs or not importer.parameters:
            raise
        return defer_model(proto, importer.parameters, error)


def _load(model: Any, base_dir: str | os.PathLike[str] | None = None) -> Any:
    """The ModelProto of a path, bytes or ModelProto with its external data read into it
    (through the TensorReader, from ``base_dir`` if given, else a path's own directory; bytes
    and ModelProtos without ``base_dir`` read no file). For callers that keep the proto
    (``InferenceSession``); ``import_model`` reads external data lazily instead."""
    proto, own_dir = _load_lazily(model)
    directory = os.fspath(base_dir) if base_dir is not None else own_dir
    if directory is not None:
        TensorReader(directory).inline_all(proto)
    return proto


def _load_lazily(model: Any) -> tuple[Any, str | None]:
    """The ModelProto and, for a path, its directory (external data is read only there)."""

    if isinstance(model, onnx.ModelProto):
        return model, None
    try:
        if isinstance(model, bytes | bytearray):
            return onnx.load_from_string(bytes(model)), None
        if isinstance(model, str | os.PathLike):
            path = os.path.abspath(os.fspath(model))
            return onnx.load(path, load_external_data=False), os.path.dirname(path)
    except FileNotFoundError:
        raise ConversionError(f"ONNX model file {os.fspath(model)!r} does not exist") from None
    except Exception as error:  # protobuf raises its own DecodeError and friends
        raise ConversionError(f"cannot read the ONNX model: {error}") from error
    raise ConversionError(
        f"import_model needs a path, bytes or onnx.ModelProto, got {type(model).__name__}"
    )


class Importer:
    """One model's conversion."""

    def __init__(
        self,
        model: Any,
        input_shapes: dict[str, tuple[int, ...]],
        initializers_as_parameters: bool,
        progress: Progress | None,
    ) -> None:
        self.model = model
        self.input_shapes = input_shapes
        self.initializers_as_parameters = initializers_as_parameters
        self.progress = progress
        self.constant_inputs: dict[str, np.ndarray] = {}
        self.tensors = TensorReader(None)
        self.max_unroll = MAX_UNROLL
        self.run_time_values = True
        #: How many nodes read a shape-like value at run time (run-time ops, deferred nodes).
        self.run_time_nodes = 0
        self.parameters: list[Output] | None = None
        self.unrolled = 0
        self.opsets: dict[str, int] = {}
        self.declared: dict[str, Any] = {}  # value_info of the main graph, by name
        self.declared_outputs: dict[str, Any] = {}  # its graph outputs, by name
        self.main: GraphContext | None = None
        #: Shape values with symbolic dimensions (``symbolic.py``).
        self.symbolic = SymbolicValues()
        self.dim_names: dict[tuple[str, int], str] = {}  # (input, axis) -> symbol name
        #: The symbols of the parameters' shapes; any other is a data-dependent size.
        self.parameter_symbols: frozenset[Symbol] = frozenset()

    def run(self) -> Function:
        self.tensors.check_locations(self.model)
        check_header(self.model)
        self.opsets = _opsets(self.model)
        graph = self.model.graph
        _check_supported(graph, self.opsets)
        check_model(self.model)
        ctx = self.main = GraphContext(dict(self.opsets))
        self.declared = {v.name: v for v in graph.value_info}
        self.declared_outputs = {v.name: v for v in graph.output}
        self.dim_names = _dim_names(graph)
        params = self.parameters = self._bind_inputs(graph, ctx)
        self.parameter_symbols = free_symbols(d for p in params for d in p.shape)
        self.convert_nodes(graph, ctx, count_progress=True)
        results = [_required(ctx, o.name, "graph output") for o in graph.output]
        for info, value in zip(graph.output, results, strict=True):
            if value in self.symbolic.arrays:
                raise ConversionError(
                    f"graph output {info.name!r} is a shape value with symbolic dimensions "
                    f"{self.symbolic.describe(value)}; specialise the symbolic inputs with "
                    "import_model(..., input_shapes={name: shape})"
                )
        for info, value in zip(graph.output, results, strict=True):
            check_declared(info, value, "graph output")
        fn = Function(results, params, name=graph.name or "onnx_model")
        return _name_results(fn, [o.name for o in graph.output])

    def unroll(self, where: str, steps: int) -> None:
        """Count ``steps`` more unrolled iterations; ConversionError past ``max_unroll``."""
        if self.unrolled + steps > self.max_unroll:
            raise ConversionError(
                f"{where}: unrolling {steps} more iteration(s) would exceed max_unroll="
                f"{self.max_unroll} (Loop, Scan and recurrent iterations over the whole model; "
                f"{self.unrolled} already unrolled); pass import_model(..., max_unroll=N) to "
                "allow more"
            )
        self.unrolled += steps

    # ------------------------------------------------------------------------ inputs
    def _bind_inputs(self, graph: Any, ctx: GraphContext) -> list[Output]:
        initializers = self.initializers(graph)
        declared = {i.name for i in graph.input}
        unknown = sorted((set(self.input_shapes) | set(self.constant_inputs)) - declared)
        if unknown:
            raise ConversionError(
                f"input_shapes/constant_inputs name unknown input(s): {', '.join(unknown)}"
            )
        params: list[Output] = []
        missing: list[str] = []
        for info in graph.input:
            if info.name in initializers:
                check_declared(info, initializers[info.name], "graph input (an initializer)")
                if not self.initializers_as_parameters:
                    continue
            if info.name in self.constant_inputs:
                where = f"graph input {info.name!r}"
                element_type = from_onnx(info.type.tensor_type.elem_type, where)
                fixed = constant(self.constant_inputs[info.name], element_type)
                check_declared(info, fixed, "graph input (in constant_inputs)")
                ctx.values[info.name] = fixed
                continue
            value = self._parameter(info, initializers.get(info.name), missing)
            if value is not None:
                ctx.values[info.name] = value
                params.append(value)
        if missing:
            raise ConversionError(
                "the rank of these inputs is unknown; pass input_shapes={name: shape}: "
                + "; ".join(missing)
            )
        for name, value in initializers.items():
            if name not in ctx.values:
                ctx.values[name] = value
        return params

    def initializers(self, graph: Any) -> dict[str, Output]:
        """``graph``'s initializers and sparse initializers as Constants, by name."""
        values: dict[str, Output] = {}
        for tensor in graph.initializer:
            where = f"initializer {tensor.name!r}"
            element_type = from_onnx(tensor.data_type, where)
            values[tensor.name] = constant(self.tensors.array(tensor, where), element_type)
        for sparse in graph.sparse_initializer:
            where = f"sparse initializer {sparse.values.name!r}"
            element_type = from_onnx(sparse.values.data_type, where)
            array = self.tensors.sparse_array(sparse, where)
            values[sparse.values.name] = constant(array, element_type)
        return values

    def _parameter(
        self, info: Any, initializer: Output | None, missing: list[str]
    ) -> Output | None:
        where = f"graph input {info.name!r}"
        if info.type.WhichOneof("value") != "tensor_type":
            raise ConversionError(
                f"{where}: only tensor inputs are supported, got {info.type.WhichOneof('value')}"
            )
        tensor_type = info.type.tensor_type
        element_type = from_onnx(tensor_type.elem_type, where)
        shape = self._shape(info.name, tensor_type, initializer, missing)
        return None if shape is None else parameter(element_type, shape, name=info.name)

    def _shape(
        self, name: str, tensor_type: Any, initializer: Output | None, missing: list[str]
    ) -> tuple[Dim, ...] | None:
        dims = tensor_type.shape.dim if tensor_type.HasField("shape") else None
        given = self.input_shapes.get(name)
        if initializer is not None:
            return initializer.shape
        if dims is None:
            if given is None:
                missing.append(f"{name} (rank unknown)")
                return None
            return tuple(given)
        static = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        if any(s is not None and s < 0 for s in static):
            raise ConversionError(
                f"graph input {name!r} is declared with a negative dimension: "
                f"{[s if s is not None else '?' for s in static]}"
            )
        if given is not None:
            if len(given) != len(static) or any(
                s is not None and s != g for s, g in zip(static, given, strict=False)
            ):
                shown = [s if s is not None else "?" for s in static]
                raise ConversionError(
                    f"input_shapes[{name!r}] = {list(given)} conflicts with the model's "
                    f"shape {shown}"
                )
            return given
        # dim_param and unknown dimensions stay symbolic: og.dim named after the dim_param
        # (one name, one symbol across inputs); unnamed ones get a fresh name (_dim_names).
        return tuple(
            int(s) if s is not None else dim(self.dim_names[(name, i)])
            for i, s in enumerate(static)
        )

    # ------------------------------------------------------------------------- nodes
    def convert_nodes(self, graph: Any, ctx: GraphContext, count_progress: bool = False) -> None:
        """Convert ``graph``'s nodes into ``ctx`` (reporting progress for the main graph)."""
        self.convert_node_list(list(graph.node), ctx, count_progress)

    def convert_node_list(
        self, nodes: Sequence[Any], ctx: GraphContext, count_progress: bool = False
    ) -> None:
        """Convert ``nodes`` in order, binding their outputs in ``ctx``."""
        total = len(nodes)
        for index, node in enumerate(nodes):
            self._convert_node(node, ctx)
            if count_progress and self.progress is not None:
                self.progress(index + 1, total)

    def _convert_node(self, node: Any, ctx: GraphContext) -> None:
        label = f"onnx node {node.name or node.op_type!r} ({node.op_type})"
        inputs = [ctx.lookup(name, label) if name else None for name in node.input]
        converter = converter_for(node.op_type, node.domain, ctx.version(node.domain))
        if converter is None:
            raise ConversionError(
                f"{label}: unsupported op {node.op_type} (domain {node.domain or 'ai.onnx'}, "
                f"opset {ctx.version(node.domain)})"
            )
        node_ctx = NodeContext(node, inputs, ctx, self)
        check_input_types(node, inputs, ctx.version(node.domain), node_ctx.where)
        if self.symbolic.any(inputs):
            converter = self.symbolic.convert  # reads shape values with symbolic dimensions
        with provenance_scope(label):
            try:
                produced = self._convert_or_defer(converter, node_ctx)
            except ConversionError:
                raise
            except OpgraphError as error:
                raise ConversionError(f"{node_ctx.where}: {error}") from error
            except Exception as error:
                # A malformed node (wrong attribute kinds, bad values) must not escape as a
                # bare traceback from inside a converter; the cause stays chained.
                raise ConversionError(
                    f"{node_ctx.where}: cannot convert: {type(error).__name__}: {error}"
                ) from error
        outputs = [produced] if isinstance(produced, Output) else list(produced)
        names = list(node.output)
        while names and not names[-1]:
            names.pop()
        if len(outputs) < len(names):
            raise ConversionError(
                f"{node_ctx.where}: converter produced {len(outputs)} outputs for "
                f"{len(names)} names"
            )
        with provenance_scope(label):
            try:
                outputs = fold(outputs, inputs)
            except OpgraphError as error:
                raise ConversionError(f"{node_ctx.where}: folding constants: {error}") from error
        if ctx is self.main:
            outputs = self._declared_sizes(names, outputs)
        for name, value in zip(names, outputs, strict=False):
            if name:
                if value is not None and ctx is self.main and name in self.declared:
                    check_declared(self.declared[name], value, f"{node_ctx.where}: value_info")
                ctx.values[name] = value

    def declared_info(self, name: str) -> Any:
        """The main graph's declaration of value ``name`` (value_info or graph output)."""
        return self.declared.get(name) or self.declared_outputs.get(name)

    def _declared_sizes(
        self, names: Sequence[str], outputs: list[Output | None]
    ) -> list[Output | None]:
        """A run-time shape op (``ops.dynamic_reshape``…) whose first output the model
        declares with static dimensions gets those as its sizes (checked when it runs) instead
        of fresh symbols, so later type rules see them and CPU can run it."""
        first = outputs[0] if outputs else None
        if first is None or not isinstance(first.node.op, ShapeTensorOp) or not names:
            return outputs
        declared = _static_dims(self.declared_info(names[0]))
        node = first.node
        if (
            declared is None
            or len(declared) != first.rank
            or any(o is not None and o.node is not node for o in outputs)
        ):
            return outputs
        resized = dataclasses.replace(node.op, dims=declared)  # type: ignore[type-var]
        rebuilt = resized.build(*node.inputs, provenance=node.provenance)
        return [None if o is None else rebuilt.outputs[o.index] for o in outputs]

    def _convert_or_defer(self, converter: Converter, ctx: NodeContext) -> Any:
        """The converter's outputs; a value it needs at import time that is known only at run
        time makes the node one converted when the Function runs (deferred.py), unless
        ``run_time_values`` is off or nothing types its outputs (the error stands)."""
        try:
            return converter(ctx)
        except NeedsConstantError as error:
            if not self.run_time_values:
                raise
            return defer(ctx, error)

    def convert_subgraph(
        self, graph: Any, outer: GraphContext, bindings: Mapping[str, Output]
    ) -> list[Output]:
        """Convert a subgraph (If branches, unrolled Loop/Scan bodies) with ``bindings`` for its
        inputs; returns its outputs."""
        ctx = GraphContext(outer.opsets, outer=outer, values=dict(bindings))
        ctx.values.update(self.initializers(graph))
        self.convert_nodes(graph, ctx)
        return [_required(ctx, o.name, "subgraph output") for o in graph.output]


def _sizes_met(error: ConversionError) -> bool:
    """True when ``error`` is a type rule's, naming a data-dependent symbol (``_reshape3``,
    ``_onnx12``: fresh symbols start with an underscore)."""
    cause = error.__cause__
    return (
        isinstance(cause, OpTypeError)
        and re.search(r"(?<![\w])_[a-z]+\d+\b", str(cause)) is not None
    )


def _static_dims(info: Any) -> tuple[int, ...] | None:
    """The dimensions a ValueInfoProto declares, when every one is a number."""
    if info is None or info.type.WhichOneof("value") != "tensor_type":
        return None
    tensor = info.type.tensor_type
    if not tensor.HasField("shape") or not all(d.HasField("dim_value") for d in tensor.shape.dim):
        return None
    return tuple(int(d.dim_value) for d in tensor.shape.dim)


def converter_for(op_type: str, domain: str, version: int) -> Converter | None:
    """The registered converter for the op at ``version``, else its function-body expansion."""
    return lookup(op_type, domain, version) or function_converter(op_type, domain, version)


def _required(ctx: GraphContext, name: str, where: str) -> Output:
    value = ctx.lookup(name, where)
    if value is None:
        raise ConversionError(f"{where} {name!r} is an omitted optional value")
    return value


def _opsets(model: Any) -> dict[str, int]:
    """Opset version per domain ("" for ai.onnx); a model importing only other domains runs
    their ops at the newest default opset this onnx knows."""

    opsets: dict[str, int] = {}
    for entry in model.opset_import:
        domain = "" if entry.domain in ("", "ai.onnx") else entry.domain
        opsets[domain] = max(opsets.get(domain, 0), int(entry.version))
    if "" not in opsets:
        if not opsets:
            raise ConversionError("the model imports no opset (opset_import is empty)")
        opsets[""] = int(onnx.defs.onnx_opset_version())
    if opsets[""] < OLDEST_OPSET:
        raise ConversionError(
            f"opset {opsets['']} is older than the oldest supported opset ({OLDEST_OPSET})"
        )
    return opsets


def _check_supported(graph: Any, opsets: dict[str, int]) -> None:
    missing: list[str] = []
    for node in _all_nodes(graph):
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        version = opsets.get(domain, 1)
        if converter_for(node.op_type, node.domain, version) is None:
            domain = node.domain or "ai.onnx"
            missing.append(
                f"{node.op_type} (domain {domain}, opset {version}, "
                f"node {node.name or '<unnamed>'!r})"
            )
    if missing:
        unique = sorted(set(missing))
        raise ConversionError(
            f"the model uses {len(unique)} unsupported op(s): " + "; ".join(unique)
        )


def _all_nodes(graph: Any) -> list[Any]:

    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                nodes.extend(_all_nodes(attribute.g))
            elif attribute.type == AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    nodes.extend(_all_nodes(sub))
    return nodes


def _name_results(fn: Function, names: list[str]) -> Function:
    """Give each result's producing node the ONNX output name (single-output nodes that are
    not Parameters and have no name yet)."""
    wanted: dict[Node, str] = {}
    for result, name in zip(fn.results, names, strict=True):
        node = result.node
        if len(node.outputs) == 1 and node.name is None and not isinstance(node.op, Parameter):
            wanted.setdefault(node, name)

    def rename(node: Node, inputs: tuple[Output, ...]) -> Sequence[Output] | None:
        if node not in wanted:
            return None
        return node.op.build(*inputs, name=wanted[node], provenance=node.provenance).outputs

    mapping = rebuild_nodes(fn.nodes, rename)
    return fn.with_outputs(mapping) if mapping else fn


def _dim_names(graph: Any) -> dict[tuple[str, int], str]:
    """The symbol name of each symbolic or unknown input dimension, by (input, axis).

    A ``dim_param`` that is an identifier names its symbol (the same in every input); another
    ``dim_param`` is made one (``batch size`` -> ``batch_size``); an unnamed unknown dimension
    gets ``<input>_<axis>``. A made name that collides with another name gets a suffix.
    """
    params = {
        d.dim_param
        for info in graph.input
        if info.type.tensor_type.HasField("shape")
        for d in info.type.tensor_type.shape.dim
        if not d.HasField("dim_value") and d.dim_param.isidentifier()
    }
    taken = set(params)
    made: dict[str, str] = {}  # a non-identifier dim_param -> its name
    names: dict[tuple[str, int], str] = {}
    for info in graph.input:
        if not info.type.tensor_type.HasField("shape"):
            continue
        for axis, d in enumerate(info.type.tensor_type.shape.dim):
            if d.HasField("dim_value"):
                continue
            if d.dim_param in params:
                names[(info.name, axis)] = d.dim_param
                continue
            if d.dim_param and d.dim_param in made:
                names[(info.name, axis)] = made[d.dim_param]
                continue
            name = _identifier(d.dim_param or f"{info.name}_{axis}", taken)
            if d.dim_param:
                made[d.dim_param] = name
            names[(info.name, axis)] = name
    return names


def _identifier(text: str, taken: set[str]) -> str:
    """``text`` made an identifier not in ``taken`` (which it joins)."""
    base = re.sub(r"\W", "_", text) or "dim"
    if not base.isidentifier():
        base = "d_" + base
    name, suffix = base, 1
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(name)
    return name


def _input_shapes(shapes: Any) -> dict[str, tuple[int, ...]]:
    """``input_shapes`` checked: a mapping of input names to sequences of non-negative ints."""
    if shapes is None:
        return {}
    if not isinstance(shapes, Mapping):
        raise ConversionError(
            f"input_shapes must map input names to shapes, got {type(shapes).__name__}"
        )
    checked: dict[str, tuple[int, ...]] = {}
    for name, shape in shapes.items():
        if isinstance(shape, str | bytes) or not isinstance(shape, Sequence | np.ndarray):
            raise ConversionError(
                f"input_shapes[{name!r}] must be a sequence of dimensions such as (1, 3, 224, "
                f"224), got {shape!r} ({type(shape).__name__})"
            )
        checked[name] = tuple(_count(d, f"input_shapes[{name!r}] dimension") for d in shape)
    return checked


def _count(value: Any, what: str) -> int:
    """``value`` as a non-negative int (numpy integers too); ConversionError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ConversionError(f"{what} must be a non-negative integer, got {value!r}")
    return int(value)
