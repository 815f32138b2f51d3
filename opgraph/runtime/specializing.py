"""One Executable for a symbolic Function on a backend whose kernels need static sizes: each
new binding of the symbols compiles ``og.passes.specialize_shapes(function, binding)`` with
the backend's static compile, and the last ``cache_size`` bindings' Executables are kept.

Used by the GPU backend (its CUDA kernels take sizes as compile-time constants, so a new
binding re-runs its code generation: ``docs/gpu.md``) and by the PyTorch bridge for backends
that refuse symbolic Functions. The call checks are those of every Executable: the binding
from the input shapes (``CallTypeError`` naming the symbol, before anything is written) and
the result tensors against the bound result types.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from opgraph.core.errors import GraphError
from opgraph.core.function import Function
from opgraph.passes.specialize_shapes import specialize_shapes
from opgraph.runtime.backend import Backend, Executable, PerformanceCounter, shape_of
from opgraph.runtime.binding import Binding
from opgraph.runtime.cache import LruCache
from opgraph.runtime.tensor import Tensor

#: Bindings whose specialised Executables are kept.
CACHE_SIZE = 16

#: Compiles one static Function (a backend's ``compile`` with the caller's options).
StaticCompiler = Callable[[Function], Executable]


class SpecializingExecutable(Executable):
    """A symbolic Function compiled once per binding behind a cache (see the module doc).

    Args:
        backend: compiles each specialised Function (``backend.compile(fn, profile=...)``).
        function: the symbolic Function.
        cache_size: how many bindings' Executables are kept (least recently used dropped).
        profile: compile the specialised Functions with ``profile=True``.
        compile_static: overrides how a specialised Function is compiled.
    """

    def __init__(
        self,
        backend: Backend,
        function: Function,
        cache_size: int = CACHE_SIZE,
        profile: bool = False,
        compile_static: StaticCompiler | None = None,
    ) -> None:
        super().__init__(function, profile)
        assert self.binder is not None, "a SpecializingExecutable needs a symbolic Function"
        self.backend = backend
        self.cache_size = cache_size
        self._compile: StaticCompiler = compile_static or (
            lambda fn: backend.compile(fn, profile=profile)
        )
        self._cache: LruCache[tuple[tuple[str, int], ...], Executable] = LruCache(cache_size)
        self._count_lock = threading.Lock()
        #: How many specialised compiles ran (a new binding, or one dropped from the cache).
        self.compiles = 0

    def specialised(self, binding: Binding) -> Executable:
        """The static Executable for ``binding`` (compiled on the first call with it)."""
        return self._cache.get_or_make(
            tuple(sorted(binding.items())), lambda: self._specialise(binding)
        )

    def _specialise(self, binding: Binding) -> Executable:
        exe = self._compile(specialize_shapes(self.function, binding))
        with self._count_lock:
            self.compiles += 1
        return exe

    def bindings(self) -> list[Binding]:
        """The cached bindings, least recently used first."""
        return [dict(k) for k in self._cache]

    def call(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """As :meth:`Executable.call`: the binding is taken and checked first
        (``CallTypeError`` naming the symbol), then the specialisation's own ``call``
        validates the tensors for its target (device tensors on GPU) before writing."""
        self.bound_types(outputs, inputs)  # counts, tensor kinds, the binding
        self._run(outputs, inputs)

    def _run(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        assert self.binder is not None
        binding = self.binder.bind([t.shape for t in inputs], "input")
        self.specialised(binding).call(outputs, inputs)

    def _call_arrays(self, *arrays: Any) -> list[np.ndarray]:
        assert self.binder is not None
        if len(arrays) != len(self.parameter_types):
            return super()._call_arrays(*arrays)  # words the count error
        binding = self.binder.bind([shape_of(a, i) for i, a in enumerate(arrays)])
        return self.specialised(binding)._call_arrays(*arrays)

    def performance_counters(self) -> list[PerformanceCounter]:
        """Per-node times summed over the cached specialisations (compile with
        ``profile=True``)."""
        super().performance_counters()  # raises without profile=True
        cached = self._cache.values()
        totals: dict[str, tuple[float, int]] = {}
        for exe in cached:
            for c in exe.performance_counters():
                seconds, calls = totals.get(c.node, (0.0, 0))
                totals[c.node] = (seconds + c.total_seconds, calls + c.calls)
        return [PerformanceCounter(k, s, n) for k, (s, n) in totals.items()]

    def fallback_ops(self) -> list[str]:
        """The fallback ops of every cached specialisation (sorted)."""
        cached = self._cache.values()
        found: set[str] = set()
        for exe in cached:
            found.update(getattr(exe, "fallback_ops", list)())
        return sorted(found)

    def memory_plan(self, binding: Binding | None = None) -> Any:
        """The memory plan of ``binding``'s specialisation (compiled if not cached).

        Raises:
            GraphError: no binding given (the plan depends on it).
        """
        if binding is None:
            raise GraphError(
                f"{self.function.name} has symbolic dimensions: memory_plan needs a binding, "
                "e.g. exe.memory_plan({'batch': 8})"
            )
        return self.specialised(dict(binding)).memory_plan()  # type: ignore[attr-defined]

    def source(self, binding: Binding | None = None) -> str:
        """The generated source of ``binding``'s specialisation (default: the most recently
        used one; "" when none was compiled yet)."""
        if binding is not None:
            return str(self.specialised(dict(binding)).source())  # type: ignore[attr-defined]
        last = next(reversed(self._cache.values()), None)
        return "" if last is None else str(getattr(last, "source", str)())
