"""What each placed step does at run time, and the CUDA kernels device steps need.

:func:`device_action` turns a program step placed on the GPU into an action (kernel launches,
cuBLAS products) through ``DEVICE_STEPS``, a registry keyed by step class; steps placed on the
host become :class:`HostRun` (``opgraph.backends.gpu.host``), transfers :class:`Move`. An
action runs against a :class:`Call`: the executable's per-call view of memory on both sides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from opgraph.backends.fused.program import (
    ConvStep,
    GemmStep,
    LoopKernel,
    LoopStep,
    PoolStep,
    Step,
)
from opgraph.backends.fused.views import View, static, static_all
from opgraph.backends.gpu.cuda.kernel import CudaKernel, Im2Col, Pool
from opgraph.backends.gpu.cuda.loops import CudaLoopEmitter
from opgraph.backends.gpu.cuda.windows import im2col_kernel, int_gemm_kernel, pool_kernel
from opgraph.backends.gpu.device import DeviceBuffer, DeviceRuntime, Strided
from opgraph.backends.gpu.placement import Transfer
from opgraph.core import element_type as et
from opgraph.core.registry import Registry

#: A view's buffer id meaning "the action's scratch memory" (not a program buffer).
SCRATCH = -1


class Call(Protocol):
    """Memory of one call, on both sides, as actions see it."""

    runtime: DeviceRuntime
    stream: Any

    def device_ptr(self, view: View, extra: int = 0) -> int:
        """Device address of ``view``'s first element (plus ``extra`` elements)."""

    def launch(self, kernel: CudaKernel, pointers: dict[str, int] | None = None) -> None:
        """Launch ``kernel``; ``pointers`` overrides parameters' addresses by name."""

    def scratch(self, nbytes: int) -> DeviceBuffer:
        """Device memory for the rest of the call."""

    def host_array(self, view: View) -> np.ndarray:
        """The host numpy view of ``view``."""

    def transfer(self, transfer: Transfer) -> None:
        """Copy a buffer between the sides."""

    def run_host(self, step: Step) -> None:
        """Run ``step`` on the host."""


class Action(Protocol):
    """What one placed step does per call."""

    label: str

    def run(self, call: Call) -> None: ...

    def kernels(self) -> list[CudaKernel]: ...


@dataclass
class Lowering:
    """How to name and shape the kernels of step ``index``."""

    index: int
    restrict: bool = True
    block: int = 256
    prefix: str = ""

    def name(self, kind: str, suffix: str = "") -> str:
        """A kernel symbol: ``<prefix><kind><step index><suffix>`` (``w2_k0_0``)."""
        return f"{self.prefix}{kind}{self.index}{suffix}"

    def loop(self, kernel: LoopKernel, name: str, label: str) -> CudaKernel | None:
        return CudaLoopEmitter(
            kernel, name, label, self.restrict and not _aliased(kernel), self.block
        ).render()


def _aliased(kernel: LoopKernel) -> bool:
    """A load and a store use the same buffer (an epilogue updating a product in place)."""
    stored = {view.buffer for _, view in kernel.stores}
    return any(isinstance(n.operand, View) and n.operand.buffer in stored for n in kernel.nodes)


# ---------------------------------------------------------------------------- actions
@dataclass
class DeviceLoop:
    """Generated loop kernels, one after the other."""

    label: str
    launches: list[CudaKernel]

    def run(self, call: Call) -> None:
        for kernel in self.launches:
            call.launch(kernel)

    def kernels(self) -> list[CudaKernel]:
        return list(self.launches)


@dataclass
class DeviceGemm:
    """A GemmStep: cuBLAS (f32/f64, batches in one strided-batched call when the batch
    offsets are regular) or a wrapping integer kernel; then the epilogue kernel."""

    label: str
    step: GemmStep
    int_kernel: CudaKernel | None = None
    epilogue: CudaKernel | None = None

    def run(self, call: Call) -> None:
        a, b, c = self.step.a, self.step.b, self.step.out
        assert a is not None and b is not None and c is not None
        if self.int_kernel is not None:
            for da, db, dc in self.step.batch:
                pointers = {
                    "p0": call.device_ptr(a, static(da)),
                    "p1": call.device_ptr(b, static(db)),
                    "q0": call.device_ptr(c, static(dc)),
                }
                call.launch(self.int_kernel, pointers)
        else:
            batch = tuple((static(x), static(y), static(z)) for x, y, z in self.step.batch)
            for sa, sb, sc in _gemm_operands(call, a, b, c, batch):
                call.runtime.gemm(sa, sb, sc, call.stream)
        if self.epilogue is not None:
            call.launch(self.epilogue)

    def kernels(self) -> list[CudaKernel]:
        return [k for k in (self.int_kernel, self.epilogue) if k is not None]


