"""The CPU Executable of a Function with symbolic dimensions: one native module serves every
binding of the symbols (``docs/dynamic-shapes.md``, "Backends").

The generated C reads each symbol's value and each arena buffer's byte offset from the pointer
table ``T`` (after the constants, arguments and results: :class:`SymbolSlots`), so a call only
fills those entries. What a new binding costs is Python work done once and cached (the last
``PLANS`` bindings): checking that every symbolic view stays inside its buffer at the
binding (``fused/reach.py``; when one does not, a type check deferred on symbols fails, and
the type rules are re-run to word the ``CallTypeError``, raised before anything is written)
and planning the arena for the binding's sizes
(:func:`~opgraph.backends.fused.memory.place`: first fit over lifetimes computed once). No
binding runs the C compiler or the lowering and fusion pipeline again.

Fallback steps run their reference kernels on the binding's shapes: the callback reads the
symbol values from ``T``, so concurrent calls at different bindings never share state.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opgraph.backends.cpu.codegen.module import GeneratedModule, SymbolSlots, table_slots
from opgraph.backends.cpu.compiler import CompiledModule
from opgraph.backends.cpu.executable import native_error
from opgraph.backends.cpu.native import ArenaPool, FallbackRunner, address
from opgraph.backends.fused.memory import MemoryPlan, place
from opgraph.backends.fused.pipeline import SymbolicProgram
from opgraph.backends.fused.program import Buffer, BufferKind, FallbackStep
from opgraph.backends.fused.reach import Reach, first_outside, symbolic_reaches
from opgraph.backends.fused.views import Literal, Operand
from opgraph.backends.interpreter.backend import InterpreterBackend
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.dim import Dim, Symbol, evaluate, free_symbols
from opgraph.core.errors import CallTypeError, ExecutionError, GraphError, OpgraphError, OpTypeError
from opgraph.core.function import Function
from opgraph.core.literals import Constant, parameter
from opgraph.core.node import Node
from opgraph.core.printing import format_node, value_names
from opgraph.core.tensor_type import TensorType
from opgraph.passes.specialize_shapes import (
    deferred_checks,
    specialize_op,
    specialize_shapes,
    specialize_type,
)
from opgraph.runtime.backend import Executable
from opgraph.runtime.binding import Binding
from opgraph.runtime.cache import LruCache
from opgraph.runtime.tensor import Tensor

#: Bindings whose checked memory plans are kept.
PLANS = 16
#: Arenas are made this large at most from the start: the plan's peak at the largest values
#: the symbols' bounds allow, so that a new binding does not grow the arena (fresh pages cost
#: the first call that touches them). Larger (or unbounded) plans grow arenas as calls need.
PREALLOCATE_BYTES = 64 << 20
#: Runs the decompositions of fallback nodes that have no reference kernel.
INTERPRETER = InterpreterBackend()


@dataclass(frozen=True)
class BoundPlan:
    """What one binding needs at every call: the values for ``T``'s symbol and offset slots,
    the arena size, and the result types."""

    values: tuple[int, ...]
    peak: int
    plan: MemoryPlan
    result_types: tuple[TensorType, ...]


def symbol_names(program: SymbolicProgram) -> list[str]:
    """The symbols the Function's parameters bind, in a fixed order (their slots in ``T``)."""
    found = free_symbols(d for p in program.lowered.parameter_types for d in p.shape)
    return sorted(s.name for s in found)


def arena_buffers(program: SymbolicProgram) -> list[int]:
    """The arena buffers some step writes (each gets an offset slot in ``T``)."""
    return sorted(program.lifetimes.sizes)


