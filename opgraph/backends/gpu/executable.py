"""The GPU Executable: a placed program run step by step on one device stream.

A call binds every program buffer to memory on the sides that use it — arena buffers at their
planned offset in a device arena and a host arena, constants where they were uploaded at
compile time, arguments and results to the caller's tensors — staging an argument or result
only when the caller's tensor lives on the other side (the only copies at the call
boundary). Then the actions run in order: kernel launches and cuBLAS products on the stream,
host steps on numpy views, transfers between the arenas. Call resources (arenas, stream,
error words) come from a pool, so concurrent calls from several threads each have their own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from opgraph.backends.fused.loops import Check
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.backends.fused.program import BufferKind, FallbackStep, Program, Step
from opgraph.backends.fused.views import View, static
from opgraph.backends.gpu.cuda.kernel import CudaKernel
from opgraph.backends.gpu.device import DeviceBuffer, DeviceRuntime
from opgraph.backends.gpu.host import REFERENCE_STEPS, run_host_step
from opgraph.backends.gpu.placement import Placement, Side, Transfer, describe
from opgraph.backends.gpu.steps import Action
from opgraph.backends.gpu.tensor import DeviceTensor, wrap_device_array
from opgraph.core.errors import ExecutionError
from opgraph.core.function import Function
from opgraph.core.printing import format_node, value_names
from opgraph.runtime.backend import Executable
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import validate_call


@dataclass
class Compiled:
    """Everything a GpuExecutable runs: the program, its plan and placement, the actions,
    the CUDA module (None when no kernel runs on the device)."""

    lowered: Function
    program: Program
    plan: MemoryPlan
    placement: Placement
    actions: list[Action]
    source: str
    module: Any
    constants: dict[int, DeviceBuffer] = field(default_factory=dict)


@dataclass
class _Resources:
    """Memory one call uses, reused by later calls."""

    stream: Any
    device_arena: DeviceBuffer
    host_arena: np.ndarray
    errors: DeviceBuffer | None


class GpuExecutable(Executable):
    """A Function compiled for the GPU backend (see the module docstring)."""

    def __init__(
        self, function: Function, compiled: Compiled, runtime: DeviceRuntime, profile: bool
    ) -> None:
        super().__init__(function, profile)
        self.compiled = compiled
        self.runtime = runtime
        program = compiled.program
        names = value_names(compiled.lowered)
        self._describe = lambda node: format_node(node, names)
        self._kernels = [k for a in compiled.actions for k in a.kernels()]
        self._error_slot = {k.name: i for i, k in enumerate(k for k in self._kernels if k.checks)}
        self._checks = {k.name: k.checks for k in self._kernels if k.checks}
        self._const_host = {
            b.id: _bytes(np.ascontiguousarray(b.data))
            for b in program.buffers
            if b.kind is BufferKind.CONST and b.data is not None
        }
        self._arg_index = {b.id: b.index for b in program.buffers if b.kind is BufferKind.ARG}
        self._result_index = {b.id: b.index for b in program.buffers if b.kind is BufferKind.RESULT}
        self._touched = _sides_touched(compiled.placement)
        self._host_arena_bytes = compiled.plan.peak if Side.HOST in self._touched_arena() else 0
        self._free: list[_Resources] = []

    def _touched_arena(self) -> set[Side]:
        arena = {b.id for b in self.compiled.program.buffers if b.kind is BufferKind.ARENA}
        return {side for b, sides in self._touched.items() if b in arena for side in sides}

    # ----------------------------------------------------------------------- calling
    def call(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """Run: read ``inputs``, write ``outputs`` (host or device tensors, in any mix)."""
        validate_call(
            outputs,
            inputs,
            self.result_types,
            self.parameter_types,
            self.function.name,
            device=self.runtime,
        )
        self._run(outputs, inputs)

    def _call_arrays(self, *arrays: Any) -> list[np.ndarray]:
        """Numpy arrays (or device arrays with ``__cuda_array_interface__``) in, numpy arrays
        out."""
        if any(hasattr(a, "__cuda_array_interface__") for a in arrays) and len(arrays) == len(
            self.parameter_types
        ):
            inputs: list[Tensor] = [
                wrap_device_array(self.runtime, t.element_type, t.shape, a)
                if hasattr(a, "__cuda_array_interface__")
                else Tensor(t.element_type, t.shape, np.ascontiguousarray(a))
                for a, t in zip(arrays, self.parameter_types, strict=True)
            ]
            outputs = [Tensor(t.element_type, t.shape) for t in self.result_types]
            self.call(outputs, inputs)
            return [o.buffer for o in outputs]
        return super()._call_arrays(*arrays)

    def _run(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        try:
            resources = self._free.pop()
        except IndexError:
            resources = self._resources()
        try:
            _CallState(self, resources, outputs, inputs).run()
        finally:
            self._free.append(resources)

    def _resources(self) -> _Resources:
        errors = self.runtime.allocate(4 * len(self._error_slot)) if self._error_slot else None
        return _Resources(
            self.runtime.new_stream(),
            self.runtime.allocate(self.compiled.plan.peak),
            np.zeros(self._host_arena_bytes, np.uint8),
            errors,
        )

    def error(self, kernel: str, word: int) -> ExecutionError:
        """The ExecutionError for error word ``word`` of ``kernel``."""
        bit = (word & -word).bit_length() - 1
        check: Check = self._checks[kernel][bit]
        node = check.node
        where = f"{self._describe(node)} (built at {node.provenance})" if node else "a copy"
        return ExecutionError(f"while executing {where}: {check.message}")

    # ----------------------------------------------------------------- introspection
    def placement(self) -> str:
        """Where each step runs and the transfers between them (``opgraph run --verbose``)."""
        return describe(self.compiled.program, self.compiled.placement)

    def fallback_ops(self) -> list[str]:
        """Names of the ops run by reference kernels on the host (sorted)."""
        names = set()
        for p in self.compiled.placement.steps:
            if isinstance(p.step, FallbackStep) and p.step.node is not None:
                names.add(p.step.node.op.name)
            elif not isinstance(p.step, Transfer) and type(p.step) in REFERENCE_STEPS:
                names.update(node.op.name for node in p.step.nodes)
        return sorted(names)

    def host_steps(self) -> list[Step]:
        """Program steps placed on the host."""
        return [
            p.step
            for p in self.compiled.placement.steps
            if p.side is Side.HOST and not isinstance(p.step, Transfer)
        ]

    def transfers(self) -> list[Transfer]:
        """The transfers inside every call (boundary copies not included)."""
        return self.compiled.placement.transfers()

    def kernels(self) -> list[CudaKernel]:
        """The CUDA kernels the executable launches."""
        return list(self._kernels)

    def source(self) -> str:
        """The generated CUDA module."""
        return self.compiled.source

    def memory_plan(self) -> MemoryPlan:
        """The arena layout (used on both sides); ``.peak`` is its size in bytes."""
        return self.compiled.plan


def _bytes(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array, as a flat uint8 view."""
    return array.reshape(-1).view(np.uint8)


