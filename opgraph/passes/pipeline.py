"""The default optimization pipeline (what the CPU backend runs before lowering)."""

from __future__ import annotations

import functools
from pathlib import Path

from opgraph.core.errors import GraphError
from opgraph.core.function import Function
from opgraph.core.tensor_type import TupleType
from opgraph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from opgraph.passes.eliminate_dead_code import eliminate_dead_code
from opgraph.passes.eliminate_nops import eliminate_nops
from opgraph.passes.eliminate_reshapes import eliminate_reshapes
from opgraph.passes.fold_constants import DEFAULT_MAX_ELEMENTS, fold_constants
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.manager import Pass, PassManager
from opgraph.passes.simplify_algebra import simplify_algebra
from opgraph.passes.unbox_tuples import unbox_tuples

__all__ = ["LOWERING_PASSES", "OPTIMIZATION_PASSES", "optimize"]

#: Run once, first: calls and tuples are gone afterwards, so every later pass sees one graph.
LOWERING_PASSES: tuple[Pass, ...] = (inline_calls, unbox_tuples)

#: One round of the optimization; rounds repeat until a round changes nothing, because each
#: pass can expose work for an earlier one (a fold makes an ``x * 1``, CSE makes an ``x - x``).
OPTIMIZATION_PASSES: tuple[Pass, ...] = (
    fold_constants,
    simplify_algebra,
    eliminate_nops,
    eliminate_reshapes,
    eliminate_common_subexpressions,
    eliminate_dead_code,
)


def optimize(
    fn: Function,
    max_rounds: int = 8,
    max_fold_elements: int = DEFAULT_MAX_ELEMENTS,
    verify: bool = False,
    trace_dir: str | Path | None = None,
) -> Function:
    """The default optimization pipeline.

    First ``inline_calls`` then ``unbox_tuples`` (once; the latter only when there are tuple
    values), then rounds of ``fold_constants``,
    ``simplify_algebra``, ``eliminate_nops``, ``eliminate_reshapes``,
    ``eliminate_common_subexpressions`` and ``eliminate_dead_code`` until a round leaves the
    graph unchanged (every pass returns its input itself when it changes nothing) or
    ``max_rounds`` rounds ran. Framework-level ops are not decomposed and nothing is fused:
    those choices belong to the backend.

    Needs: nothing. Guarantees: no Call, no tuple value; the passes' own guarantees hold at the
    fixed point; numerics unchanged within the passes' documented floating-point fine print.

    Args:
        fn: the Function (not modified).
        max_rounds: the most optimization rounds.
        max_fold_elements: the largest constant folding may create (see ``fold_constants``).
        verify: re-check every node's type after every pass (see ``PassManager``).
        trace_dir: write the graph after every pass (``round_N/NNN_<pass>.txt`` and ``.dot``).

    Returns:
        The optimized Function.

    Raises:
        GraphError: ``max_rounds`` is not a positive int.
    """
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise GraphError(f"optimize: max_rounds must be a positive int, got {max_rounds!r}")
    trace = Path(trace_dir) if trace_dir is not None else None
    if _has_tuples(fn):  # unbox_tuples always rebuilds; skipping it keeps fixed points ``is``
        lowering = PassManager(LOWERING_PASSES, verify=verify, trace_dir=_sub(trace, "lowering"))
    else:
        lowering = PassManager([inline_calls], verify=verify, trace_dir=_sub(trace, "lowering"))
    fn = lowering.run(fn)
    passes: list[Pass] = [
        functools.partial(fold_constants, max_elements=max_fold_elements),
        *OPTIMIZATION_PASSES[1:],
    ]
    for round_number in range(1, max_rounds + 1):
        manager = PassManager(passes, verify=verify, trace_dir=_sub(trace, f"round_{round_number}"))
        optimized = manager.run(fn)
        if optimized is fn:
            break
        fn = optimized
    return fn


def _has_tuples(fn: Function) -> bool:
    return any(isinstance(t, TupleType) for node in fn.nodes for t in node.output_types)


def _sub(trace: Path | None, name: str) -> Path | None:
    return None if trace is None else trace / name
