"""``InferenceSession``: an ONNX model ready to run in one line, with onnxruntime's interface.

    sess = og.onnx.InferenceSession("model.onnx")        # or bytes, or an onnx.ModelProto
    (y,) = sess.run(None, {"x": x})                       # as onnxruntime.InferenceSession
    (y,) = sess(x)                                        # positional, in get_inputs() order

A model with symbolic dimensions (``dim_param`` or unknown) or integer inputs is imported once
with those dimensions symbolic and shape-valued inputs as run-time tensors; where the backend
runs such Functions (INTERPRETER, and CPU: symbolic sizes natively, data-dependent ones in
stages) that one compile serves every input signature. Otherwise (GPU compiles static shapes;
a model whose import needs input values or concrete sizes)
a session imports and compiles the model once per input signature (the shapes of the inputs,
plus the values of shape-valued inputs a converter needs at import time) and keeps the last
``cache_size`` compiled signatures (least recently used evicted); each new size then costs one
import and compile.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from opgraph.backends.cpu import config as cpu_config
from opgraph.core.element_type import ElementType
from opgraph.core.errors import CallTypeError, ConversionError, GraphError, UnsupportedOpError
from opgraph.core.function import Function
from opgraph.frontends.onnx.context import NeedsConstantError
from opgraph.frontends.onnx.importer import (
    MAX_UNROLL,
    _check_names,
    _check_supported,
    _load,
    _opsets,
)
from opgraph.frontends.onnx.importer import import_model as _import_model
from opgraph.frontends.onnx.types import from_onnx
from opgraph.runtime.arguments import bind_arguments
from opgraph.runtime.backend import Executable, backends
from opgraph.runtime.backend import backend as get_backend
from opgraph.runtime.cache import LruCache
from opgraph.runtime.progress import accepts_progress

#: onnxruntime's type names (``NodeArg.type`` is ``"tensor(<name>)"``) by ONNX data type code.
ORT_TYPE_NAMES = {
    1: "float",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "string",
    9: "bool",
    10: "float16",
    11: "double",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
    16: "bfloat16",
}

#: onnxruntime execution providers and the opgraph backend each stands for ("CPU" means the
#: default CPU backend: INTERPRETER where no C compiler exists).
PROVIDERS = {"CPUExecutionProvider": "CPU", "CUDAExecutionProvider": "GPU"}

#: ``progress(stage, done, total)``: stage is "import" (nodes converted) or "compile".
Progress = Callable[[str, int, int], None]
Dim = int | str | None


def default_backend() -> str:
    """``"CPU"`` when the CPU backend can compile here (it is registered and a C compiler was
    found), else ``"INTERPRETER"``."""
    if "CPU" not in backends():
        return "INTERPRETER"

    return "CPU" if cpu_config.default_config().compiler is not None else "INTERPRETER"


def numpy_dtype(type_name: str) -> np.dtype:
    """The numpy dtype of a ``NodeArg.type`` (``"tensor(float)"`` → float32).

    Raises:
        ConversionError: not a tensor type opgraph supports.
    """
    codes = {f"tensor({name})": code for code, name in ORT_TYPE_NAMES.items()}
    if type_name not in codes:
        raise ConversionError(f"{type_name!r} is not a tensor type opgraph supports")
    return np.dtype(from_onnx(codes[type_name], type_name).dtype)


@dataclass(frozen=True)
class NodeArg:
    """A model input or output as onnxruntime describes it.

    Attributes:
        name: the ONNX value name.
        shape: one entry per axis: an int, the symbolic name (``"batch"``), or None when the
            axis is unknown; None for the whole shape when the rank is unknown.
        type: ``"tensor(float)"``, ``"tensor(int64)"``…
    """

    name: str
    shape: list[Dim] | None
    type: str


@dataclass(frozen=True)
class Compiled:
    """One input signature's Function and Executable, and what they took to make."""

    function: Function
    executable: Executable
    import_seconds: float
    compile_seconds: float


