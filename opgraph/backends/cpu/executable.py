"""The CPU Executable: one native call per run.

The call path is short: check the tensors against the parameter and result types (same rules
and messages as ``runtime.validation``, which it defers to on any violation), look up cached
buffer addresses, take an arena from the pool, call ``og_run`` once (without the GIL), give
the arena back. Concurrent calls each take their own arena from the pool, so an Executable
is safe to call from several threads at once.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen.context import Check
from opgraph.backends.cpu.codegen.module import GeneratedModule, table_slots
from opgraph.backends.cpu.compiler import CompiledModule
from opgraph.backends.cpu.native import ArenaPool, FallbackRunner, address
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.backends.fused.program import BufferKind, FallbackStep, Program
from opgraph.core.errors import ExecutionError
from opgraph.core.function import Function
from opgraph.core.printing import format_node, value_names
from opgraph.runtime.backend import Executable
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import PAIRWISE_LIMIT, overlapping_pair, validate_call


class CpuExecutable(Executable):
    """A Function compiled to one native module (see the module docstring)."""

    def __init__(
        self,
        function: Function,
        lowered: Function,
        program: Program,
        plan: MemoryPlan,
        generated: GeneratedModule,
        compiled: CompiledModule,
        profile: bool,
    ) -> None:
        super().__init__(function, profile)
        self.lowered = lowered
        self.program = program
        self.plan = plan
        self.generated = generated
        self.compiled = compiled
        names = value_names(lowered)
        self._describe = lambda node: format_node(node, names)
        slots = table_slots(program)
        constants = [b for b in program.buffers if b.kind is BufferKind.CONST]
        self._constants = [b.data for b in constants]  # keeps them alive
        pointers = [address(c) if c is not None else 0 for c in self._constants]
        self._io_slice = slice(len(constants), len(slots))
        self._pool = ArenaPool(plan.peak, len(slots), pointers)
        self._fallbacks = FallbackRunner(program, plan.offsets, slots, self._describe)
        # A function pointer of its own (the library's attribute is shared with other
        # Executables of the module), without argtypes: every argument is passed as a ctypes
        # pointer object (the table array, c_void_p, None), which needs no conversion: 0.1 µs
        # less per call than converting integers through argtypes.
        entry = compiled.library["og_run"]
        entry.restype = ctypes.c_int
        self._entry = entry
        self._callback = ctypes.c_void_p(
            ctypes.cast(self._fallbacks.callback, ctypes.c_void_p).value
        )
        self._in_types = [(t.element_type, t.shape) for t in self.parameter_types]
        self._out_types = [(t.element_type, t.shape) for t in self.result_types]
        types = (*self.parameter_types, *self.result_types)
        self._sizes = [t.nbytes for t in types]
        self._expected = [(t.element_type, t.shape) for t in types]
        self._num_in, self._num_out = len(self.parameter_types), len(self.result_types)
        self._has_empty = 0 in self._sizes
        self._seen_types: list[object] = [None] * len(types)
        self._last_buffers: list[tuple[Any, int]] = [(_dead, 0)] * len(types)

    # --------------------------------------------------------------------- calling
    def call(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """Run: read ``inputs``, write ``outputs`` (validated as ``Executable.call`` does)."""
        pointers = self._checked_pointers(outputs, inputs)
        if pointers is None:  # some rule is broken: the shared validation says which
            validate_call(
                outputs, inputs, self.result_types, self.parameter_types, self.function.name
            )
            pointers = [address(t.buffer) for t in (*inputs, *outputs)]
        self._invoke(pointers)

    def call_unchecked(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """Run without any validation: wrong types, shapes or aliasing are undefined behavior.
        For callers that validated once and call in a loop."""
        self._invoke([address(t.buffer) for t in (*inputs, *outputs)])

    def call_addresses(self, addresses: list[int]) -> None:
        """Run on raw buffer addresses: the inputs', then the outputs', in parameter and
        result order. Nothing is validated: each address must hold a C-contiguous buffer of its
        value's type and shape, and no output may overlap another buffer (undefined behavior
        otherwise). For bridges whose own tensors carry that guarantee (the PyTorch bridge
        checks each tensor's dtype, shape and layout and allocates the results itself)."""
        self._invoke(addresses)

    def _call_arrays(self, *arrays: Any) -> list[np.ndarray]:
        """Numpy arrays in, a list of numpy arrays out (fresh results, no aliasing to check)."""
        if len(arrays) != len(self._in_types):
            return super()._call_arrays(*arrays)
        pointers = []
        for array, (element_type, shape) in zip(arrays, self._in_types, strict=True):
            if (
                array.__class__ is not np.ndarray
                or array.dtype != element_type.dtype
                or array.shape != shape
                or not array.flags.c_contiguous
            ):
                return super()._call_arrays(*arrays)
            pointers.append(address(array))
        results = [np.empty(shape, t.dtype) for t, shape in self._out_types]
        self._invoke(pointers + [r.__array_interface__["data"][0] for r in results])
        return results

    def _run(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        self._invoke([address(t.buffer) for t in (*inputs, *outputs)])

    def _checked_pointers(
        self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]
    ) -> list[int] | None:
        """The buffer addresses (inputs, then outputs), or None when a count, class, element
        type, shape or buffer is wrong or a result tensor overlaps another tensor (then
        ``validate_call`` says which).

        Per argument position, the last TensorType object that passed and the last buffer's
        address (through a weak reference) are remembered, so calling again with the same
        tensors costs a few identity tests. A tensor's array is its own view, which cannot be
        resized, so its address never changes; its dtype, shape, strides and writeable flag
        can change in place, so they are checked on every call. C-contiguous buffers: address
        ranges decide overlap exactly, as ``np.may_share_memory`` does."""
        if inputs.__class__ not in _SEQUENCES or outputs.__class__ not in _SEQUENCES:
            return None
        if len(inputs) != self._num_in or len(outputs) != self._num_out:
            return None
        tensors = (*inputs, *outputs)
        pointers: list[int] = []
        seen, last, expected, sizes = (
            self._seen_types,
            self._last_buffers,
            self._expected,
            self._sizes,
        )
        num_in, ndarray = self._num_in, np.ndarray
        for i, tensor in enumerate(tensors):
            if tensor.__class__ is not Tensor:
                return None
            t = tensor.type
            element_type, shape = expected[i]
            if t is not seen[i]:
                if t.element_type is not element_type or t.shape != shape:
                    return None
                seen[i] = t
            buffer = tensor._buffer
            if buffer.__class__ is not ndarray:
                return None
            dtype = buffer.dtype
            if (dtype is not element_type.dtype and dtype != element_type.dtype) or (
                buffer.shape != shape
            ):  # with the dtype, the shape fixes the byte size
                return None
            flags = buffer.flags
            if not (flags.carray if i >= num_in else flags.c_contiguous):  # carray: writeable
                return None
            ref, pointer = last[i]
            if ref() is not buffer:
                pointer = address(buffer)
                last[i] = (weakref.ref(buffer), pointer)
            pointers.append(pointer)
        if self._has_empty:  # empty buffers overlap nothing; the same tensor twice still counts
            out_ids = {id(t) for t in outputs}
            if len(out_ids) != len(outputs) or any(id(t) in out_ids for t in inputs):
                return None
        if len(tensors) > PAIRWISE_LIMIT:
            if overlapping_pair(list(zip(pointers, sizes, strict=True)), num_in) is not None:
                return None
            return pointers
        for i in range(num_in, len(tensors)):
            p, n = pointers[i], sizes[i]
            for j in range(i):
                q, m = pointers[j], sizes[j]
                if n and m and p < q + m and q < p + n:
                    return None
        return pointers

    def _invoke(self, pointers: list[int]) -> None:
        pool = self._pool
        slot = pool.take()
        table, arena, _ = slot
        table[self._io_slice] = pointers
        if self.profile:
            times = (ctypes.c_double * max(len(self.program.steps), 1))()
            code = self._entry(table, arena, self._callback, times)
            self._record_steps(times)
        else:
            code = self._entry(table, arena, self._callback, None)
        pool.give(slot)
        if code:
            raise self._error(code)

    def _record_steps(self, times: Any) -> None:
        for i, step in enumerate(self.program.steps):
            self._record(f"{i}: {step.label}", float(times[i]))

    def _error(self, code: int) -> BaseException:
        return native_error(code, self._fallbacks, self.generated, self._describe)

    # ---------------------------------------------------------------- introspection
    def fallback_ops(self) -> list[str]:
        """Names of the ops this Executable runs through reference kernels (sorted)."""
        return sorted(
            {s.node.op.name for s in self.program.steps if isinstance(s, FallbackStep) and s.node}
        )

    def memory_plan(self) -> MemoryPlan:
        """The arena layout; ``.peak`` is the arena size in bytes."""
        return self.plan

    def source(self) -> str:
        """The generated C source."""
        return self.generated.source


_SEQUENCES = (list, tuple)


def _dead() -> None:
    """A weak reference that never matches a buffer."""
    return None


def native_error(
    code: int, fallbacks: FallbackRunner, generated: GeneratedModule, describe: Any
) -> BaseException:
    """The error for a non-zero ``og_run`` code: a fallback's exception (code < 0), else the
    failed run-time check ``(step << 8) | (bit + 1)`` named by its node."""
    if code < 0:
        return fallbacks.take_error()
    step, bit = code >> 8, (code & 0xFF) - 1
    check: Check = generated.checks[step][bit]
    node = check.node
    where = f"{describe(node)} (built at {node.provenance})" if node else "a copy"
    return ExecutionError(f"while executing {where}: {check.message}")
