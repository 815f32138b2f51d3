"""What the CUDA renderer produces for one kernel, and what each kernel computes.

A :class:`CudaKernel` is the source of one ``__global__`` function plus everything needed to
launch it: its pointer parameters (each a view of a program buffer, so the executable can
resolve the address per call), the launch shape, and the run-time checks it may raise. Its
``spec`` says what it computes — the fused :class:`~opgraph.backends.fused.program.LoopKernel`,
an im2col, a pooling, an integer product — so that a device without a CUDA compiler (the
fake device of the tests) can compute the same thing another way.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from opgraph.backends.fused.loops import Check
from opgraph.backends.fused.views import View


class LaunchKind(enum.Enum):
    """How ``work`` maps to threads."""

    ELEMENTS = "elements"  # one thread per unit of work, grid-stride loop
    BLOCKS = "blocks"  # one block per unit of work (a row), grid-stride over rows


@dataclass(frozen=True)
class KernelParam:
    """A pointer parameter: the first element of ``view`` (its offset is in the pointer).

    Attributes:
        name: the parameter's name in the source (``p3`` loads node 3, ``q0`` is store 0).
        view: which buffer, and how the kernel walks it (shape and element strides).
        store: written (else only read).
    """

    name: str
    view: View
    store: bool


@dataclass(frozen=True)
class CudaKernel:
    """One generated ``extern "C" __global__`` kernel.

    Attributes:
        name: the symbol (unique in its module).
        source: the kernel and its device functions (the module adds the prelude).
        params: pointer parameters, in order; an ``int* og_err`` follows when ``checks``.
        work: units to cover (elements, 4-element chunks, or rows).
        block: threads per block.
        launch: how units map to threads.
        checks: run-time checks; bit ``i`` of the error word means ``checks[i]``.
        helpers: names of the CPU-dialect helpers the source calls.
        spec: what the kernel computes (a LoopKernel, :class:`Im2Col`, …).
        label: the graph nodes it computes, for messages and profiles.
    """

    name: str
    source: str
    params: tuple[KernelParam, ...]
    work: int
    block: int
    launch: LaunchKind
    checks: tuple[Check, ...] = ()
    helpers: tuple[str, ...] = ()
    spec: object = None
    label: str = ""

    def grid(self, max_blocks: int) -> int:
        """Blocks to launch when the device runs at most ``max_blocks`` at once usefully."""
        if self.launch is LaunchKind.BLOCKS:
            return max(1, min(self.work, max_blocks))
        return max(1, min(-(-self.work // self.block), max_blocks))


@dataclass(frozen=True)
class Im2Col:
    """Patches of a 2-D convolution: ``out[n, g, k, p]`` for image ``n``, group ``g``, patch
    row ``k = (channel, ki, kj)`` and output pixel ``p = (oh, ow)``; zero in the padding.

    Parameter 0 is the image (N, C, H, W view), parameter 1 the dense patch buffer."""

    groups: int
    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    padding: tuple[int, int]
    out_hw: tuple[int, int]


@dataclass(frozen=True)
class Pool:
    """2-D max or average pooling (``PoolStep``'s semantics); parameters: x, out."""

    maximum: bool
    window: tuple[int, int]
    strides: tuple[int, int]
    dilations: tuple[int, int]
    padding: tuple[int, int]
    count_padding: bool
    padded: tuple[int, int]


@dataclass(frozen=True)
class IntGemm:
    """``c = a @ b`` on integer matrices, wrapping (accumulated in 64 bits, low bits kept);
    parameters: a, b, c (2-D views). One launch per batch entry."""

    rows: int
    cols: int
    inner: int