@dataclass(frozen=True)
class _Input:
    arg: NodeArg
    element_type: ElementType

    @property
    def name(self) -> str:
        return self.arg.name

    def check(self, value: Any, where: str) -> np.ndarray:
        """``value`` as an array of this input's dtype and rank (static axes checked)."""
        dtype = np.dtype(self.element_type.dtype)
        try:
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
        except (TypeError, ValueError) as error:
            raise CallTypeError(f"{where}: input {self.name!r}: not an array ({error})") from None
        if array.dtype != dtype:
            raise CallTypeError(
                f"{where}: input {self.name!r} expects {self.arg.type} (numpy {dtype}), got a "
                f"{array.dtype} array; convert it first (e.g. x.astype('{dtype}'))"
            )
        shape = self.arg.shape
        if shape is None:
            return array
        if array.ndim != len(shape) or any(
            isinstance(d, int) and d != n for d, n in zip(shape, array.shape, strict=False)
        ):
            raise GraphError(
                f"{where}: input {self.name!r} expects shape {shape}, got {list(array.shape)}"
            )
        return array


class InferenceSession:
    """An ONNX model compiled on an opgraph backend, run like ``onnxruntime.InferenceSession``.

    Args:
        model: a path, the serialized bytes, or an ``onnx.ModelProto``.
        sess_options: onnxruntime's SessionOptions have no opgraph meaning; only None.
        providers: onnxruntime-style provider names in priority order
            (``["CPUExecutionProvider"]``); the first one available here is used. Give either
            this or ``backend``.
        backend: the opgraph backend name (default: CPU, or INTERPRETER where no C compiler
            exists).
        cache_size: compiled input signatures kept (least recently used evicted).
        progress: called as ``progress(stage, done, total)`` while a signature is imported
            ("import") and compiled ("compile").
        base_dir: the directory external tensor data is read from (as ``import_model``'s: a
            path reads from its own directory by default; bytes and ModelProtos read no file
            unless this is given).
        max_unroll: the most Loop/Scan/recurrent iterations import may unroll (as
            ``import_model``'s).

    Raises:
        ConversionError: the model cannot be read, is malformed, has a non-tensor input or
            output, or uses unsupported ops (all listed).
        RegistryError: an unknown or unavailable backend.
        GraphError: bad ``providers``, ``sess_options`` or ``cache_size``.

    Example:
        >>> sess = InferenceSession("model.onnx")
        >>> (y,) = sess.run(None, {"x": x})
    """

    def __init__(
        self,
        model: Any,
        sess_options: Any = None,
        providers: Sequence[Any] | None = None,
        *,
        backend: str | None = None,
        cache_size: int = 8,
        progress: Progress | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        max_unroll: int = MAX_UNROLL,
    ) -> None:
        if sess_options is not None:
            raise GraphError(
                "InferenceSession: sess_options (onnxruntime SessionOptions) have no opgraph "
                "equivalent; leave them out (choose the backend with backend= or providers=)"
            )
        if backend is not None and not isinstance(backend, str):
            raise GraphError(f"InferenceSession: backend must be a name, got {backend!r}")
        if not isinstance(cache_size, int) or cache_size < 1:
            raise GraphError(f"InferenceSession: cache_size must be an int >= 1, got {cache_size}")
        self.backend = _choose_backend(backend, providers)
        get_backend(self.backend)  # an unknown or unavailable backend fails here
        self._proto = _load(model, base_dir)
        self._max_unroll = max_unroll
        self._where = _describe(model, self._proto)
        _check_names(self._proto.graph)
        _check_supported(self._proto.graph, _opsets(self._proto))
        self._inputs = _graph_inputs(self._proto.graph)
        self._outputs = [_node_arg(o, "graph output") for o in _typed_outputs(self._proto)]
        self._initializers = {t.name for t in self._proto.graph.initializer}
        self._cache_size = cache_size
        self._cache: LruCache[tuple[Any, ...], Compiled] = LruCache(cache_size)
        self._constant_inputs: set[str] = set()  # inputs whose values import needs
        self._lock = threading.Lock()
        self._progress = progress
        #: The one compile serving every signature (symbolic dimensions, shape-valued inputs
        #: as run-time tensors): None until tried, False when the model has neither symbolic
        #: nor integer inputs, its import needs sizes, or the backend refuses it.
        self._symbolic: Compiled | bool | None = (
            None if _has_symbols(self._inputs) or _has_integer_inputs(self._inputs) else False
        )
        #: How many imports and compiles the session has made.
        self.compiles = 0

    # ---------------------------------------------------------------- onnxruntime API
    def get_inputs(self) -> list[NodeArg]:
        """The model's inputs (initializers excluded), in model order."""
        return [i.arg for i in self._inputs]

    def get_outputs(self) -> list[NodeArg]:
        """The model's outputs, in model order."""
        return list(self._outputs)

    def get_providers(self) -> list[str]:
        """The onnxruntime provider name that stands for this session's backend."""
        return ["CUDAExecutionProvider" if self.backend == "GPU" else "CPUExecutionProvider"]

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: Any = None,
    ) -> list[np.ndarray]:
        """Run the model.

        Args:
            output_names: the outputs wanted, in the order wanted; None for all of them.
            input_feed: every input's value by name (numpy arrays of the input's dtype).
            run_options: onnxruntime's RunOptions have no opgraph meaning; only None.

        Returns:
            The requested outputs as numpy arrays, in the order of ``output_names``.

        Raises:
            GraphError: an unknown or missing input name, an unknown output name, a wrong
                rank, a wrong static dimension, or a symbolic dimension with two sizes.
            CallTypeError: an input array of the wrong dtype.
        """
        if run_options is not None:
            raise GraphError(f"{self._where}: run_options have no opgraph equivalent; pass None")
        positions = self._output_positions(output_names)
        arrays = self._checked_feed(input_feed)
        compiled = self._compiled(arrays)
        arguments = [arrays[p.node.name or ""] for p in compiled.function.parameters]
        results = compiled.executable(*arguments)
        return [results[i] for i in positions]

    def __call__(self, /, *arrays: Any, **named: Any) -> list[np.ndarray]:
        """Every output, for inputs given positionally (``get_inputs()`` order), by name, or
        as one mapping."""
        names = [i.name for i in self._inputs]
        bound = bind_arguments(names, arrays, named, self._where)
        if len(bound) != len(names):
            raise GraphError(
                f"{self._where}: expected {len(names)} input(s) ({', '.join(names)}), got "
                f"{len(bound)}"
            )
        return self.run(None, dict(zip(names, bound, strict=True)))

    # ---------------------------------------------------------------------- opgraph
    def prepare(self, input_feed: Mapping[str, Any]) -> Compiled:
        """Import and compile for these inputs' signature now (their shapes, and the values of
        inputs the import needs as constants), or return the cached result; ``run`` with
        inputs of that signature then reuses it. Checks ``input_feed`` as ``run`` does.

        Returns:
            The signature's Function (parameters are the inputs in model order, except those
            specialised on their values), Executable, and import and compile seconds.
        """
        return self._compiled(self._checked_feed(input_feed))

    @property
    def value_inputs(self) -> list[str]:
        """The inputs whose values the import needs (e.g. a Reshape target fed as an input):
        their values are part of the signature, so each new value compiles anew."""
        with self._lock:
            return sorted(self._constant_inputs)

    @property
    def cached_signatures(self) -> list[dict[str, tuple[int, ...]]]:
        """The input shapes of the compiled signatures, least recently used first."""
        names = [i.name for i in self._inputs]
        return [dict(zip(names, key[0], strict=True)) for key in self._cache]

    # --------------------------------------------------------------------- internals
    def _output_positions(self, output_names: Sequence[str] | None) -> list[int]:
        names = [o.name for o in self._outputs]
        if output_names is None:
            return list(range(len(names)))
        if isinstance(output_names, str) or not isinstance(output_names, Sequence):
            raise GraphError(
                f"{self._where}: output_names must be a list of output names or None, got "
                f"{type(output_names).__name__} {output_names!r}"
            )
        unknown = [n for n in output_names if n not in names]
        if unknown:
            raise GraphError(
                f"{self._where}: unknown output name(s) {', '.join(map(repr, unknown))}; the "
                f"model's outputs: {', '.join(map(repr, names))}"
            )
        return [names.index(n) for n in output_names]

    def _checked_feed(self, input_feed: Mapping[str, Any]) -> dict[str, np.ndarray]:
        if not isinstance(input_feed, Mapping):
            raise GraphError(
                f"{self._where}: input_feed must be a dict of input name -> array, got "
                f"{type(input_feed).__name__} (call the session, sess(x, y), to pass arrays "
                "positionally)"
            )
        known = {i.name for i in self._inputs}
        unknown = [n for n in input_feed if n not in known]
        if unknown:
            raise GraphError(f"{self._where}: {self._unknown_inputs_message(unknown)}")
        missing = [i.name for i in self._inputs if i.name not in input_feed]
        if missing:
            raise GraphError(
                f"{self._where}: missing input(s) {', '.join(map(repr, missing))}; the model's "
                f"inputs: {self._inputs_listing()}"
            )
        arrays = {i.name: i.check(input_feed[i.name], self._where) for i in self._inputs}
        _check_symbols(self._inputs, arrays, self._where)
        return arrays

    def _unknown_inputs_message(self, unknown: Sequence[Any]) -> str:
        initializers = [n for n in unknown if n in self._initializers]
        note = (
            f" ({', '.join(map(repr, initializers))}: initializers are constants here and "
            "cannot be fed)"
            if initializers
            else ""
        )
        return (
            f"unknown input name(s) {', '.join(map(repr, unknown))}{note}; the model's inputs: "
            f"{self._inputs_listing()}"
        )

    def _inputs_listing(self) -> str:
        return ", ".join(f"{i.name!r} {i.arg.type} {i.arg.shape}" for i in self._inputs) or "none"

    def _compiled(self, arrays: Mapping[str, np.ndarray]) -> Compiled:
        symbolic = self._symbolic_entry()
        if symbolic is not None:
            return symbolic
        shapes = {name: array.shape for name, array in arrays.items()}
        while True:
            with self._lock:
                names = tuple(self._constant_inputs)
            try:
                return self._entry(shapes, {n: arrays[n] for n in names})
            except NeedsConstantError as error:
                if error.value_name not in arrays or error.value_name in names:
                    raise
                with self._lock:  # specialise that input on its value from now on; retry
                    self._constant_inputs.add(error.value_name)

    def _entry(
        self, shapes: Mapping[str, tuple[int, ...]], constants: Mapping[str, np.ndarray]
    ) -> Compiled:
        key = _key(self._inputs, shapes, constants)
        with self._lock:  # one build at a time: threads missing one signature build it once
            return self._cache.get_or_make(key, lambda: self._build(shapes, constants))

    def _symbolic_entry(self) -> Compiled | None:
        """The symbolic compile, made on first use; None where there is none (see __init__)."""
        with self._lock:
            if isinstance(self._symbolic, Compiled):
                return self._symbolic
            if self._symbolic is False:
                return None
            try:
                self._symbolic = self._build({}, {})
            except (ConversionError, UnsupportedOpError):
                # The import needs sizes or input values, or the backend compiles static
                # shapes only: specialise per signature instead.
                self._symbolic = False
                return None
            return self._symbolic

    def _build(
        self, shapes: Mapping[str, tuple[int, ...]], constants: Mapping[str, np.ndarray]
    ) -> Compiled:
        progress = self._progress
        started = time.perf_counter()
        function = _import_model(
            self._proto,
            input_shapes={n: s for n, s in shapes.items() if n not in constants},
            progress=(lambda done, total: progress("import", done, total)) if progress else None,
            constant_inputs=dict(constants),
            max_unroll=self._max_unroll,
            # The symbolic compile keeps shape-valued inputs run-time tensors (one compile
            # for every value, where the backend runs them); a per-signature one specialises
            # them on their values (NeedsConstantError, then a retry in _compiled).
            run_time_values=not shapes and not constants,
        )
        imported = time.perf_counter()
        executable = _compile(get_backend(self.backend), function, progress)
        self.compiles += 1
        return Compiled(function, executable, imported - started, time.perf_counter() - imported)

    def __repr__(self) -> str:
        return f"<InferenceSession {self._where} on {self.backend}>"