def _gemm_operands(
    call: Call, a: View, b: View, c: View, batch: tuple[tuple[int, int, int], ...]
) -> list[tuple[Strided, Strided, Strided]]:
    """One (a, b, c) triple per cuBLAS call: 3-D for a regular batch, else one per entry."""
    step = regular_batch(batch)
    if step is not None and len(batch) > 1:

        def batched(v: View, s: int) -> Strided:
            return Strided(
                call.device_ptr(v),
                v.element_type,
                (len(batch), *static_all(v.shape)),
                (s, *static_all(v.strides)),
            )

        return [(batched(a, step[0]), batched(b, step[1]), batched(c, step[2]))]
    return [
        (
            Strided(
                call.device_ptr(a, da), a.element_type, static_all(a.shape), static_all(a.strides)
            ),
            Strided(
                call.device_ptr(b, db), b.element_type, static_all(b.shape), static_all(b.strides)
            ),
            Strided(
                call.device_ptr(c, dc), c.element_type, static_all(c.shape), static_all(c.strides)
            ),
        )
        for da, db, dc in batch
    ]


def regular_batch(batch: tuple[tuple[int, int, int], ...]) -> tuple[int, int, int] | None:
    """The per-entry offset step when entry ``i`` is at ``i * step``, else None."""
    if not batch or batch[0] != (0, 0, 0):
        return None
    step = batch[1] if len(batch) > 1 else (0, 0, 0)
    for i, entry in enumerate(batch):
        if entry != tuple(i * s for s in step):
            return None
    return step  # type: ignore[return-value]