def _sides_touched(placement: Placement) -> dict[int, set[Side]]:
    """Per written or transferred buffer, the sides holding it at some point."""
    touched: dict[int, set[Side]] = {}
    for b, side in placement.written_on.items():
        touched.setdefault(b, set()).add(side)
    for t in placement.transfers():
        touched.setdefault(t.buffer, set()).update((t.source, t.target))
    return touched


class _CallState:
    """One call: memory bound on both sides (the ``Call`` protocol of ``steps``)."""

    def __init__(
        self,
        exe: GpuExecutable,
        resources: _Resources,
        outputs: Sequence[Tensor],
        inputs: Sequence[Tensor],
    ) -> None:
        self.exe = exe
        self.runtime = exe.runtime
        self.stream = resources.stream
        self.resources = resources
        self.outputs, self.inputs = outputs, inputs
        self.device: dict[int, int] = {}
        self.host: dict[int, tuple[np.ndarray, int]] = {}
        self.keep: list[Any] = []
        self.bind()

    # ----------------------------------------------------------------------- binding
    def bind(self) -> None:
        exe, compiled = self.exe, self.exe.compiled
        offsets = compiled.plan.offsets
        for b in compiled.program.buffers:
            if b.kind is BufferKind.ARENA:
                offset = offsets.get(b.id, 0)
                self.device[b.id] = self.resources.device_arena.ptr + offset
                self.host[b.id] = (self.resources.host_arena, offset)
            elif b.kind is BufferKind.CONST:
                if b.id in exe._const_host:
                    self.host[b.id] = (exe._const_host[b.id], 0)
                if b.id in compiled.constants:
                    self.device[b.id] = compiled.constants[b.id].ptr
        for arg, index in exe._arg_index.items():
            self.bind_argument(arg, self.inputs[index])
        for result, index in exe._result_index.items():
            sides = exe._touched.get(result, set())
            self.bind_io(
                result,
                self.outputs[index],
                stage_host=Side.HOST in sides,
                stage_device=Side.DEVICE in sides,
            )

    def bind_argument(self, b: int, tensor: Tensor) -> None:
        sides = self.exe.compiled.placement.arg_sides.get(b, frozenset())
        self.bind_io(b, tensor, Side.HOST in sides, Side.DEVICE in sides)
        nbytes = tensor.type.nbytes
        if isinstance(tensor, DeviceTensor) and Side.HOST in sides:
            self.runtime.download(tensor.ptr, self.host_bytes(b, nbytes), self.stream)
        elif not isinstance(tensor, DeviceTensor) and Side.DEVICE in sides:
            self.runtime.upload(_bytes(tensor.buffer), self.device[b], self.stream)

    def bind_io(self, b: int, tensor: Tensor, stage_host: bool, stage_device: bool) -> None:
        """Bind ``b`` to the caller's tensor on its side, to staging on the other (if used)."""
        nbytes = tensor.type.nbytes
        if isinstance(tensor, DeviceTensor):
            self.device[b] = tensor.ptr
            if stage_host:
                self.host[b] = (np.empty(nbytes, np.uint8), 0)
        else:
            self.host[b] = (_bytes(tensor.buffer), 0)
            if stage_device:
                memory = self.runtime.allocate(nbytes)
                self.keep.append(memory)
                self.device[b] = memory.ptr

    def host_bytes(self, b: int, nbytes: int) -> np.ndarray:
        backing, offset = self.host[b]
        return backing[offset : offset + nbytes]

    # ------------------------------------------------------------------------ running
    def run(self) -> None:
        exe = self.exe
        if self.resources.errors is not None:
            self.runtime.zero(self.resources.errors.ptr, self.resources.errors.nbytes, self.stream)
        for i, action in enumerate(exe.compiled.actions):
            started = time.perf_counter() if exe.profile else 0.0
            action.run(self)
            if exe.profile:
                self.runtime.synchronize(self.stream)
                exe._record(f"{i}: {action.label}", time.perf_counter() - started)
        self.raise_errors()
        self.copy_results_out()
        self.runtime.synchronize(self.stream)

    def raise_errors(self) -> None:
        errors = self.resources.errors
        if errors is None:
            return
        words = np.zeros(len(self.exe._error_slot), np.int32)
        self.runtime.download(errors.ptr, words, self.stream)
        for name, slot in self.exe._error_slot.items():
            if words[slot]:
                raise self.exe.error(name, int(words[slot]))

    def copy_results_out(self) -> None:
        placement = self.exe.compiled.placement
        for b, index in self.exe._result_index.items():
            tensor = self.outputs[index]
            valid = placement.result_sides.get(b, frozenset())
            nbytes = tensor.type.nbytes
            if isinstance(tensor, DeviceTensor) and valid and Side.DEVICE not in valid:
                self.runtime.upload(self.host_bytes(b, nbytes), tensor.ptr, self.stream)
            elif not isinstance(tensor, DeviceTensor) and valid and Side.HOST not in valid:
                self.runtime.download(self.device[b], self.host_bytes(b, nbytes), self.stream)

    # ------------------------------------------------------------- the Call protocol
    def device_ptr(self, view: View, extra: int = 0) -> int:
        offset = static(view.offset) + extra
        return self.device[view.buffer] + offset * view.element_type.itemsize

    def launch(self, kernel: CudaKernel, pointers: dict[str, int] | None = None) -> None:
        given = pointers or {}
        args = [
            given[p.name] if p.name in given else self.device_ptr(p.view) for p in kernel.params
        ]
        if kernel.checks:
            errors = self.resources.errors
            assert errors is not None
            args.append(errors.ptr + 4 * self.exe._error_slot[kernel.name])
        grid = kernel.grid(self.runtime.max_blocks)
        self.runtime.launch(self.exe.compiled.module, kernel, grid, args, self.stream)

    def scratch(self, nbytes: int) -> DeviceBuffer:
        memory = self.runtime.allocate(nbytes)
        self.keep.append(memory)
        return memory

    def host_array(self, view: View) -> np.ndarray:
        if view.size == 0:
            return np.zeros(view.shape, view.element_type.dtype)
        backing, offset = self.host[view.buffer]
        item = view.element_type.itemsize
        return np.ndarray(
            view.shape,
            view.element_type.dtype,
            buffer=backing,
            offset=offset + view.offset * item,
            strides=tuple(static(s) * item for s in view.strides),
        )

    def transfer(self, transfer: Transfer) -> None:
        b = transfer.buffer
        nbytes = static(self.exe.compiled.program.buffers[b].nbytes)
        if transfer.target is Side.DEVICE:
            self.runtime.upload(self.host_bytes(b, nbytes), self.device[b], self.stream)
        else:
            self.runtime.download(self.device[b], self.host_bytes(b, nbytes), self.stream)

    def run_host(self, step: Step) -> None:
        run_host_step(step, self.host_array, self.exe._describe)
