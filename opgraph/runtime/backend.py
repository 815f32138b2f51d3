"""Backend and Executable protocols and the backend registry."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opgraph.core.errors import CallTypeError, GraphError, RegistryError
from opgraph.core.function import Function
from opgraph.core.tensor_type import TensorType
from opgraph.runtime.arguments import bind_arguments
from opgraph.runtime.binding import Binding, ShapeBinder, node_symbols
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import check_lists, validate_call

#: A progress callback: ``progress(done, total)`` as long work (a C compile) advances.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class PerformanceCounter:
    """Time spent in one node over all profiled calls."""

    node: str
    total_seconds: float
    calls: int

    @property
    def average_seconds(self) -> float:
        """Mean time per call (0 when never called)."""
        return self.total_seconds / self.calls if self.calls else 0.0


class Executable(ABC):
    """A compiled Function. Reusable, and safe to call from several threads at once."""

    def __init__(self, function: Function, profile: bool = False) -> None:
        self.function = function
        self.parameter_types: tuple[TensorType, ...] = function.parameter_types
        self.result_types: tuple[TensorType, ...] = function.flat_result_types
        self.profile = profile
        self._counters: dict[str, list[float]] = {}
        self._counter_lock = threading.Lock()
        #: Binds the symbols of a symbolic Function per call (None when it is static).
        self.binder = ShapeBinder.create(
            self.parameter_types,
            self.result_types,
            function.name,
            node_symbols(function).values(),
        )

    def call(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """Run: read ``inputs``, write ``outputs`` (outputs first, as in nGraph).

        A symbolic Function binds its symbols from the input tensors' shapes; the result
        tensors must have the shapes the binding gives.

        Raises:
            GraphError / CallTypeError: wrong counts, shapes or element types; inconsistent
                symbol bindings or a value outside a symbol's bounds (CallTypeError).
            AliasingError: two outputs share memory, or an output shares memory with an input.
        """
        if self.binder is None:
            parameter_types, result_types = self.parameter_types, self.result_types
        else:
            parameter_types, result_types = self.bound_types(outputs, inputs)
        validate_call(outputs, inputs, result_types, parameter_types, self.function.name)
        self._run(outputs, inputs)

    def bound_types(
        self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]
    ) -> tuple[tuple[TensorType, ...], tuple[TensorType, ...]]:
        """Parameter and result types for the binding the input tensors give."""
        assert self.binder is not None
        check_lists(outputs, inputs, self.function.name)
        for i, tensor in enumerate(inputs):
            if not isinstance(tensor, Tensor):
                raise CallTypeError(
                    f"{self.function.name}: input {i} must be a Tensor from "
                    f"backend.create_tensor, got {type(tensor).__name__}"
                )
        return self.binder.types(self.binder.bind([t.shape for t in inputs], "input"))

    def bind(self, shapes: Sequence[tuple[int, ...]]) -> Binding:
        """The symbol values argument ``shapes`` give ({} for a static Function)."""
        return {} if self.binder is None else self.binder.bind(shapes)

    def __call__(self, /, *arrays: Any, **named: Any) -> list[np.ndarray]:
        """Convenience: numpy arrays in, a list of numpy arrays out.

        Arguments go positionally (``exe(x, y)``), by parameter name (``exe(x=a, y=b)``), or
        as one mapping of names to arrays (``exe({"x": a, "y": b})``, as onnxruntime takes
        them); positional arguments fill the first parameters and names the rest.

        Raises:
            GraphError: a wrong count, an unknown, duplicate or missing name, or a wrong shape.
            CallTypeError: an array's dtype differs from its parameter's element type.
        """
        if named or (len(arrays) == 1 and isinstance(arrays[0], Mapping)):
            names = [p.node.name for p in self.function.parameters]
            arrays = tuple(bind_arguments(names, arrays, named, self.function.name))
        return self._call_arrays(*arrays)

    def _call_arrays(self, *arrays: Any) -> list[np.ndarray]:
        """Numpy arrays in parameter order in, numpy arrays out (backends override this for a
        faster path)."""
        if len(arrays) != len(self.parameter_types):
            raise GraphError(
                f"{self.function.name}: expected {len(self.parameter_types)} argument(s), "
                f"got {len(arrays)}"
            )
        parameter_types, result_types = self.parameter_types, self.result_types
        if self.binder is not None:
            shapes = [shape_of(a, i) for i, a in enumerate(arrays)]
            parameter_types, result_types = self.binder.types(self.binder.bind(shapes))
        inputs = [
            _as_tensor(a, t, i)
            for i, (a, t) in enumerate(zip(arrays, parameter_types, strict=True))
        ]
        outputs = [Tensor(t.element_type, t.shape) for t in result_types]
        self.call(outputs, inputs)
        return [o.buffer for o in outputs]

    @abstractmethod
    def _run(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """Execute after validation."""

    def performance_counters(self) -> list[PerformanceCounter]:
        """Per-node time and call counts (compile with ``profile=True``)."""
        if not self.profile:
            raise GraphError("performance counters need an Executable compiled with profile=True")
        with self._counter_lock:
            return [PerformanceCounter(k, v[0], int(v[1])) for k, v in self._counters.items()]

    def _record(self, key: str, seconds: float) -> None:
        with self._counter_lock:
            entry = self._counters.setdefault(key, [0.0, 0.0])
            entry[0] += seconds
            entry[1] += 1


def shape_of(array: Any, index: int) -> tuple[int, ...]:
    """The shape of call argument ``index`` (a mapping there is a clear GraphError)."""
    _reject_mapping(array, index)
    return tuple(np.shape(array))


def _reject_mapping(array: Any, index: int) -> None:
    if isinstance(array, Mapping):
        raise GraphError(
            f"argument {index} is a mapping; pass a mapping of arguments by name as the only "
            "argument (exe({'x': x})), or arrays positionally, or exe(x=...)"
        )


def _as_tensor(array: Any, t: TensorType, index: int) -> Tensor:
    _reject_mapping(array, index)
    value = np.asarray(array)
    if value.dtype != t.element_type.dtype:
        raise CallTypeError(
            f"argument {index}: array dtype {value.dtype} does not match parameter type "
            f"{t} ({t.element_type.dtype})"
        )
    if value.shape != t.shape:
        raise GraphError(
            f"argument {index}: array shape {list(value.shape)} does not match parameter type {t}"
        )
    contiguous = value.flags.c_contiguous and value.flags.writeable
    return Tensor(t.element_type, t.shape, value if contiguous else np.array(value, order="C"))


class Backend(ABC):
    """A way to run Functions. Create one with ``og.backend(name)``."""

    name: str = "?"

    def create_tensor(
        self, element_type: Any, shape: Any, buffer: np.ndarray | None = None
    ) -> Tensor:
        """A tensor; ``buffer`` (C-contiguous, exact dtype) is wrapped zero-copy."""
        return Tensor(element_type, shape, buffer)

    @abstractmethod
    def compile(self, function: Function, profile: bool = False) -> Executable:
        """Compile ``function`` into an Executable."""

    def __repr__(self) -> str:
        return f"<Backend {self.name}>"


class BackendUnavailableError(RegistryError):
    """A known backend cannot run on this machine (no C compiler, no GPU…); the message says
    why and what to install."""


@dataclass(frozen=True, slots=True)
class BackendStatus:
    """Whether a known backend can run here, and why not.

    Attributes:
        name: the backend's name (upper case).
        available: ``og.backend(name)`` works.
        reason: why it is unavailable and what to do ("" when available).
    """

    name: str
    available: bool
    reason: str


#: A check that returns "" when its backend can run here, else why not (and how to fix it).
AvailabilityCheck = Callable[[], str]

_BACKENDS: dict[str, Callable[[], Backend]] = {}
_CHECKS: dict[str, AvailabilityCheck] = {}
_UNAVAILABLE: dict[str, AvailabilityCheck] = {}


def register_backend(
    name: str, factory: Callable[[], Backend], unavailable: AvailabilityCheck | None = None
) -> None:
    """Register a backend factory under ``name`` (case-insensitive; duplicates refused).

    Args:
        name: the backend's name.
        factory: makes the backend.
        unavailable: returns "" when the backend can run here, else why not (e.g. no C
            compiler). It is asked each time :func:`backends` or :func:`backend` is called, so
            keep it cheap (cache what it probes).
    """
    key = name.upper()
    if key in _BACKENDS:
        raise RegistryError(f"backend {key} is already registered")
    _BACKENDS[key] = factory
    if unavailable is not None:
        _CHECKS[key] = unavailable


def register_unavailable(name: str, reason: AvailabilityCheck) -> None:
    """Name a built-in backend that cannot run on this machine, with why (e.g. no GPU), so
    ``og.backend(name)`` explains instead of saying the name is unknown."""
    _UNAVAILABLE[name.upper()] = reason


def _reason(key: str) -> str:
    """Why backend ``key`` cannot run here ("" when it can)."""
    if key in _UNAVAILABLE and key not in _BACKENDS:
        return _UNAVAILABLE[key]() or "not available on this machine"
    check = _CHECKS.get(key)
    return check() if check is not None else ""


def backends() -> list[str]:
    """Names of the backends that can run here (registered, and available on this machine).

    A registered backend that cannot run (the CPU backend without a C compiler) is left out;
    :func:`backend_status` lists every known backend with the reason.
    """
    return sorted(key for key in _BACKENDS if not _reason(key))


def backend_status() -> dict[str, BackendStatus]:
    """Every known backend, available or not, by name, with why it cannot run here.

    Example:
        >>> og.backend_status()["CPU"]
        BackendStatus(name='CPU', available=True, reason='')
    """
    names = sorted(set(_BACKENDS) | set(_UNAVAILABLE))
    statuses = {}
    for key in names:
        why = _reason(key)
        statuses[key] = BackendStatus(key, not why, why)
    return statuses


def backend(name: str) -> Backend:
    """The backend called ``name`` ("INTERPRETER", "CPU", …).

    Raises:
        BackendUnavailableError: the backend is known but cannot run here (the message says
            why and what to install).
        RegistryError: no backend has this name.
    """
    key = str(name).upper()
    why = _reason(key) if key in _BACKENDS or key in _UNAVAILABLE else ""
    if why:
        raise BackendUnavailableError(f"backend {key} is unavailable here: {why}")
    try:
        factory = _BACKENDS[key]
    except KeyError:
        registered = ", ".join(sorted(_BACKENDS)) or "none"
        raise RegistryError(
            f"unknown backend {name!r}; registered backends: {registered}"
        ) from None
    return factory()


def argument_tensors(
    name: str,
    arrays: Sequence[Any],
    parameter_types: Sequence[TensorType],
    binder: ShapeBinder | None,
) -> list[Tensor]:
    """``exe(*arrays)``'s arguments as Tensors of the parameter types, bound per call when
    ``binder`` (a symbolic Function); a wrong count is a ``GraphError`` naming ``name``."""
    if len(arrays) != len(parameter_types):
        raise GraphError(f"{name}: expected {len(parameter_types)} argument(s), got {len(arrays)}")
    types = list(parameter_types)
    if binder is not None:
        shapes = [shape_of(a, i) for i, a in enumerate(arrays)]
        types = list(binder.types(binder.bind(shapes))[0])
    return [_as_tensor(a, t, i) for i, (a, t) in enumerate(zip(arrays, types, strict=True))]