@dataclass
class DeviceConv:
    """A ConvStep: im2col into scratch (unless the image is its own patch matrix), one
    strided-batched cuBLAS GEMM per group over the images, then the epilogue."""

    label: str
    step: ConvStep
    spec: Im2Col
    im2col: CudaKernel | None
    epilogue: CudaKernel | None = None

    def run(self, call: Call) -> None:
        s = self.step
        assert s.x is not None and s.w is not None and s.out is not None
        n, c = static_all(s.x.shape[:2])  # the GPU runs static Programs only
        o, k = static_all(s.w.shape)
        g, p = s.groups, s.images[1] * s.images[2]
        t = s.out.element_type
        item = t.itemsize
        if self.im2col is not None:
            patches = call.scratch(n * g * k * p * item)
            call.launch(self.im2col, {"q0": patches.ptr})
            source, strides = patches.ptr, (g * k * p, p, 1)
        else:  # 1x1, stride 1, unpadded: the image rows are the patch rows
            xs = static_all(s.x.strides)
            source, strides = call.device_ptr(s.x), (xs[0], xs[1], 1)
        og = o // g
        out = call.device_ptr(s.out)
        wide = (p, n * p, 1) if s.wide else (o * p, p, 1)
        for grp in range(g):
            a = Strided(call.device_ptr(s.w, grp * og * k), t, (n, og, k), (0, k, 1))
            b_offset = grp * (
                k * p if self.im2col is not None else (c // g) * static(s.x.strides[1])
            )
            b = Strided(source + b_offset * item, t, (n, k, p), strides)
            c_offset = grp * og * (n * p if s.wide else p)
            call.runtime.gemm(
                a, b, Strided(out + c_offset * item, t, (n, og, p), wide), call.stream
            )
        if self.epilogue is not None:
            call.launch(self.epilogue)

    def kernels(self) -> list[CudaKernel]:
        return [k for k in (self.im2col, self.epilogue) if k is not None]


@dataclass
class DevicePool:
    """A PoolStep: one generated window kernel (none for an empty output)."""

    label: str
    kernel: CudaKernel | None

    def run(self, call: Call) -> None:
        if self.kernel is not None:
            call.launch(self.kernel)

    def kernels(self) -> list[CudaKernel]:
        return [self.kernel] if self.kernel is not None else []


@dataclass
class HostRun:
    """A step run on the host."""

    label: str
    step: Step

    def run(self, call: Call) -> None:
        call.run_host(self.step)

    def kernels(self) -> list[CudaKernel]:
        return []


@dataclass
class Move:
    """A transfer between the sides."""

    label: str
    transfer: Transfer

    def run(self, call: Call) -> None:
        call.transfer(self.transfer)

    def kernels(self) -> list[CudaKernel]:
        return []


# ------------------------------------------------------------------------ lowering
DeviceLowering = Callable[[Any, Lowering], Action]
DEVICE_STEPS: Registry[type, DeviceLowering] = Registry("GPU step lowering")


def device_action(step: Step, lowering: Lowering) -> Action:
    """The device action of a step placed on the GPU."""
    return DEVICE_STEPS[type(step)](step, lowering)


@DEVICE_STEPS.register(LoopStep)
def _loop(step: LoopStep, lowering: Lowering) -> Action:
    kernels = [
        lowering.loop(kernel, lowering.name("k", f"_{j}"), step.label)
        for j, kernel in enumerate(step.kernels)
    ]
    return DeviceLoop(step.label, [k for k in kernels if k is not None])


@DEVICE_STEPS.register(GemmStep)
def _gemm(step: GemmStep, lowering: Lowering) -> Action:
    assert step.a is not None and step.b is not None and step.out is not None
    assert not step.panel, f"{step.label}: column panels reached the GPU (needs panels=False)"
    action = DeviceGemm(step.label, step)
    if step.out.element_type not in (et.f32, et.f64):
        action.int_kernel = int_gemm_kernel(
            lowering.name("g"), step.a, step.b, step.out, step.label, lowering.block
        )
    if step.epilogue is not None:
        action.epilogue = lowering.loop(step.epilogue, lowering.name("e"), step.label)
    return action


def im2col_spec(step: ConvStep) -> Im2Col:
    """The patches a convolution step multiplies."""
    return Im2Col(
        step.groups, step.kernel, step.strides, step.dilations, step.padding, step.images[1:]
    )


def direct(step: ConvStep) -> bool:
    """1x1, stride 1, unpadded, with each channel's (H, W) plane contiguous: the image is
    its own patch matrix."""
    assert step.x is not None
    h, w = step.x.shape[2:]
    xs = step.x.strides
    plain = step.kernel == (1, 1) and step.strides == (1, 1) and step.padding == (0, 0)
    return plain and (w == 1 or xs[3] == 1) and (h == 1 or xs[2] == w)


@DEVICE_STEPS.register(ConvStep)
def _conv(step: ConvStep, lowering: Lowering) -> Action:
    assert step.x is not None and step.w is not None
    spec = im2col_spec(step)
    kernel = None
    if not direct(step):
        n = step.x.shape[0]
        k = step.w.shape[1]
        p = step.images[1] * step.images[2]
        shape = (n, step.groups, k, p)
        patches = View(SCRATCH, step.x.element_type, shape, (step.groups * k * p, k * p, p, 1))
        kernel = im2col_kernel(
            lowering.name("c"), step.x, patches, spec, step.label, lowering.block
        )
    action = DeviceConv(step.label, step, spec, kernel)
    if step.epilogue is not None:
        action.epilogue = lowering.loop(step.epilogue, lowering.name("e"), step.label)
    return action


def pool_spec(step: PoolStep) -> Pool:
    """The pooling a pool step computes."""
    return Pool(
        step.maximum,
        step.window,
        step.strides,
        step.dilations,
        step.padding,
        step.count_padding,
        step.padded,
    )


@DEVICE_STEPS.register(PoolStep)
def _pool(step: PoolStep, lowering: Lowering) -> Action:
    assert step.x is not None and step.out is not None
    if step.out.size == 0:
        return DevicePool(step.label, None)
    kernel = pool_kernel(
        lowering.name("w"), step.x, step.out, pool_spec(step), step.label, lowering.block
    )
    return DevicePool(step.label, kernel)
