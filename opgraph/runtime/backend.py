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
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import validate_call


@dataclass(frozen=True, slots=True)
class PerformanceCounter:
    """Time spent in one node over all profiled calls."""

    node: str
    total_seconds: float
    calls: int

    @property
    def average_seconds(self) -> float:
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

    def call(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """Run: read ``inputs``, write ``outputs`` (outputs first, as in nGraph).

        Raises:
            GraphError / CallTypeError: wrong counts, shapes or element types.
            AliasingError: two outputs share memory, or an output shares memory with an input.
        """
        validate_call(outputs, inputs, self.result_types, self.parameter_types, self.function.name)
        self._run(outputs, inputs)

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
        inputs = [
            _as_tensor(a, t, i)
            for i, (a, t) in enumerate(zip(arrays, self.parameter_types, strict=True))
        ]
        outputs = [Tensor(t.element_type, t.shape) for t in self.result_types]
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


def _as_tensor(array: Any, t: TensorType, index: int) -> Tensor:
    if isinstance(array, Mapping):
        raise GraphError(
            f"argument {index} is a mapping; pass a mapping of arguments by name as the only "
            "argument (exe({'x': x})), or arrays positionally, or exe(x=...)"
        )
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


_BACKENDS: dict[str, Callable[[], Backend]] = {}
_UNAVAILABLE: dict[str, Callable[[], str]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Register a backend factory under ``name`` (case-insensitive; duplicates refused)."""
    key = name.upper()
    if key in _BACKENDS:
        raise RegistryError(f"backend {key} is already registered")
    _BACKENDS[key] = factory


def register_unavailable(name: str, reason: Callable[[], str]) -> None:
    """Name a built-in backend that cannot run on this machine, with why (e.g. no GPU), so
    ``og.backend(name)`` explains instead of saying the name is unknown."""
    _UNAVAILABLE[name.upper()] = reason


def backends() -> list[str]:
    """Names of the registered backends."""
    return sorted(_BACKENDS)


def backend(name: str) -> Backend:
    """The backend called ``name`` ("INTERPRETER", "CPU", …)."""
    try:
        factory = _BACKENDS[name.upper()]
    except KeyError:
        why = _UNAVAILABLE.get(name.upper())
        if why is not None:
            raise RegistryError(f"backend {name.upper()} is unavailable here: {why()}") from None
        raise RegistryError(
            f"unknown backend {name!r}; registered backends: {', '.join(backends()) or 'none'}"
        ) from None
    return factory()
