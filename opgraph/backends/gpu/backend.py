"""The GPU backend: the CPU backend's lowering, fusion and memory plan, placed between the
GPU and the host, rendered as CUDA and run on a device runtime."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from opgraph.backends.fused.builder import TargetFeatures
from opgraph.backends.fused.memory import MemoryPlan
from opgraph.backends.fused.pipeline import compile_program
from opgraph.backends.fused.program import BufferKind, Program, Step
from opgraph.backends.fused.staged import StagedExecutable, is_data_dependent
from opgraph.backends.gpu.availability import available, unavailable_reason
from opgraph.backends.gpu.config import GpuConfig
from opgraph.backends.gpu.cuda.module import assemble
from opgraph.backends.gpu.cupy_device import cupy_device
from opgraph.backends.gpu.device import DeviceBuffer, DeviceRuntime, GpuUnavailableError
from opgraph.backends.gpu.executable import Compiled, GpuExecutable
from opgraph.backends.gpu.placement import Placement, Side, Transfer, place_steps
from opgraph.backends.gpu.steps import (
    DEVICE_STEPS,
    Action,
    HostRun,
    Lowering,
    Move,
    device_action,
)
from opgraph.backends.gpu.tensor import DeviceTensor, wrap_device_array
from opgraph.core.element_type import as_element_type
from opgraph.core.function import Function
from opgraph.passes.specialize_shapes import is_symbolic
from opgraph.runtime.backend import Backend, Executable
from opgraph.runtime.specializing import SpecializingExecutable
from opgraph.runtime.tensor import Tensor

#: The CPU-only steps the shared lowering must not choose here: cuBLAS reads constant weights
#: as plain strided matrices (column panels are no strided view), and 3x3 convolutions are
#: im2col + GEMM (no Winograd kernel on the device).
GPU_FEATURES = TargetFeatures(panels=False, winograd=False)


def kernel_prefix(name: str) -> str:
    """Kernel symbols start with the function's name (as a C identifier): profilers show
    which function a kernel belongs to, and modules can be compiled together."""
    ident = re.sub(r"\W", "_", name) or "f"
    return ("f" + ident if ident[0].isdigit() else ident) + "_"


class GpuBackend(Backend):
    """The GPU backend (``og.backend("GPU")`` where a CUDA device is present).

    Args:
        config: device, block size, hybrid placement threshold; default ``GpuConfig()``.
        device: the device runtime; default the shared CuPy runtime of ``config.device_id``
            (tests pass a :class:`~opgraph.backends.gpu.fake.FakeDevice`).

    Raises:
        GpuUnavailableError: no device given and CuPy or a CUDA device is missing.
    """

    name = "GPU"

    def __init__(self, config: GpuConfig | None = None, device: DeviceRuntime | None = None):
        self.config = config or GpuConfig()
        if device is None:
            if not available():
                raise GpuUnavailableError(f"the GPU backend is unavailable: {unavailable_reason()}")

            device = cupy_device(self.config.device_id)
        self.device: DeviceRuntime = device

    def create_tensor(self, element_type: Any, shape: Any, buffer: Any = None) -> Tensor:
        """A tensor for calls on this backend.

        Args:
            element_type: the element type.
            shape: the shape.
            buffer: None for a new (zeroed) device tensor; a numpy array to wrap zero-copy as
                a host tensor (executables copy it in and out at the call boundary); or a
                C-contiguous device array (``__cuda_array_interface__`` or DLPack) to wrap
                zero-copy as a device tensor.
        """
        if buffer is None:
            return DeviceTensor(self.device, element_type, shape)
        if isinstance(buffer, np.ndarray):
            return Tensor(element_type, shape, buffer)
        return wrap_device_array(self.device, as_element_type(element_type), shape, buffer)

    def compile(self, function: Function, profile: bool = False) -> Executable:
        """Compile ``function`` for the device.

        A static Function gives a :class:`GpuExecutable`. A symbolic one gives a
        :class:`~opgraph.runtime.specializing.SpecializingExecutable`: the kernels' sizes are
        compile-time constants here, so each new binding of the symbols re-runs this compile on
        the specialised Function (the last 16 bindings are kept). A data-dependent one runs in
        stages (:class:`~opgraph.backends.fused.staged.StagedExecutable`), each stage compiled
        here, the data-dependent nodes on their reference kernels on the host between them.

        Raises:
            UnsupportedOpError: an op has neither a lowering nor a reference kernel.
        """
        if is_data_dependent(function):
            return StagedExecutable(
                function,
                lambda stage: self.compile(stage, profile),
                profile,
                self.name,
                self.device,
            )
        if is_symbolic(function):
            return SpecializingExecutable(
                self,
                function,
                profile=profile,
                compile_static=lambda fn: self.compile_static(fn, profile),
            )
        return self.compile_static(function, profile)

    def compile_static(self, function: Function, profile: bool = False) -> GpuExecutable:
        """Compile a Function with static shapes and no data-dependent node.

        Raises:
            UnsupportedOpError: symbolic or data-dependent sizes, or an op has neither a
                lowering nor a reference kernel.
        """
        fused = compile_program(function, self.name, self.config.optimize, features=GPU_FEATURES)
        lowered, program, plan = fused.lowered, fused.program, fused.plan
        placement = place_steps(program, self.on_device, self.config.host_kernel_limit)
        actions = self.actions(program, plan, placement, kernel_prefix(function.name))
        kernels = [k for a in actions for k in a.kernels()]
        source = assemble(kernels, function.name)
        module = self.device.compile(source, [k.name for k in kernels]) if kernels else None
        compiled = Compiled(lowered, program, plan, placement, actions, source, module)
        compiled.constants = self.upload_constants(program, placement)
        return GpuExecutable(function, compiled, self.device, profile)

    def on_device(self, step: Step) -> bool:
        """Whether ``step`` can run on the device (a GPU lowering exists and the device
        supports its kind)."""
        return type(step) in DEVICE_STEPS and self.device.supports(type(step))

    def actions(
        self, program: Program, plan: MemoryPlan, placement: Placement, prefix: str = ""
    ) -> list[Action]:
        inplace = {b for pair in plan.inplace for b in pair}
        actions: list[Action] = []
        for i, placed in enumerate(placement.steps):
            step = placed.step
            if isinstance(step, Transfer):
                actions.append(Move(f"{step.direction} {step.label}", step))
            elif placed.side is Side.HOST:
                actions.append(HostRun(step.label, step))
            else:
                written = {v.buffer for v in step.writes()}
                lowering = Lowering(i, not (inplace & written), self.config.block, prefix)
                actions.append(device_action(step, lowering))
        return actions

    def upload_constants(self, program: Program, placement: Placement) -> dict[int, DeviceBuffer]:
        """Device copies of the constants device steps read (uploaded once, here)."""
        uploaded: dict[int, DeviceBuffer] = {}
        for b in program.buffers:
            if b.kind is not BufferKind.CONST or b.data is None:
                continue
            if Side.DEVICE in placement.const_sides.get(b.id, frozenset()):
                data = np.ascontiguousarray(b.data).reshape(-1).view(np.uint8)
                memory = self.device.allocate(data.nbytes)
                self.device.upload(data, memory.ptr, None)
                uploaded[b.id] = memory
        return uploaded