class SymbolicCpuExecutable(Executable):
    """A symbolic Function compiled to one native module (see the module docstring)."""

    def __init__(
        self,
        function: Function,
        symbolic: SymbolicProgram,
        slots: SymbolSlots,
        generated: GeneratedModule,
        compiled: CompiledModule,
        profile: bool,
    ) -> None:
        super().__init__(function, profile)
        assert self.binder is not None
        self.lowered = symbolic.lowered
        self.program = symbolic.program
        self.symbolic = symbolic
        self.slots = slots
        self.generated = generated
        self.compiled = compiled
        names = value_names(self.lowered)
        self._describe = lambda node: format_node(node, names)
        buffer_slots = table_slots(self.program)
        constants = [b for b in self.program.buffers if b.kind is BufferKind.CONST]
        self._constants = [b.data for b in constants]  # keeps them alive
        pointers = [address(c) if c is not None else 0 for c in self._constants]
        self._io_slice = slice(len(constants), len(buffer_slots))
        self._bound_slice = slice(len(buffer_slots), len(buffer_slots) + slots.size)
        arena = _largest_arena(symbolic, self.binder.symbols.values())
        self._pool = ArenaPool(arena, len(buffer_slots) + slots.size, pointers)
        self._fallbacks = SymbolicFallbackRunner(self.program, buffer_slots, slots, self._describe)
        entry = compiled.library.og_run
        entry.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        entry.restype = ctypes.c_int
        self._entry = entry
        self._callback = ctypes.cast(self._fallbacks.callback, ctypes.c_void_p).value
        self._reaches = symbolic_reaches(self.program)
        self._deferred = deferred_checks(function)  # what the type rules left to each binding
        self._plans: LruCache[tuple[tuple[str, int], ...], BoundPlan] = LruCache(PLANS)

    # ------------------------------------------------------------------- bindings
    def bound_plan(self, binding: Mapping[str, int]) -> BoundPlan:
        """The checked plan of ``binding`` (made once, then cached).

        Raises:
            CallTypeError: a type rule rejects the binding (a slice past a symbolic axis…).
        """
        return self._plans.get_or_make(
            tuple(sorted(binding.items())), lambda: self._make_plan(dict(binding))
        )

    def _make_plan(self, binding: Binding) -> BoundPlan:
        failed = next((c for c in self._deferred if not c.holds(binding)), None)
        outside = first_outside(self._reaches, binding) if failed is None else None
        if failed is not None or outside is not None:
            raise self._rejected(binding, outside)
        live = self.symbolic.lifetimes
        sizes = {b: _value(n, binding) for b, n in live.sizes.items()}
        plan = place(self.program, live, sizes)
        values = [binding[s] for s in self.slots.symbols]
        values += [plan.offsets.get(b, 0) for b in self.slots.offsets]
        assert self.binder is not None
        _, result_types = self.binder.types(binding)
        return BoundPlan(tuple(values), plan.peak, plan, result_types)

    def _rejected(self, binding: Binding, outside: Reach | None) -> CallTypeError:
        """The error for a binding that fails a deferred size check or makes ``outside``
        leave its buffer; the type rules (re-run only now) say which check."""
        try:
            specialize_shapes(self.function, binding)
        except OpTypeError as error:  # worded as INTERPRETER words it
            return CallTypeError(str(error))
        values = ", ".join(f"{k}={v}" for k, v in sorted(binding.items()))
        where = "a step" if outside is None else outside.step.label
        return CallTypeError(
            f"{self.function.name}: with {values}, {where} would access elements outside its "
            "buffer or at sizes its type rule rejects (a size check the type rules deferred "
            "fails)"
        )

    def memory_plan(self, binding: Mapping[str, int] | None = None) -> MemoryPlan:
        """The arena layout for ``binding`` (symbol name -> value); ``.peak`` is the arena
        size in bytes.

        Raises:
            GraphError: no binding given (a symbolic Function's plan depends on it).
        """
        if binding is None:
            raise GraphError(
                f"{self.function.name} has symbolic dimensions: memory_plan needs a binding, "
                "e.g. exe.memory_plan({'batch': 8})"
            )
        return self.bound_plan(binding).plan

    # --------------------------------------------------------------------- calling
    def _run(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        assert self.binder is not None
        plan = self.bound_plan(self.binder.bind([t.shape for t in inputs], "input"))
        self._invoke([address(t.buffer) for t in (*inputs, *outputs)], plan)

    def call_unchecked(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """Run without validating the tensors (the binding is still taken from the input
        shapes and checked): wrong result shapes or aliasing are undefined behavior. For
        callers that validated once and call in a loop."""
        self._run(outputs, inputs)

    def _call_arrays(self, *arrays: Any) -> list[np.ndarray]:
        """Numpy arrays in, fresh numpy arrays out (the binding from the array shapes)."""
        assert self.binder is not None
        fast = len(arrays) == len(self.parameter_types) and all(
            a.__class__ is np.ndarray and a.dtype == t.element_type.dtype and a.flags.c_contiguous
            for a, t in zip(arrays, self.parameter_types, strict=True)
        )
        if not fast:
            return super()._call_arrays(*arrays)
        plan = self.bound_plan(self.binder.bind([a.shape for a in arrays]))
        results = [np.empty(t.shape, t.element_type.dtype) for t in plan.result_types]
        pointers = [address(a) for a in arrays]
        pointers += [r.__array_interface__["data"][0] for r in results]
        self._invoke(pointers, plan)
        return results

    def _invoke(self, pointers: list[int], plan: BoundPlan) -> None:
        pool = self._pool
        slot = pool.take_at_least(plan.peak)
        table, arena, _ = slot
        table[self._io_slice] = pointers
        table[self._bound_slice] = plan.values
        if self.profile:
            times = (ctypes.c_double * max(len(self.program.steps), 1))()
            code = self._entry(table, arena, self._callback, times)
            for i, step in enumerate(self.program.steps):
                self._record(f"{i}: {step.label}", float(times[i]))
        else:
            code = self._entry(table, arena, self._callback, None)
        pool.give(slot)
        if code:
            raise self._error(code)

    def _error(self, code: int) -> BaseException:
        return native_error(code, self._fallbacks, self.generated, self._describe)

    # ---------------------------------------------------------------- introspection
    def fallback_ops(self) -> list[str]:
        """Names of the ops this Executable runs through reference kernels (sorted): ops
        without a native lowering, and step ops (GEMM, convolution…) without a symbolic one."""
        return sorted(
            {s.node.op.name for s in self.program.steps if isinstance(s, FallbackStep) and s.node}
        )

    def source(self) -> str:
        """The generated C source."""
        return self.generated.source


class SymbolicFallbackRunner(FallbackRunner):
    """Runs fallback steps of a symbolic program: the binding and the arena offsets come from
    the call's table, shapes, strides and offsets are evaluated under it."""

    def __init__(
        self, program: Any, slots: dict[int, int], symbolic: SymbolSlots, names: Any
    ) -> None:
        super().__init__(program, {}, slots, names)
        self.symbolic = symbolic
        self.lock = threading.Lock()
        self.decompositions: dict[tuple[Node, tuple[tuple[str, int], ...]], Executable] = {}

    def read_binding(self, table: int) -> Binding:
        pointers = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
        return {s: int(pointers[k] or 0) for s, k in self.symbolic.symbols.items()}

    def run(self, step: FallbackStep, table: int, arena: int) -> None:
        node = step.node
        assert node is not None
        binding = self.read_binding(table)
        try:
            op = node.op if isinstance(node.op, Constant) else specialize_op(node.op, binding)
            args = [self.bound_array(x, binding, table, arena) for x in step.inputs]
            with np.errstate(all="ignore"):
                if isinstance(op, Constant):
                    raw = op.value
                elif type(op) in KERNELS:
                    raw = KERNELS[type(op)](op, *args)
                else:  # no kernel: its decomposition, built for these sizes (kept per binding)
                    raw = self.decomposed(node, binding, args)
            results = list(raw) if isinstance(raw, tuple | list) else [raw]
            for i, (out, result) in enumerate(zip(step.outputs, results, strict=True)):
                expected = specialize_type(node.output_types[i], binding)
                assert isinstance(expected, TensorType)
                result = np.asarray(result)
                if result.dtype != expected.element_type.dtype or result.shape != expected.shape:
                    raise ExecutionError(
                        f"kernel output {i} is {result.dtype}{list(result.shape)}, the type "
                        f"rule says {expected} (a kernel bug)"
                    )
                np.copyto(self.bound_array(out, binding, table, arena), result)
        except (OpgraphError, ArithmeticError, ValueError, TypeError, IndexError) as error:
            raise ExecutionError(
                f"while executing {self.describe(node)} (built at {node.provenance}): {error}"
            ) from error

    def decomposed(self, node: Node, binding: Binding, args: list[np.ndarray]) -> Any:
        """Run ``node`` at ``binding`` through its decomposition on INTERPRETER (built once
        per binding: a symbolic op whose decomposition needs concrete sizes)."""
        key = (node, tuple(sorted(binding.items())))
        with self.lock:
            exe = self.decompositions.get(key)
        if exe is None:
            params = [
                parameter(x.element_type, tuple(_value(d, binding) for d in x.shape))
                for x in node.inputs
            ]
            built = specialize_op(node.op, binding)(*params)
            outputs = list(built) if isinstance(built, tuple | list) else [built]
            exe = INTERPRETER.compile(Function(outputs, params, name=node.op.name))
            with self.lock:
                self.decompositions[key] = exe
                while len(self.decompositions) > PLANS:
                    self.decompositions.pop(next(iter(self.decompositions)))
        return exe(*args)

    def bound_array(self, x: Operand, binding: Binding, table: int, arena: int) -> np.ndarray:
        shape = tuple(_value(d, binding) for d in x.shape)
        if isinstance(x, Literal):
            return np.full(shape, x.value, x.element_type.dtype)
        buffer = self.program.buffers[x.buffer]
        nbytes = _value(buffer.nbytes, binding)
        dtype = x.element_type.dtype
        if nbytes == 0 or 0 in shape:
            return np.zeros(shape, dtype)
        raw = (ctypes.c_char * nbytes).from_address(self.bound_base(buffer, table, arena))
        flat = np.frombuffer(raw, dtype=dtype)  # type: ignore[call-overload]
        strides = tuple(_value(s, binding) * dtype.itemsize for s in x.strides)
        return np.lib.stride_tricks.as_strided(flat[_value(x.offset, binding) :], shape, strides)

    def bound_base(self, buffer: Buffer, table: int, arena: int) -> int:
        pointers = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
        if buffer.kind is BufferKind.ARENA:
            return arena + int(pointers[self.symbolic.offsets[buffer.id]] or 0)
        return int(pointers[self.slots[buffer.id]] or 0)


def _value(d: Dim, binding: Mapping[str, int]) -> int:
    value = evaluate(d, binding)
    assert isinstance(value, int), f"{d} has a symbol outside the binding {dict(binding)}"
    return value


def _largest_arena(symbolic: SymbolicProgram, symbols: Iterable[Symbol]) -> int:
    """The arena peak at every symbol's upper bound when all have one and it is at most
    ``PREALLOCATE_BYTES``, else 0 (arenas then grow per call)."""
    binding = {s.name: s.max for s in symbols}
    if any(v is None for v in binding.values()):
        return 0
    bound: Binding = {k: v for k, v in binding.items() if v is not None}
    live = symbolic.lifetimes
    sizes = {b: _value(n, bound) for b, n in live.sizes.items()}
    peak = place(symbolic.program, live, sizes).peak
    return peak if peak <= PREALLOCATE_BYTES else 0