def _compile(backend: Any, function: Function, progress: Progress | None) -> Executable:
    """``backend.compile(function)``, reporting the compiler's batches as the "compile" stage
    where the backend reports progress (the CPU backend: one step per batch of generated C)."""
    if progress is None or not accepts_progress(backend):
        return backend.compile(function)
    return backend.compile(function, progress=lambda done, total: progress("compile", done, total))


def _choose_backend(backend: str | None, providers: Sequence[Any] | None) -> str:
    if backend is not None and providers is not None:
        raise GraphError("InferenceSession: give backend= or providers=, not both")
    if providers is None:
        return default_backend() if backend is None else backend.upper()
    if isinstance(providers, str):
        raise GraphError(f"InferenceSession: providers must be a list, got the str {providers!r}")
    for provider in providers:
        if not isinstance(provider, str) or provider not in PROVIDERS:
            raise GraphError(
                f"InferenceSession: unsupported provider {provider!r}; supported: "
                f"{', '.join(PROVIDERS)} (provider options are not supported)"
            )
        name = PROVIDERS[provider]
        if name == "CPU":
            return default_backend()
        if name in backends():
            return name
    raise GraphError(
        f"InferenceSession: none of the providers {list(providers)} is available here; "
        f"backends: {', '.join(backends())}"
    )


