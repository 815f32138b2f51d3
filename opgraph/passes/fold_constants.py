"""Constant folding: evaluate ops whose inputs are all constant with the reference kernels."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from opgraph.core.errors import GraphError, OpgraphError, OpTypeError
from opgraph.core.function import Function
from opgraph.core.kernels import REFERENCE_KERNELS
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Node, Output
from opgraph.core.tensor_type import TensorType
from opgraph.ops.elementwise import BinaryElementwise, Select, UnaryElementwise
from opgraph.ops.movement import Broadcast
from opgraph.passes._rewrite_nodes import rewrite_nodes
from opgraph.pattern.pattern import constant_value

__all__ = ["DEFAULT_MAX_ELEMENTS", "DEFAULT_MAX_WORK", "fold_constants"]

#: Folding never materializes a constant with more elements than this by default (4 MiB of
#: f32): a Broadcast of a scalar to 4096x4096 stays a Broadcast.
DEFAULT_MAX_ELEMENTS = 1 << 20

#: Folding one op never reads more than this many elements by default (see ``_work``): about
#: a tenth of a second of numpy. A reduction of a scalar broadcast to 10^6 x 10^6 is 10^12
#: elements of work for a one-element result, so it stays in the graph and runs (or fails) at
#: run time instead of keeping the compiler busy for hours.
DEFAULT_MAX_WORK = 1 << 24


#: Ops that compute element ``i`` of the output from element ``i`` of each input: folding them
#: on broadcast constants can work on the small sources and broadcast the result.
_ELEMENTWISE = (UnaryElementwise, BinaryElementwise, Select)


def fold_constants(
    fn: Function, max_elements: int = DEFAULT_MAX_ELEMENTS, max_work: int = DEFAULT_MAX_WORK
) -> Function:
    """Replace every op whose inputs are all constant by a Constant of its value.

    "Constant" inputs are Constants and Broadcasts of Constants (how ``x * 0.5`` spells a
    scalar). A Broadcast of a constant is itself kept as it is — it is the compact form — and an
    elementwise op whose inputs are equal Broadcasts is folded on the broadcast sources and
    broadcast again, so scalars stay scalars. Values are computed by the interpreter's reference
    kernels (``KERNELS``), so a folded graph computes bit-for-bit what the unfolded graph
    computes on the INTERPRETER.

    Needs: nothing. Guarantees: no op with a reference kernel has only constant inputs unless
    its result would have more than ``max_elements`` elements, folding it would read more than
    ``max_work`` elements, or its kernel fails on those inputs (e.g. an integer division by
    zero, left to raise at run time); numerics unchanged.

    Work is counted before the kernel runs: the elements of every input (a broadcast input
    counts its full broadcast shape, which the kernel reads) plus those of the results; for
    contractions and windowed ops (``Dot``, ``MatMul``, ``Gemm``, convolutions, pooling,
    recurrent cells, ``LRN``) the result's elements times the inputs' elements.

    Args:
        fn: the Function (not modified).
        max_elements: the largest constant, in elements, folding may create.
        max_work: the most elements folding one op may read (see above).

    Returns:
        The folded Function (``fn`` itself when nothing folds).

    Raises:
        GraphError: ``max_elements`` or ``max_work`` is not a non-negative int.
        OpTypeError: a user of a folded value rejects it (an integer division by a divisor that
            folds to a constant holding 0): the graph would fail at every run.
    """
    for name, value in (("max_elements", max_elements), ("max_work", max_work)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GraphError(f"fold_constants: {name} must be a non-negative int, got {value!r}")
    try:
        return rewrite_nodes(fn, functools.partial(_fold, max_elements, max_work))
    except OpTypeError as error:
        # Some type rules look at constant values (an integer divisor holding 0): a value
        # folding made constant can fail one. The graph would fail at every run anyway.
        error.add_note(f"fold_constants: a folded constant was rejected by its user in {fn.name}")
        raise


def _fold(
    max_elements: int, max_work: int, node: Node, inputs: tuple[Output, ...]
) -> Sequence[Output] | None:
    op = node.op
    if isinstance(op, Parameter | Constant | Broadcast) or not op.foldable:
        return None
    from_types = getattr(op, "value_from_types", None)  # ShapeOf: the types decide the value
    if from_types is not None:
        value = from_types(*(i.type for i in inputs))
        if value is not None:
            return [_constant(value, node.output_types[0], node)]
    kernel = REFERENCE_KERNELS.get(type(op))
    if kernel is None:
        return None
    arrays = [constant_value(i) for i in inputs]
    if any(a is None for a in arrays):
        return None
    if isinstance(op, _ELEMENTWISE):
        folded = _fold_broadcast_sources(node, inputs, kernel, max_elements, max_work)
        if folded is not None:
            return folded
    if not all(isinstance(t, TensorType) and t.is_static for t in node.output_types):
        return None  # a symbolic size: the value exists only once the symbols are bound
    if any(_elements(t) > max_elements for t in node.output_types):
        return None
    if _work(node, inputs) > max_work:
        return None
    values = _run(kernel, op, arrays)
    if values is None:
        return None
    return [_constant(v, t, node) for v, t in zip(values, node.output_types, strict=True)]


def _fold_broadcast_sources(
    node: Node, inputs: tuple[Output, ...], kernel: Any, max_elements: int, max_work: int
) -> Sequence[Output] | None:
    """``f(broadcast(a), broadcast(b))`` as ``broadcast(f(a, b))`` when the broadcasts agree."""
    ops = {i.op for i in inputs}
    if len(ops) != 1 or not all(isinstance(i.op, Broadcast) for i in inputs):
        return None
    (broadcast,) = ops
    sources = [i.node.inputs[0] for i in inputs]
    source_type = sources[0].tensor_type
    elements = _elements(source_type)
    if elements > max_elements or elements * (len(inputs) + 1) > max_work:
        return None
    arrays = [constant_value(s) for s in sources]
    values = _run(kernel, node.op, arrays)
    if values is None:
        return None
    result_type = node.output_types[0]
    assert isinstance(result_type, TensorType)
    folded = _constant(values[0], TensorType(result_type.element_type, source_type.shape), node)
    return [broadcast.build(folded, name=node.name, provenance=node.provenance).outputs[0]]


def _run(kernel: Any, op: Any, arrays: Sequence[Any]) -> list[np.ndarray] | None:
    try:
        with np.errstate(all="ignore"):
            raw = kernel(op, *arrays)  # broadcast views are read, never copied
    except (OpgraphError, ArithmeticError, ValueError, TypeError, IndexError):
        return None  # e.g. an integer division by zero: leave it to fail at run time
    return [np.asarray(r) for r in (raw if isinstance(raw, tuple | list) else (raw,))]


def _constant(value: np.ndarray, t: Any, node: Node) -> Output:
    assert isinstance(t, TensorType)
    built = Constant(t.element_type, value.shape, value).build(provenance=node.provenance)
    return built.outputs[0]


def _work(node: Node, inputs: tuple[Output, ...]) -> int:
    """An upper bound on the elements folding ``node`` reads (see ``fold_constants``)."""
    read = sum(_elements(i.type) for i in inputs)
    written = sum(_elements(t) for t in node.output_types)
    if node.op.contracting:  # e.g. Dot of [m, k] by [k, n]: m*n*k multiply-adds, an upper bound
        return written * max(read, 1) + read
    return read + written


def _elements(t: Any) -> int:
    return t.size if isinstance(t, TensorType) else 0
