"""The INTERPRETER backend: lower, then walk nodes calling one numpy kernel per op.

Every value gets a fresh array; nothing is shared between calls, so one Executable may run on
several threads at once. Each kernel's result is checked against the node's inferred type.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.dim import free_symbols
from opgraph.core.errors import (
    CallTypeError,
    ExecutionError,
    OpgraphError,
    OpTypeError,
    UnsupportedOpError,
)
from opgraph.core.function import Function
from opgraph.core.literals import Constant, Parameter
from opgraph.core.node import Node, Output
from opgraph.core.printing import format_node, value_names
from opgraph.core.tensor_type import TensorType, flatten_types
from opgraph.passes.decompose import decompose
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.specialize_shapes import (
    is_symbolic,
    specialize_op,
    specialize_shapes,
    specialize_type,
)
from opgraph.passes.unbox_tuples import unbox_tuples
from opgraph.runtime.backend import Backend, Executable, argument_tensors
from opgraph.runtime.binding import Binding, bind_node_result, node_symbols
from opgraph.runtime.cache import LruCache
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import validate_call


def lower_for_interpreter(fn: Function) -> Function:
    """The lowering every reference run needs: calls inlined, tuples unboxed, framework-level
    ops decomposed unless a kernel exists for them."""
    fn = unbox_tuples(inline_calls(fn))
    return decompose(fn, is_supported=lambda op: type(op) in KERNELS)


class InterpreterBackend(Backend):
    """The reference backend."""

    name = "INTERPRETER"

    def compile(self, function: Function, profile: bool = False) -> InterpreterExecutable:
        if node_symbols(function):
            return DataDependentExecutable(function, profile)
        if is_symbolic(function):
            return SymbolicExecutable(function, profile)
        return InterpreterExecutable(function, _lowered(function), profile)


def _lowered(function: Function) -> Function:
    lowered = lower_for_interpreter(function)
    missing = sorted(
        {
            n.op.name
            for n in lowered.ops
            if type(n.op) not in KERNELS and not isinstance(n.op, Constant)
        }
    )
    if missing:
        raise UnsupportedOpError(
            f"INTERPRETER has no kernel for: {', '.join(missing)} (in {function.name})"
        )
    return lowered


class InterpreterExecutable(Executable):
    """A lowered Function walked node by node."""

    def __init__(self, function: Function, lowered: Function, profile: bool) -> None:
        super().__init__(function, profile)
        self.lowered = lowered
        self._steps = [n for n in lowered.nodes if not isinstance(n.op, Parameter)]
        self._names = value_names(lowered)

    def _run(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        values = self.evaluate([t.buffer for t in inputs])
        for tensor, result in zip(outputs, values, strict=True):
            np.copyto(tensor.buffer, result)

    def evaluate(self, arguments: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run on arrays; returns the (possibly shared, read-only intent) result arrays."""
        env: dict[Output, np.ndarray] = dict(zip(self.lowered.parameters, arguments, strict=True))
        with np.errstate(all="ignore"):
            for node in self._steps:
                self._execute(node, env)
        return [env[r] for r in self.lowered.results]

    def _execute(self, node: Node, env: dict[Output, np.ndarray]) -> None:
        started = time.perf_counter() if self.profile else 0.0
        try:
            result = _run_kernel(node, [env[i] for i in node.inputs])
        except (OpgraphError, ArithmeticError, ValueError, TypeError, IndexError) as error:
            raise ExecutionError(
                f"while executing {format_node(node, self._names)} (built at "
                f"{node.provenance}): {error}"
            ) from error
        env.update(zip(node.outputs, result, strict=True))
        if self.profile:
            self._record(format_node(node, self._names), time.perf_counter() - started)


def _run_kernel(node: Node, args: list[np.ndarray]) -> list[np.ndarray]:
    op = node.op
    if isinstance(op, Constant):
        return [op.value]
    raw: Any = KERNELS[type(op)](op, *args)
    results = list(raw) if isinstance(raw, tuple | list) else [raw]
    return [
        _checked(np.asarray(r), t, i)
        for i, (r, t) in enumerate(zip(results, node.output_types, strict=True))
    ]


def _checked(result: np.ndarray, expected: Any, index: int) -> np.ndarray:
    assert isinstance(expected, TensorType)
    if result.dtype != expected.element_type.dtype or result.shape != expected.shape:
        raise ExecutionError(
            f"kernel output {index} is {result.dtype}{list(result.shape)}, the type rule says "
            f"{expected} (a kernel bug)"
        )
    return result


def run_node(
    node: Node, arguments: Sequence[np.ndarray], binding: Binding, where: str
) -> list[np.ndarray]:
    """``node``'s reference kernel on ``arguments`` at ``binding`` (symbolic sizes allowed):
    the symbols the node binds are bound from its results' shapes into ``binding``, and each
    result is checked against its type at the binding.

    Raises:
        ExecutionError: the kernel failed or returned what the type rule does not say, worded
            "while executing ``where``".
    """
    try:
        op = node.op if isinstance(node.op, Constant) else specialize_op(node.op, binding)
        with np.errstate(all="ignore"):
            raw: Any = op.value if isinstance(op, Constant) else KERNELS[type(op)](op, *arguments)
    except (OpgraphError, ArithmeticError, ValueError, TypeError, IndexError) as error:
        raise ExecutionError(f"while executing {where}: {error}") from error
    results = list(raw) if isinstance(raw, tuple | list) else [raw]
    bound = node.op.bound_symbols()
    for r, t in zip(results, node.output_types, strict=True):
        assert isinstance(t, TensorType)
        if bound:
            bind_node_result(binding, bound, t, np.shape(r), where)
    checked = []
    for i, (r, t) in enumerate(zip(results, node.output_types, strict=True)):
        try:
            checked.append(_checked(np.asarray(r), specialize_type(t, binding), i))
        except ExecutionError as error:
            raise ExecutionError(f"while executing {where}: {error}") from None
    return checked