def _describe(model: Any, proto: Any) -> str:
    if isinstance(model, str | os.PathLike):
        return os.fspath(model)
    return f"ONNX model {proto.graph.name or '<unnamed>'!r}"


def _node_arg(info: Any, role: str) -> NodeArg:
    kind = info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise ConversionError(
            f"{role} {info.name!r}: only tensor inputs and outputs are supported, got {kind}"
        )
    tensor_type = info.type.tensor_type
    code = int(tensor_type.elem_type)
    type_name = f"tensor({ORT_TYPE_NAMES.get(code, str(code))})"
    if not tensor_type.HasField("shape"):
        return NodeArg(info.name, None, type_name)
    dims: list[Dim] = [
        int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None)
        for d in tensor_type.shape.dim
    ]
    return NodeArg(info.name, dims, type_name)


def _typed_outputs(proto: Any) -> list[Any]:
    """The graph outputs; where one declares no shape, ONNX shape inference's (onnxruntime
    infers them too), else as declared."""
    outputs = list(proto.graph.output)
    if all(o.type.tensor_type.HasField("shape") for o in outputs):
        return outputs

    try:
        inferred = onnx.shape_inference.infer_shapes(proto).graph.output
    except Exception:  # inference is a nicety here; the import checks the model itself
        return outputs
    return [
        _without_invented_dims(i) if i.name == o.name else o
        for o, i in zip(outputs, inferred, strict=False)
    ]


