"""Control flow, made static: If (the taken branch when the condition is an import-time
constant, else both branches and a Select when their results agree in type), Loop and Scan
unrolled (trip counts and termination conditions must be import-time constants; every
iteration counts against ``import_model(max_unroll=)``), and the Optional ops on tensors (an
empty optional is an omitted value)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.literals import constant
from opgraph.core.node import Output
from opgraph.core.shape import static_dim
from opgraph.frontends.onnx.context import NodeContext, constant_value
from opgraph.frontends.onnx.converters.common import axis_of, expand_to
from opgraph.frontends.onnx.registry import onnx_op


def _subgraph(ctx: NodeContext, name: str) -> Any:
    graph = ctx.attr(name)
    if graph is None:
        raise ctx.fail(f"missing the {name} subgraph")
    return graph


def _run_body(ctx: NodeContext, graph: Any, values: Sequence[Output | None]) -> list[Output]:
    """Convert ``graph`` once, binding its formal inputs to ``values``."""
    names = [i.name for i in graph.input]
    if len(values) < len(names):
        raise ctx.fail(f"subgraph {graph.name!r} has {len(names)} inputs, got {len(values)}")
    bindings = {n: v for n, v in zip(names, values, strict=False) if v is not None}
    outputs: list[Output] = ctx.importer.convert_subgraph(graph, ctx.graph, bindings)
    return outputs


# --------------------------------------------------------------------------------------- If


@onnx_op("If", since=1)
def _if(ctx: NodeContext) -> list[Output]:
    condition = constant_value(ctx.input(0))
    then_graph, else_graph = _subgraph(ctx, "then_branch"), _subgraph(ctx, "else_branch")
    if condition is not None:
        taken = then_graph if bool(np.asarray(condition).reshape(-1)[0]) else else_graph
        return _run_body(ctx, taken, [])
    then_values = _run_body(ctx, then_graph, [])
    else_values = _run_body(ctx, else_graph, [])
    mask = ops.reshape(ctx.input(0), [])
    results = []
    for a, b in zip(then_values, else_values, strict=True):
        if a.type != b.type:  # the condition decides the type: needed at import time
            ctx.const(0, f"cond (the branches give different types, {a.type} vs {b.type})")
        chosen = expand_to(mask, a.rank, [], a.shape) if a.rank else mask
        results.append(ops.select(chosen, a, b))
    return results


# ------------------------------------------------------------------------------------- Loop


@onnx_op("Loop", since=1)
def _loop(ctx: NodeContext) -> list[Output | None]:
    body = _subgraph(ctx, "body")
    trip = ctx.optional(0)
    limit = None if trip is None else int(ctx.const(0, "M (trip count)").reshape(-1)[0])
    running = True
    if ctx.optional(1) is not None:
        running = bool(ctx.const(1, "cond").reshape(-1)[0])
    if limit is None and ctx.optional(1) is None:
        raise ctx.fail("an infinite loop (neither trip count nor condition)")
    carried: list[Output | None] = list(ctx.inputs[2:])
    scan_count = len(body.output) - 1 - len(carried)
    scans: list[list[Output]] = [[] for _ in range(scan_count)]
    iteration = 0
    while running and (limit is None or iteration < limit):
        ctx.importer.unroll(ctx.where, 1)
        step = constant(np.array(iteration, dtype=np.int64))
        outputs = _run_body(ctx, body, [step, constant(np.array(True)), *carried])
        running = _still_running(ctx, outputs[0])
        carried = list(outputs[1 : 1 + len(carried)])
        for bucket, value in zip(scans, outputs[1 + len(carried) :], strict=True):
            bucket.append(value)
        iteration += 1
    if scan_count and not iteration:
        raise ctx.fail("a loop that runs zero times cannot give scan outputs (their shapes)")
    return [*carried, *(ops.stack(bucket, 0) for bucket in scans)]


def _still_running(ctx: NodeContext, condition: Output) -> bool:
    value = constant_value(condition)
    if value is None:
        raise ctx.fail("the loop condition must be computable at import time to unroll it")
    return bool(np.asarray(value).reshape(-1)[0])


# ------------------------------------------------------------------------------------- Scan


@onnx_op("Scan", since=9)
def _scan(ctx: NodeContext) -> list[Output]:
    body = _subgraph(ctx, "body")
    count = int(ctx.attr("num_scan_inputs"))
    states: list[Output] = [ctx.input(i) for i in range(len(ctx.inputs) - count)]
    sequences = [ctx.input(i) for i in range(len(states), len(ctx.inputs))]
    in_axes = _per(ctx, "scan_input_axes", count, [s.rank for s in sequences])
    in_reverse = _per(ctx, "scan_input_directions", count, None)
    length = static_dim(sequences[0].shape[in_axes[0]], "Scan's unrolled sequence length")
    ctx.importer.unroll(ctx.where, length)
    slices = [
        _steps(s, a, length, bool(r))
        for s, a, r in zip(sequences, in_axes, in_reverse, strict=True)
    ]
    states, scanned = _unroll(ctx, body, states, slices, length)
    out_count = len(body.output) - len(states)
    out_ranks = [v[0].rank + 1 for v in scanned] if length else [1] * out_count
    out_axes = _per(ctx, "scan_output_axes", out_count, out_ranks)
    out_reverse = _per(ctx, "scan_output_directions", out_count, None)
    results = [
        ops.stack(values[::-1] if reverse else values, axis)
        for values, axis, reverse in zip(scanned, out_axes, out_reverse, strict=True)
    ]
    return [*states, *results]


@onnx_op("Scan", since=8)
def _scan_v8(ctx: NodeContext) -> list[Output]:
    """Scan-8: a leading batch axis on every input, the sequence on axis 1; the body runs per
    batch entry (sequence_lens, input 0, must be omitted or full length)."""
    body = _subgraph(ctx, "body")
    count = int(ctx.attr("num_scan_inputs"))
    inputs = [ctx.input(i) for i in range(1, len(ctx.inputs))]
    states_in, sequences = inputs[: len(inputs) - count], inputs[len(inputs) - count :]
    reverse = _per(ctx, "directions", count, None)
    what = "Scan-8's unrolled batch and sequence length"
    batch, length = (static_dim(d, what) for d in sequences[0].shape[:2])
    ctx.importer.unroll(ctx.where, batch * length)
    per_batch_states: list[list[Output]] = []
    per_batch_scans: list[list[Output]] = []
    for b in range(batch):
        states = [_index(s, 0, b) for s in states_in]
        slices = [
            _steps(_index(s, 0, b), 0, length, bool(r))
            for s, r in zip(sequences, reverse, strict=True)
        ]
        states, scanned = _unroll(ctx, body, states, slices, length)
        per_batch_states.append(states)
        per_batch_scans.append([ops.stack(v, 0) for v in scanned])
    columns = zip(*per_batch_states, strict=True), zip(*per_batch_scans, strict=True)
    return [ops.stack(list(values), 0) for group in columns for values in group]


def _unroll(
    ctx: NodeContext, body: Any, states: list[Output], slices: list[list[Output]], length: int
) -> tuple[list[Output], list[list[Output]]]:
    scanned: list[list[Output]] = []
    for t in range(length):
        outputs = _run_body(ctx, body, [*states, *(s[t] for s in slices)])
        states = outputs[: len(states)]
        extra = outputs[len(states) :]
        scanned = scanned if scanned else [[] for _ in extra]
        for bucket, value in zip(scanned, extra, strict=True):
            bucket.append(value)
    return states, scanned


def _per(ctx: NodeContext, name: str, count: int, ranks: list[int] | None) -> list[int]:
    values = [int(v) for v in ctx.attr(name, [0] * count)]
    if ranks is not None:
        values = [axis_of(v, r) for v, r in zip(values, ranks, strict=True)]
    return values


def _steps(x: Output, axis: int, length: int, reverse: bool) -> list[Output]:
    """The slices of ``x`` along ``axis`` (that axis removed), in scan order."""
    steps = [_index(x, axis, t) for t in range(length)]
    return steps[::-1] if reverse else steps


def _index(x: Output, axis: int, position: int) -> Output:
    return ops.gather(x, constant(np.array(position, dtype=np.int64)), axis=axis)


# --------------------------------------------------------------------------------- Optional


@onnx_op("Optional", since=15)
def _optional(ctx: NodeContext) -> list[Output | None]:
    return [ctx.optional(0)]


@onnx_op("OptionalHasElement", since=15)
def _optional_has_element(ctx: NodeContext) -> Output:
    return constant(np.array(ctx.optional(0) is not None), et.boolean)


@onnx_op("OptionalGetElement", since=15)
def _optional_get_element(ctx: NodeContext) -> Output:
    value = ctx.optional(0)
    if value is None:
        raise ctx.fail("the optional is empty")
    return value
