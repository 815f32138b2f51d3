"""What rendering one CUDA kernel collects: the helpers it calls and its run-time checks."""

from __future__ import annotations

from dataclasses import dataclass, field

from opgraph.backends.fused.loops import Check
from opgraph.core.element_type import ElementType

#: Bits of the ``int`` error word: a kernel with more distinct checks is refused.
MAX_CHECKS = 31


@dataclass
class KernelState:
    """What rendering one kernel collected: helper names (in first-use order) and checks."""

    helpers: dict[str, None] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def helper(self, name: str) -> None:
        self.helpers.setdefault(name, None)

    def use_math(self, name: str, t: ElementType) -> None:
        """CUDA's math functions need no declaration."""
