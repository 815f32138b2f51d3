"""The CUDA implementation of the scalar renderers' context, and the per-kernel state it
feeds (helpers used, run-time checks)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from opgraph.backends.cpu.codegen.context import Check
from opgraph.backends.gpu.cuda import dialect
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpgraphError
from opgraph.core.node import Node

#: Bits of the ``int`` error word; a kernel with more distinct checks shares the last one.
MAX_CHECKS = 31


@dataclass
class KernelState:
    """What rendering one kernel collected: helper names (in first-use order) and checks."""

    helpers: dict[str, None] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def helper(self, name: str) -> None:
        self.helpers.setdefault(name, None)

    def check_bit(self, node: Node | None, message: str) -> int:
        key = Check(node, message)
        if key not in self.checks:
            if len(self.checks) >= MAX_CHECKS:
                raise OpgraphError(f"a GPU kernel needs more than {MAX_CHECKS} run-time checks")
            self.checks.append(key)
        return self.checks.index(key)


class CudaScalarContext:
    """:class:`~opgraph.backends.fused.lowering.ScalarContext` for CUDA, for one op inside one
    kernel. Run-time checks set a bit of the kernel's error word (``og_flag``)."""

    def __init__(
        self,
        state: KernelState,
        inputs: tuple[ElementType, ...],
        output: ElementType,
        node: Node | None,
        emit: Callable[[str], None],
    ) -> None:
        self._state = state
        self._inputs = inputs
        self._output = output
        self._node = node
        self._emit = emit

    @property
    def inputs(self) -> tuple[ElementType, ...]:
        return self._inputs

    @property
    def output(self) -> ElementType:
        return self._output

    def math(self, name: str, *args: str) -> str:
        return dialect.math_call(name, self._output, *args)

    def math_in(self, name: str, t: ElementType, *args: str) -> str:
        return dialect.math_call(name, t, *args)

    def literal(self, value: bool | int | float, t: ElementType | None = None) -> str:
        return dialect.literal(value, t or self._output)

    def ctype(self, t: ElementType | None = None) -> str:
        return dialect.compute_type(t or self._output)

    def helper(self, name: str) -> None:
        self._state.helper(name)

    def check(self, condition: str, message: str) -> None:
        bit = self._state.check_bit(self._node, message)
        self._emit(f"if ({condition}) og_flag(og_err, {1 << bit});")
