"""The Python side of a compiled module: buffer addresses, the arena pool, and the callback
that runs fallback steps on reference kernels."""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from opgraph.backends.fused.pages import HUGE_PAGE as HUGE_PAGE
from opgraph.backends.fused.pages import arena_buffer as arena_buffer
from opgraph.backends.fused.program import Buffer, BufferKind, FallbackStep, Program
from opgraph.backends.fused.views import Literal, Operand, View, static, static_all
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.errors import ExecutionError, OpgraphError
from opgraph.core.literals import Constant
from opgraph.core.tensor_type import TensorType

#: ``og_callback``: (step, T, A) -> 0, or nonzero after storing the error.
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

# Addresses of numpy buffers by id, kept while the array lives (a weakref clears the entry
# when it dies, before its id can be reused): reading ``__array_interface__`` costs ~1 µs.
_ADDRESSES: dict[int, tuple[weakref.ref[np.ndarray], int]] = {}


def address(array: np.ndarray) -> int:
    """The address of ``array``'s first element (cached per array object)."""
    key = id(array)
    entry = _ADDRESSES.get(key)
    if entry is not None and entry[0]() is array:
        return entry[1]
    pointer: int = array.__array_interface__["data"][0]
    _ADDRESSES[key] = (weakref.ref(array, _forget(key)), pointer)
    return pointer


def _forget(key: int) -> Callable[[weakref.ref[np.ndarray]], None]:
    def forget(_: weakref.ref[np.ndarray]) -> None:
        _ADDRESSES.pop(key, None)

    return forget


Slot = tuple[Any, ctypes.c_void_p, np.ndarray]


class ArenaPool:
    """Arenas (and pointer tables) for concurrent calls: a call takes one and gives it back;
    a thread that finds none free makes another. ``list.pop``/``append`` are atomic. A slot
    is (pointer table, the arena's address as a ``c_void_p``, the arena: ``arena_buffer``'s
    page- or 2 MiB-aligned mapping): both pointers go to ``og_run`` as they are, with no
    conversion per call."""

    def __init__(self, arena_bytes: int, table_size: int, constants: list[int]) -> None:
        self.arena_bytes = arena_bytes
        self.table_size = table_size
        self.constants = constants
        self.free: list[Slot] = []

    def take(self) -> Slot:
        try:
            return self.free.pop()
        except IndexError:
            return self.make()

    def take_at_least(self, arena_bytes: int) -> Slot:
        """A slot whose arena holds ``arena_bytes`` (a symbolic program's peak differs per
        binding: a slot too small for this call gets a larger arena, which it keeps)."""
        slot = self.take()
        if slot[2].size >= arena_bytes:
            return slot
        grown = max(arena_bytes, 2 * slot[2].size)  # a few sizes cover growing calls
        arena, start = arena_buffer(grown)
        return slot[0], ctypes.c_void_p(start), arena

    def give(self, slot: Slot) -> None:
        self.free.append(slot)

    def make(self) -> Slot:
        table = (ctypes.c_void_p * max(self.table_size, 1))()
        table[: len(self.constants)] = self.constants  # type: ignore[assignment]
        arena, start = arena_buffer(self.arena_bytes)
        return table, ctypes.c_void_p(start), arena


class FallbackRunner:
    """Runs fallback steps when the native code calls back."""

    def __init__(
        self, program: Program, offsets: dict[int, int], slots: dict[int, int], names: Any
    ) -> None:
        self.program = program
        self.offsets = offsets
        self.slots = slots
        self.describe: Callable[[Any], str] = names
        self.local = threading.local()
        self.callback = CALLBACK(self._callback)

    def _callback(self, step: int, table: int, arena: int) -> int:
        try:
            fallback = self.program.steps[step]
            assert isinstance(fallback, FallbackStep)
            self.run(fallback, table, arena)
        except BaseException as error:  # handed back to the caller's thread
            self.local.error = error
            return 1
        return 0

    def take_error(self) -> BaseException:
        error: BaseException = self.local.error
        del self.local.error
        return error

    def array(self, x: Operand, table: int, arena: int) -> np.ndarray:
        if isinstance(x, Literal):
            return np.full(x.shape, x.value, x.element_type.dtype)
        buffer = self.program.buffers[x.buffer]
        return view_array(buffer, x, self.base(buffer, table, arena))

    def base(self, buffer: Buffer, table: int, arena: int) -> int:
        if buffer.kind is BufferKind.ARENA:
            return arena + self.offsets.get(buffer.id, 0)
        pointers = ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))
        return int(pointers[self.slots[buffer.id]] or 0)

    def run(self, step: FallbackStep, table: int, arena: int) -> None:
        node = step.node
        assert node is not None
        args = [self.array(x, table, arena) for x in step.inputs]
        try:
            with np.errstate(all="ignore"):
                raw = (
                    node.op.value
                    if isinstance(node.op, Constant)
                    else KERNELS[type(node.op)](node.op, *args)
                )
            results = list(raw) if isinstance(raw, tuple | list) else [raw]
            for i, (out, result) in enumerate(zip(step.outputs, results, strict=True)):
                self.write(out, np.asarray(result), node.output_types[i], i, table, arena)
        except (OpgraphError, ArithmeticError, ValueError, TypeError, IndexError) as error:
            raise ExecutionError(
                f"while executing {self.describe(node)} (built at {node.provenance}): {error}"
            ) from error

    def write(
        self, out: View, result: np.ndarray, expected: Any, index: int, table: int, arena: int
    ) -> None:
        assert isinstance(expected, TensorType)
        if result.dtype != expected.element_type.dtype or result.shape != expected.shape:
            raise ExecutionError(
                f"kernel output {index} is {result.dtype}{list(result.shape)}, the type rule "
                f"says {expected} (a kernel bug)"
            )
        np.copyto(self.array(out, table, arena), result)


def view_array(buffer: Buffer, view: View, base: int) -> np.ndarray:
    """A numpy array over ``view`` of ``buffer`` living at address ``base``."""
    dtype = view.element_type.dtype
    if buffer.nbytes == 0 or view.size == 0:
        return np.zeros(view.shape, dtype)
    raw = (ctypes.c_char * static(buffer.nbytes)).from_address(base)
    flat = np.frombuffer(raw, dtype=dtype)  # type: ignore[call-overload]
    itemsize = dtype.itemsize
    return np.lib.stride_tricks.as_strided(
        flat[static(view.offset) :],
        static_all(view.shape),
        tuple(static(s) * itemsize for s in view.strides),
    )