class SymbolicExecutable(InterpreterExecutable):
    """A Function with symbolic dimensions. Each call binds the symbols from the argument
    shapes, specialises the Function to that binding (every type rule re-checked for those
    values) and runs the static walk; the last ``CACHE_SIZE`` bindings' walks are kept."""

    CACHE_SIZE = 16

    def __init__(self, function: Function, profile: bool) -> None:
        Executable.__init__(self, function, profile)
        self.lowered = function
        self._steps = []
        self._names = value_names(function)
        self._cache: LruCache[tuple[tuple[str, int], ...], InterpreterExecutable] = LruCache(
            self.CACHE_SIZE
        )

    def specialized(self, binding: Mapping[str, int]) -> InterpreterExecutable:
        """The static executable for ``binding`` (cached).

        Raises:
            CallTypeError: a type rule rejects these values (a slice past the bound axis…).
        """
        return self._cache.get_or_make(
            tuple(sorted(binding.items())), lambda: self._specialise(binding)
        )

    def _specialise(self, binding: Mapping[str, int]) -> InterpreterExecutable:
        try:
            static = specialize_shapes(self.function, binding)
        except OpTypeError as error:
            raise CallTypeError(str(error)) from None
        exe = InterpreterExecutable(static, _lowered(static), self.profile)
        exe._counters, exe._counter_lock = self._counters, self._counter_lock
        return exe

    def evaluate(self, arguments: Sequence[np.ndarray]) -> list[np.ndarray]:
        binding = self.bind([a.shape for a in arguments])
        return self.specialized(binding).evaluate(arguments)


def _after_binders(steps: list[Node]) -> list[Node]:
    """``steps`` reordered so that a node whose types use a data-dependent symbol runs after
    the node that binds it (a Broadcast of a Constant to a ``non_zero`` count depends on that
    node through its shape only, so the topological order may put it first)."""
    binders = {s.name: n for n in steps for s in n.op.bound_symbols()}
    if not binders:
        return steps
    members = set(steps)
    needs = {
        n: [i.node for i in n.inputs if i.node in members]
        + [
            binders[s.name]
            for s in free_symbols(d for t in flatten_types(n.output_types) for d in t.shape)
            if s.name in binders and binders[s.name] is not n
        ]
        for n in steps
    }
    order: list[Node] = []
    done: set[Node] = set()
    pending = steps
    while pending:
        rest = []
        for node in pending:
            if all(m in done for m in needs[node]):
                order.append(node)
                done.add(node)
            else:
                rest.append(node)
        if len(rest) == len(pending):  # a cycle through shapes: keep the given order
            return order + rest
        pending = rest
    return order


class DataDependentExecutable(InterpreterExecutable):
    """A Function with nodes whose output sizes their input values decide (``non_zero``).

    The symbolic Function is lowered once; each call binds the argument symbols, then walks
    the nodes, each op's dimension attributes evaluated under the binding so far; a node that
    binds data-dependent symbols (``Op.bound_symbols``) adds them from its result's shape
    (checked against their bounds). Every result is checked against its type evaluated under
    the binding. Result shapes are known only after the run: ``call`` runs into fresh arrays,
    then checks the caller's result tensors and copies, so nothing is written on an error.
    """

    def __init__(self, function: Function, profile: bool) -> None:
        super().__init__(function, _lowered(function), profile)
        self._bound = tuple(node_symbols(self.lowered).values())
        self._steps = _after_binders(self._steps)

    def evaluate(self, arguments: Sequence[np.ndarray]) -> list[np.ndarray]:
        binding: Binding = dict(self.bind([a.shape for a in arguments]))
        env: dict[Output, np.ndarray] = dict(zip(self.lowered.parameters, arguments, strict=True))
        with np.errstate(all="ignore"):
            for node in self._steps:
                self._execute_bound(node, env, binding)
        return [env[r] for r in self.lowered.results]

    def _execute_bound(self, node: Node, env: dict[Output, np.ndarray], binding: Binding) -> None:
        started = time.perf_counter() if self.profile else 0.0
        where = f"{format_node(node, self._names)} (built at {node.provenance})"
        results = run_node(node, [env[i] for i in node.inputs], binding, where)
        env.update(zip(node.outputs, results, strict=True))
        if self.profile:
            self._record(format_node(node, self._names), time.perf_counter() - started)

    def call(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        parameter_types = (
            self.parameter_types if self.binder is None else self.bound_types(outputs, inputs)[0]
        )
        values = self.evaluate([t.buffer for t in inputs])
        result_types = [
            TensorType(t.element_type, v.shape)
            for t, v in zip(self.result_types, values, strict=True)
        ]
        validate_call(outputs, inputs, result_types, parameter_types, self.function.name)
        for tensor, result in zip(outputs, values, strict=True):
            np.copyto(tensor.buffer, result)

    def _call_arrays(self, *arrays: Any) -> list[np.ndarray]:
        inputs = argument_tensors(self.function.name, arrays, self.parameter_types, self.binder)
        values = self.evaluate([t.buffer for t in inputs])
        return [np.array(v, copy=True) for v in values]
