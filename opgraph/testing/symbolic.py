"""Symbolic variants of op records: one Function with symbolic input dimensions, and two
bindings of its symbols, for running a record "at two bindings of one compile".

A record's input dimensions are made symbolic by value: a chosen dimension equal to ``v``
becomes the symbol ``d{v}`` (so dimensions that must agree still agree); an input's fixed values
are repeated (``np.resize``) to fill a larger binding. The first scheme whose Function builds
wins: every dimension; every dimension but those of size 1 (a size-1 axis is often meant:
squeezed, broadcast); the values of the first input's leading dimension; those of its last
dimension; the leading axis of each input whose leading size is the first input's (a batch
axis: sizes derived from the other axes, a strided convolution's output, stay static). The first
binding gives every symbol its recorded value; the second the first of ``v + 1``, ``v + 2``,
``2v + 1`` for which every type rule accepts the values (checked by specialising the Function).
A record without any dimension (scalar inputs only) has nothing to make symbolic:
:func:`has_dimensions` tells the test table to skip it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

import numpy as np

from opgraph.core.dim import dim, evaluate, free_symbols
from opgraph.core.element_type import ElementType
from opgraph.core.errors import OpTypeError
from opgraph.core.function import Function
from opgraph.core.literals import parameter
from opgraph.core.node import Output
from opgraph.passes.specialize_shapes import specialize_shapes
from opgraph.testing.records.base import In, OpRecord, make_array


@dataclass(frozen=True)
class SymbolicCase:
    """A record's symbolic Function and two valid bindings of its symbols."""

    record: OpRecord
    function: Function
    scheme: str
    bindings: tuple[dict[str, int], dict[str, int]]

    def arguments(self, element_type: ElementType, binding: Mapping[str, int]) -> list[np.ndarray]:
        """Input arrays of the bound shapes (the recorded values at the recorded binding)."""
        key = f"{self.record.name}/{element_type.name}/{sorted(binding.items())}"
        rng = np.random.default_rng(zlib.crc32(key.encode()))
        arrays = []
        for spec, p in zip(self.record.inputs, self.function.parameter_types, strict=True):
            shape = tuple(int(evaluate(d, binding)) for d in p.shape)
            values = spec.values
            if values is not None and shape != spec.shape:  # fixed values repeated to fit
                values = np.resize(np.asarray(values).reshape(spec.shape), shape)
            sized = replace(spec, shape=shape, values=values)
            arrays.append(make_array(sized, spec.element_type or element_type, rng))
        return arrays


#: Whether a scheme makes ``value``, at ``axis`` of ``spec``, symbolic.
Chooser = Callable[[In, int, int], bool]


def _schemes(record: OpRecord) -> Iterator[tuple[str, Chooser]]:
    yield "every dimension", lambda spec, axis, v: True
    yield "every dimension but size 1", lambda spec, axis, v: v != 1
    first = next((i.shape for i in record.inputs if i.shape and i.values is None), None)
    if first:
        lead, last = first[0], first[-1]
        yield "leading dimension", lambda spec, axis, v: v == lead
        yield "last dimension", lambda spec, axis, v: v == last
        yield "leading axis", lambda spec, axis, v: axis == 0 and v == lead


def _symbolic_shape(spec: In, choose: Chooser) -> tuple[object, ...]:
    return tuple(dim(f"d{v}") if choose(spec, a, v) else v for a, v in enumerate(spec.shape))


def has_dimensions(record: OpRecord) -> bool:
    """Whether some input of ``record`` has a dimension (scalars only: nothing to make
    symbolic, so no symbolic case exists whatever the op)."""
    return any(i.shape for i in record.inputs)


def symbolic_case(record: OpRecord, element_type: ElementType) -> SymbolicCase | None:
    """The record's symbolic variant, or None when no scheme builds (the op needs static
    sizes there: a static reshape target, a size used as a value…)."""
    for scheme, choose in _schemes(record):
        try:
            params = [
                parameter(i.element_type or element_type, _symbolic_shape(i, choose), f"x{k}")
                for k, i in enumerate(record.inputs)
            ]
            results = record.build(*params)
        except OpTypeError:
            continue
        outputs = [results] if isinstance(results, Output) else list(results)
        fn = Function(outputs, params, name=f"{record.name}_symbolic")
        values = sorted(
            {int(s.name[1:]) for t in fn.parameter_types for s in free_symbols(t.shape)}
        )
        if not values:
            continue
        first = {f"d{v}": v for v in values}
        for step in (lambda v: v + 1, lambda v: v + 2, lambda v: 2 * v + 1):
            second = {f"d{v}": step(v) for v in values}
            try:
                specialize_shapes(fn, second)
            except OpTypeError:
                continue
            return SymbolicCase(record, fn, scheme, (first, second))
    return None
