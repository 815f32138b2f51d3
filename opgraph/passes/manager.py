"""PassManager: run passes in order, verify the graph between them, time and trace them."""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from opgraph.core.errors import GraphError, OpgraphError
from opgraph.core.function import Function
from opgraph.core.printing import format_node, value_names
from opgraph.visualize import to_dot

__all__ = ["Pass", "PassManager", "PassTiming", "pass_name", "verify_function"]

log = logging.getLogger("opgraph.passes")

#: A pass: a pure function from a Function to a Function.
Pass = Callable[[Function], Function]


class PassTiming(NamedTuple):
    """One pass run: its name, wall-clock seconds and the node counts around it."""

    name: str
    seconds: float
    nodes_before: int
    nodes_after: int


def pass_name(p: Pass) -> str:
    """A pass's name: its ``__name__`` (seen through ``functools.partial``)."""
    while isinstance(p, functools.partial):
        p = p.func
    return str(getattr(p, "__name__", type(p).__name__))


class PassManager:
    """Runs passes in order, re-validating the graph after each one.

    Args:
        passes: the passes, each a callable ``Function -> Function`` (use ``functools.partial``
            to bind a pass's options).
        verify: after every pass, check the result with :func:`verify_function` and check that
            the pass kept the parameter types and the (flattened) result types.
        trace_dir: when given, write ``NNN_<pass>.txt`` (the printed Function) and
            ``NNN_<pass>.dot`` (Graphviz) after every pass into this folder (created if
            needed); ``000_input`` is the Function before the first pass.

    Attributes:
        timings: one :class:`PassTiming` per pass of the last :meth:`run`.

    Example:
        >>> manager = PassManager([fold_constants, eliminate_dead_code], trace_dir="trace")
        >>> optimized = manager.run(fn)
        >>> manager.timings[0].name
        'fold_constants'

    Raises:
        GraphError: a pass is not callable.
    """

    def __init__(
        self,
        passes: Sequence[Pass],
        verify: bool = True,
        trace_dir: str | Path | None = None,
    ) -> None:
        passes = list(passes)
        for i, p in enumerate(passes):
            if not callable(p):
                raise GraphError(
                    f"PassManager: pass {i} must be a callable Function -> Function, "
                    f"got {type(p).__name__} {p!r:.60}"
                )
        self.passes: tuple[Pass, ...] = tuple(passes)
        self.verify = verify
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        self.timings: list[PassTiming] = []

    def run(self, fn: Function) -> Function:
        """Run every pass on ``fn`` (which is not modified) and return the result.

        Raises:
            GraphError: ``fn`` is not a Function, a pass returned something else, changed the
                Function's signature, or left a node whose type no longer re-infers.
        """
        if not isinstance(fn, Function):
            raise GraphError(f"PassManager.run: expected a Function, got {type(fn).__name__}")
        self.timings = []
        self._trace(0, "input", fn)
        for position, p in enumerate(self.passes, start=1):
            name = pass_name(p)
            started = time.perf_counter()
            try:
                result = p(fn)
            except OpgraphError as error:
                error.add_note(f"in pass {position} ({name}) of the PassManager, on {fn.name}")
                raise
            seconds = time.perf_counter() - started
            if not isinstance(result, Function):
                raise GraphError(
                    f"PassManager: pass {position} ({name}) returned {type(result).__name__}, "
                    "expected a Function"
                )
            if self.verify:
                _check_signature(fn, result, f"pass {position} ({name})")
                verify_function(result, f"after pass {position} ({name})")
            self.timings.append(PassTiming(name, seconds, len(fn.nodes), len(result.nodes)))
            log.debug(
                "pass %s on %s: %d -> %d nodes in %.2f ms",
                name,
                fn.name,
                len(fn.nodes),
                len(result.nodes),
                seconds * 1e3,
            )
            self._trace(position, name, result)
            fn = result
        self._log_summary(fn)
        return fn

    def _log_summary(self, fn: Function) -> None:
        if not self.timings or not log.isEnabledFor(logging.INFO):
            return
        total = sum(t.seconds for t in self.timings)
        log.info(
            "%d pass(es) on %s: %d -> %d nodes in %.2f ms",
            len(self.timings),
            fn.name,
            self.timings[0].nodes_before,
            self.timings[-1].nodes_after,
            total * 1e3,
        )

    def _trace(self, position: int, name: str, fn: Function) -> None:
        if self.trace_dir is None:
            return

        self.trace_dir.mkdir(parents=True, exist_ok=True)
        stem = f"{position:03d}_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}"
        (self.trace_dir / f"{stem}.txt").write_text(str(fn) + "\n")
        (self.trace_dir / f"{stem}.dot").write_text(to_dot(fn))


def _check_signature(before: Function, after: Function, where: str) -> None:
    if after.parameter_types != before.parameter_types:
        raise GraphError(
            f"PassManager: {where} changed the parameter types of {before.name} from "
            f"{_types(before.parameter_types)} to {_types(after.parameter_types)}"
        )
    if after.flat_result_types != before.flat_result_types:
        raise GraphError(
            f"PassManager: {where} changed the result types of {before.name} from "
            f"{_types(before.flat_result_types)} to {_types(after.flat_result_types)}"
        )


def _types(types: Sequence[object]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def verify_function(fn: Function, where: str = "") -> None:
    """Re-run every node's type rule and compare with the types it carries.

    Nodes are immutable and built type-checked, so this guards against ops whose rules are not
    deterministic and against nodes assembled by hand; :class:`Function` construction already
    checked the parameters (none listed twice, every reachable one declared).

    Raises:
        GraphError: a node's type rule fails or gives another type (the message prints the
            node and ``where``).
    """
    names = value_names(fn)
    suffix = f" {where}" if where else ""
    for node in fn.nodes:
        types = tuple(i.type for i in node.inputs)
        try:
            op = node.op.canonicalize(*types)
            inferred = op.infer(*types)
        except OpgraphError as error:
            raise GraphError(
                f"verify{suffix}: {format_node(node, names)} (built at {node.provenance}) no "
                f"longer type-checks: {error}"
            ) from error
        got = inferred if isinstance(inferred, tuple) else (inferred,)
        if got != node.output_types:
            raise GraphError(
                f"verify{suffix}: {format_node(node, names)} (built at {node.provenance}) "
                f"re-infers as {_types(got)}"
            )
