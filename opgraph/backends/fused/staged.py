"""Staged execution of a Function with data-dependent nodes (``non_zero``, ``unique``,
``compress``, shape-tensor ops, ONNX run-time nodes…: ops whose ``bound_symbols()`` is not
empty; ``docs/dynamic-shapes.md``, "Backends").

The Function is lowered once (calls inlined, tuples unboxed, decomposed where neither a fused
lowering nor a reference kernel exists) and split at its data-dependent nodes
into *stages*: each stage is a symbolic Function over the original parameters it reads and the
values earlier stages and data-dependent nodes produce, compiled ONCE by the backend's compile
(target-neutral: CPU compiles each stage to one native module,
:mod:`opgraph.backends.cpu.symbolic`; GPU to a per-binding specialising Executable,
:mod:`opgraph.runtime.specializing`). A data-dependent node's fresh
symbols are ordinary symbols of the later stages, bound from their argument shapes as any
symbol. At a call the stages run in order and the data-dependent nodes run between them on
their reference kernels (the INTERPRETER kernels), each binding its symbols from its result's
shape (checked against their bounds). On CPU new data never runs the C compiler or the
lowering pipeline again: a stage sees a new binding, which costs one cached memory plan; on
GPU a stage's new binding re-runs its code generation (``docs/gpu.md``).

A stage reads a symbol it has no parameter dimension for (a ``broadcast`` to a
``non_zero`` count, a value of shape ``(2*n,)``) from a *carrier* parameter of shape
``(symbol, 0)``: an empty array whose first axis binds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from opgraph.backends.fused.pipeline import is_native
from opgraph.backends.interpreter.backend import run_node
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.dim import Symbol, bare_symbol, dim, free_symbols
from opgraph.core.element_type import u8
from opgraph.core.errors import GraphError, UnsupportedOpError
from opgraph.core.function import Function
from opgraph.core.graph import rebuild_nodes
from opgraph.core.literals import Parameter, parameter
from opgraph.core.node import Node, Output
from opgraph.core.printing import format_node, value_names
from opgraph.core.tensor_type import TensorType, flatten_types
from opgraph.passes.decompose import decompose
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.unbox_tuples import unbox_tuples
from opgraph.runtime.backend import Executable, PerformanceCounter, argument_tensors
from opgraph.runtime.binding import Binding
from opgraph.runtime.tensor import Tensor
from opgraph.runtime.validation import validate_call

#: Compiles one stage Function (the backend's ``compile`` with the caller's options).
StageCompiler = Callable[[Function], Executable]


@dataclass(frozen=True)
class Stage:
    """One compiled piece: ``inputs`` are the lowered Function's values it reads (in its
    parameter order), ``carriers`` the symbols passed as ``(symbol, 0)`` arrays after them,
    ``outputs`` the lowered values it produces (in its result order)."""

    function: Function
    inputs: tuple[Output, ...]
    carriers: tuple[str, ...]
    outputs: tuple[Output, ...]
    executable: Executable


def is_data_dependent(function: Function) -> bool:
    """True when a node of ``function`` decides an output size from its input values."""
    return any(n.op.bound_symbols() for n in function.nodes)


def lower_for_stages(function: Function) -> Function:
    """Calls inlined, tuples unboxed, and decomposed what neither the fused backends run
    natively nor a
    reference kernel runs (each stage's compile lowers the rest as for any Function)."""
    fn = unbox_tuples(inline_calls(function))
    return decompose(fn, lambda op: is_native(op) or type(op) in KERNELS, keep_symbolic=True)


def _is_source(node: Node) -> bool:
    """A node that no stage has to compute: a Parameter, or a node without inputs (Constant)
    that any stage may share."""
    return isinstance(node.op, Parameter) or not node.inputs


def stage_levels(lowered: Function) -> dict[Node, int]:
    """Each node's stage: a computing node runs in the first stage after every value and
    data-dependent symbol it uses exists; a data-dependent node runs after stage ``level``,
    and its outputs (and symbols) exist from stage ``level + 1`` on."""
    binders = {s.name: n for n in lowered.nodes for s in n.op.bound_symbols()}
    level: dict[Node, int] = {n: 0 for n in lowered.nodes}

    def ready(node: Node) -> int:
        return level[node] + 1 if node.op.bound_symbols() else level[node]

    changed = True
    while changed:  # symbols make edges the topological order does not follow
        changed = False
        for node in lowered.nodes:
            if _is_source(node):
                continue
            found = max((ready(i.node) for i in node.inputs if not _is_source(i.node)), default=0)
            used = free_symbols(d for t in flatten_types(node.output_types) for d in t.shape)
            for s in used:
                binder = binders.get(s.name)
                if binder is not None and binder is not node:
                    found = max(found, ready(binder))
            if found > level[node]:
                if found > len(lowered.nodes):
                    raise GraphError(f"{lowered.name}: a cycle through data-dependent symbols")
                level[node] = found
                changed = True
    return level


def _carrier_symbols(stage: Function) -> list[Symbol]:
    """The symbols ``stage``'s nodes use that no parameter dimension binds by itself."""
    bare = {bare_symbol(d) for t in stage.parameter_types for d in t.shape}
    used = free_symbols(
        d for n in stage.nodes for t in flatten_types(n.output_types) for d in t.shape
    )
    return sorted((s for s in used if s not in bare), key=lambda s: s.name)


def build_stage(
    lowered: Function, members: list[Node], needed: set[Output], index: int
) -> tuple[Function, tuple[Output, ...], tuple[str, ...], tuple[Output, ...]]:
    """The Function of one stage: ``members`` (topologically ordered) with every value
    computed outside them made a parameter; its results are the ``needed`` outputs."""
    inside = set(members)
    inputs: dict[Output, Output] = {}
    for node in members:
        for i in node.inputs:
            if i.node in inside or i in inputs or (not i.node.inputs and not _is_param(i)):
                continue
            if _is_param(i):
                inputs[i] = i
            else:
                t = i.tensor_type
                inputs[i] = parameter(t.element_type, t.shape, name=f"stage{index}_in{len(inputs)}")
    mapping = rebuild_nodes(members, initial={k: v for k, v in inputs.items() if k is not v})
    outputs = tuple(o for n in members for o in n.outputs if o in needed)
    results = [mapping.get(o, o) for o in outputs]
    params = list(inputs.values())
    probe = Function(results, params, name=f"{lowered.name}/stage{index}")
    carriers = _carrier_symbols(probe)
    extra = [
        parameter(u8, (dim(s.name, s.min, s.max), 0), name=f"stage{index}_{s.name}")
        for s in carriers
    ]
    function = Function(results, params + extra, name=probe.name)
    return function, tuple(inputs), tuple(s.name for s in carriers), outputs


def _has_host_buffer(tensor: Tensor) -> bool:
    """True for a tensor in host memory (a device tensor overrides ``buffer`` to refuse)."""
    return type(tensor).buffer is Tensor.buffer


def _host_value(tensor: Tensor) -> np.ndarray:
    """The tensor's host buffer (zero-copy), or a host copy of a device tensor."""
    return tensor.buffer if _has_host_buffer(tensor) else tensor.read()


def _store(tensor: Tensor, value: np.ndarray) -> None:
    if _has_host_buffer(tensor):
        np.copyto(tensor.buffer, value)
    else:  # a device tensor: one upload
        tensor.write(value)


def _is_param(value: Output) -> bool:
    return isinstance(value.node.op, Parameter)


class StagedExecutable(Executable):
    """A data-dependent Function: compiled stages with the data-dependent nodes run between
    them on reference kernels (see the module docstring). ``backend`` names the backend in
    errors; ``device`` is the device runtime whose tensors a call may take (None: host
    tensors only)."""

    def __init__(
        self,
        function: Function,
        compile_stage: StageCompiler,
        profile: bool,
        backend: str,
        device: object | None = None,
    ) -> None:
        super().__init__(function, profile)
        self.backend = backend
        self.device = device
        lowered = lower_for_stages(function)
        missing = sorted(
            {n.op.name for n in lowered.ops if n.op.bound_symbols() and type(n.op) not in KERNELS}
        )
        if missing:
            raise UnsupportedOpError(
                f"{backend} has no kernel for the data-dependent op(s) {', '.join(missing)} "
                f"(in {function.name})"
            )
        self.lowered = lowered
        names = value_names(lowered)
        self._describe = lambda node: format_node(node, names)
        level = stage_levels(lowered)
        computing = [n for n in lowered.nodes if not _is_source(n)]
        dependent = [n for n in computing if n.op.bound_symbols()]
        last = max((level[n] for n in computing), default=0)
        #: Per level: the stage (or None) and the data-dependent nodes run after it.
        self.steps: list[tuple[Stage | None, list[Node]]] = []
        used_later = self._needed(computing, level)
        for k in range(last + 1):
            members = [n for n in computing if level[n] == k and not n.op.bound_symbols()]
            stage = None
            if members:
                fn, inputs, carriers, outputs = build_stage(lowered, members, used_later, k)
                stage = Stage(fn, inputs, carriers, outputs, compile_stage(fn))
            self.steps.append((stage, [n for n in dependent if level[n] == k]))
        self.stages = [s for s, _ in self.steps if s is not None]

    def _needed(self, computing: list[Node], level: dict[Node, int]) -> set[Output]:
        """The outputs of stage nodes that something outside their stage reads."""
        needed = set(self.lowered.results)
        for node in computing:
            for i in node.inputs:
                producer = i.node
                if producer.op.bound_symbols() or _is_source(producer):
                    continue
                if node.op.bound_symbols() or level[producer] != level[node]:
                    needed.add(i)
        return needed

    # --------------------------------------------------------------------- running
    def evaluate(self, arguments: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run every stage and data-dependent node on ``arguments`` (checked shapes)."""
        binding: Binding = dict(self.bind([np.shape(a) for a in arguments]))
        env: dict[Output, np.ndarray] = dict(zip(self.lowered.parameters, arguments, strict=True))
        for stage, nodes in self.steps:
            if stage is not None:
                args = [self._value(x, env, binding) for x in stage.inputs]
                args += [np.empty((binding[s], 0), np.uint8) for s in stage.carriers]
                results = stage.executable(*args)
                env.update(zip(stage.outputs, results, strict=True))
            for node in nodes:
                self._run_node(node, env, binding)
        return [self._value(r, env, binding) for r in self.lowered.results]

    def _value(self, x: Output, env: dict[Output, np.ndarray], binding: Binding) -> np.ndarray:
        found = env.get(x)
        if found is None:  # a shared source node (a Constant) read outside a stage
            self._run_node(x.node, env, binding)
            found = env[x]
        return found

    def _run_node(self, node: Node, env: dict[Output, np.ndarray], binding: Binding) -> None:
        started = time.perf_counter() if self.profile else 0.0
        where = f"{self._describe(node)} (built at {node.provenance})"
        arguments = [self._value(i, env, binding) for i in node.inputs]
        env.update(zip(node.outputs, run_node(node, arguments, binding, where), strict=True))
        if self.profile:
            self._record(self._describe(node), time.perf_counter() - started)

    def call(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        """As :meth:`Executable.call`; the result shapes are known only after the run, so the
        stages run into fresh arrays and the result tensors are checked before any is
        written."""
        parameter_types = (
            self.parameter_types if self.binder is None else self.bound_types(outputs, inputs)[0]
        )
        if self.binder is None:
            validate_call(
                outputs,
                inputs,
                self.result_types,
                parameter_types,
                self.function.name,
                self.device,
            )
        values = self.evaluate([_host_value(t) for t in inputs])
        result_types = [
            TensorType(t.element_type, v.shape)
            for t, v in zip(self.result_types, values, strict=True)
        ]
        validate_call(
            outputs, inputs, result_types, parameter_types, self.function.name, self.device
        )
        for tensor, result in zip(outputs, values, strict=True):
            _store(tensor, result)

    def _run(self, outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> None:
        values = self.evaluate([_host_value(t) for t in inputs])
        for tensor, result in zip(outputs, values, strict=True):
            _store(tensor, result)

    def _call_arrays(self, *arrays: Any) -> list[np.ndarray]:
        inputs = argument_tensors(self.function.name, arrays, self.parameter_types, self.binder)
        values = self.evaluate([_host_value(t) for t in inputs])
        return [np.array(v, copy=True) for v in values]

    # ---------------------------------------------------------------- introspection
    def fallback_ops(self) -> list[str]:
        """The data-dependent ops (run on reference kernels between the stages) and every
        stage's fallback ops (sorted)."""
        found = {n.op.name for _, nodes in self.steps for n in nodes}
        for stage in self.stages:
            found.update(getattr(stage.executable, "fallback_ops", list)())
        return sorted(found)

    def performance_counters(self) -> list[PerformanceCounter]:
        """The data-dependent nodes' times and each stage's, prefixed ``stageK/``."""
        own = super().performance_counters()
        for k, stage in enumerate(self.stages):
            own += [
                PerformanceCounter(f"stage{k}/{c.node}", c.total_seconds, c.calls)
                for c in stage.executable.performance_counters()
            ]
        return own

    def memory_plan(self, binding: Any = None) -> Any:
        """Raises GraphError: each stage has its own plan (``exe.stages[k].executable``)."""
        raise GraphError(
            f"{self.function.name} runs in {len(self.stages)} stage(s) around data-dependent "
            "nodes; each stage has its own memory plan: exe.stages[k].executable.memory_plan()"
        )

    def source(self) -> str:
        """The generated source of every stage."""
        return "\n".join(
            f"/* stage {k} */\n{getattr(s.executable, 'source', str)()}"
            for k, s in enumerate(self.stages)
        )