def _without_invented_dims(info: Any) -> Any:
    """A copy of ``info`` whose dimensions named by shape inference (``unk__0``…) are unknown,
    as onnxruntime shows them."""

    copy = onnx.ValueInfoProto()
    copy.CopyFrom(info)
    for dim in copy.type.tensor_type.shape.dim:
        if dim.dim_param.startswith("unk__"):
            dim.ClearField("dim_param")
    return copy


def _graph_inputs(graph: Any) -> list[_Input]:
    initializers = {t.name for t in graph.initializer}
    inputs = []
    for info in graph.input:
        if info.name in initializers:
            continue
        arg = _node_arg(info, "graph input")
        element_type = from_onnx(info.type.tensor_type.elem_type, f"graph input {info.name!r}")
        inputs.append(_Input(arg, element_type))
    return inputs


def _has_symbols(inputs: Sequence[_Input]) -> bool:
    """True when some input has a symbolic or unknown dimension of a known rank."""
    return any(
        i.arg.shape is not None and any(not isinstance(d, int) for d in i.arg.shape) for i in inputs
    )


def _has_integer_inputs(inputs: Sequence[_Input]) -> bool:
    """True when some input is an integer tensor (it may feed a shape, axes or a count)."""
    return any(i.element_type.is_integral and not i.element_type.is_boolean for i in inputs)


def _check_symbols(inputs: Sequence[_Input], arrays: Mapping[str, np.ndarray], where: str) -> None:
    """Each symbolic dimension has one size across the inputs."""
    seen: dict[str, tuple[int, str, int]] = {}
    for i in inputs:
        for axis, dim in enumerate(i.arg.shape or ()):
            if not isinstance(dim, str):
                continue
            size = int(arrays[i.name].shape[axis])
            first = seen.setdefault(dim, (size, i.name, axis))
            if first[0] != size:
                raise GraphError(
                    f"{where}: symbolic dimension {dim!r} is {first[0]} in input {first[1]!r} "
                    f"(axis {first[2]}) but {size} in input {i.name!r} (axis {axis})"
                )


def _key(
    inputs: Sequence[_Input],
    shapes: Mapping[str, tuple[int, ...]],
    constants: Mapping[str, np.ndarray],
) -> tuple[Any, ...]:
    values = tuple(
        (name, constants[name].tobytes()) for name in sorted(constants)
    )  # shapes are in the first part
    return (tuple(tuple(shapes[i.name]) for i in inputs), values)
