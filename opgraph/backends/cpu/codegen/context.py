"""What the generators of one module share: buffer addresses, helpers and math functions in
use, and the run-time checks of each step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from opgraph.backends.cpu.codegen import dialect
from opgraph.core.element_type import ElementType
from opgraph.core.node import Node


@dataclass(frozen=True)
class Check:
    """A run-time check of a step: ``message`` about ``node`` when its bit is set."""

    node: Node | None
    message: str


@dataclass
class ModuleContext:
    """Shared state of one generated module.

    Attributes:
        base: the C expression of a buffer's first byte (``char*``), by buffer id.
        num_threads: threads of parallel regions.
        parallel_threshold: work below which a step runs serially.
    """

    base: Callable[[int], str]
    num_threads: int
    parallel_threshold: int
    helpers: dict[str, None] = field(default_factory=dict)
    math: set[tuple[str, ElementType]] = field(default_factory=set)
    uses_pool: bool = False
    stream_bytes: int = 0  # results at least this large are written with streaming stores
    sizes: dict[int, int] = field(default_factory=dict)  # result buffers: bytes

    def streamable(self, buffer: int) -> bool:
        return bool(self.stream_bytes) and self.sizes.get(buffer, 0) >= self.stream_bytes

    uses_blas: bool = False

    def helper(self, name: str) -> None:
        self.helpers.setdefault(name, None)

    def helper_code(self) -> str:
        return "\n".join(dialect.HELPERS[name]() for name in self.helpers)


class CScalarContext:
    """The C implementation of :class:`~opgraph.backends.fused.lowering.ScalarContext` for one
    op inside one kernel."""

    def __init__(
        self,
        module: ModuleContext,
        inputs: tuple[ElementType, ...],
        output: ElementType,
        checks: list[Check],
        node: Node | None,
        flag: Callable[[str], None],
    ) -> None:
        self.module = module
        self._inputs = inputs
        self._output = output
        self._checks = checks
        self._node = node
        self._flag = flag
        self.calls = 0  # math calls and helpers used: a cost hint

    @property
    def inputs(self) -> tuple[ElementType, ...]:
        return self._inputs

    @property
    def output(self) -> ElementType:
        return self._output

    def math(self, name: str, *args: str) -> str:
        return self.math_in(name, self._output, *args)

    def math_in(self, name: str, t: ElementType, *args: str) -> str:
        self.module.math.add((name, t))
        self.calls += name not in ("fabs", "sqrt")
        return dialect.math_call(name, t, *args)

    def literal(self, value: bool | int | float, t: ElementType | None = None) -> str:
        return dialect.literal(value, t or self._output)

    def ctype(self, t: ElementType | None = None) -> str:
        return dialect.compute_type(t or self._output)

    def helper(self, name: str) -> None:
        self.calls += 1
        self.module.helper(name)

    def check(self, condition: str, message: str) -> None:
        key = Check(self._node, message)
        if key not in self._checks:
            self._checks.append(key)
        bit = self._checks.index(key)
        self._flag(f"err |= {condition} ? {1 << bit} : 0;")
