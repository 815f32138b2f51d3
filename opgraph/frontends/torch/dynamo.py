"""The ``"opgraph"`` torch.compile backend.

Dynamo hands the backend a torch-level FX graph. For each concrete input signature (shapes,
dtypes, Python scalar values, and the identity and version of frozen weights) the backend:

1. lowers the graph to core ATen with ``torch.export.export(gm, args)`` and
   ``run_decompositions()`` (the same dialect :func:`import_exported` reads; export also
   functionalizes in-place ops and reports input mutations, which are applied afterwards);
2. partitions the ATen graph: supported nodes are fused into opgraph Executables, the rest
   stays in eager PyTorch, with one :class:`FallbackWarning` naming those ops;
3. runs the partitioned graph, wrapping torch tensors zero-copy.

A graph with symbolic sizes (``torch.compile(dynamic=True)``, or dynamo's automatic dynamic
shapes after a second shape) is exported once with those sizes kept symbolic
(:mod:`opgraph.frontends.torch.dynamic`) and compiled into symbolic opgraph Functions: calls
with any batch size or sequence length bind the symbols from the arguments, and nothing
recompiles. A static graph compiles per input signature.

That is the inference path (grad mode off, or no input requiring grad). For training (grad
mode on and an input requiring grad), :mod:`opgraph.frontends.torch.autograd` compiles the
forward and backward graphs AOTAutograd derives.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from opgraph.core.errors import ConversionError
from opgraph.frontends.torch.autograd import training_backend
from opgraph.frontends.torch.dynamic import DynamicSignature
from opgraph.frontends.torch.importer import lifted_tensor
from opgraph.frontends.torch.partition import compile_graph
from opgraph.runtime.backend import backend as get_backend
from opgraph.runtime.backend import backends
from opgraph.runtime.cache import LruCache

log = logging.getLogger("opgraph.torch")


class FallbackWarning(UserWarning):
    """Part (or all) of a torch.compile graph runs in eager PyTorch instead of opgraph."""


@dataclass(frozen=True)
class BackendOptions:
    """``torch.compile(..., backend="opgraph", options={...})`` keys.

    Attributes:
        backend: the opgraph backend ("CPU" when registered, else "INTERPRETER").
        freeze: fold parameters and buffers into the compiled Functions as Constants (so
            backends can constant-fold them); a weight updated in place or replaced
            (checked through its identity, version counter and data pointer) recompiles.
        fallback: what to do with unsupported ops: "partition" (run just them eagerly),
            "eager" (run the whole graph eagerly) or "error" (raise ConversionError).
        cache_size: specialisations kept per graph (the oldest are dropped first).
    """

    backend: str | None = None
    freeze: bool = True
    fallback: str = "partition"
    cache_size: int = 8

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> BackendOptions:
        """Validate a user's options dict."""
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown opgraph backend option(s) {unknown}; known: {sorted(known)}")
        parsed = cls(**options)
        if parsed.fallback not in ("partition", "eager", "error"):
            raise ValueError(
                f"fallback must be 'partition', 'eager' or 'error', got {parsed.fallback!r}"
            )
        return parsed

    @property
    def backend_name(self) -> str:
        return self.backend or default_backend()


def default_backend() -> str:
    """ "CPU" when that backend is registered, else "INTERPRETER"."""
    return "CPU" if "CPU" in backends() else "INTERPRETER"


def backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    options: Mapping[str, Any] | None = None,
) -> Callable[..., Any]:
    """The torch.compile backend: ``torch.compile(model, backend="opgraph")``.

    Args:
        gm: the FX graph dynamo captured.
        example_inputs: its example arguments (used to recognise parameters and buffers).
        options: see :class:`BackendOptions`.

    Returns:
        A callable taking and returning torch tensors, compiling per input signature.
    """
    parsed = BackendOptions.parse(options)
    if _needs_autograd(example_inputs) and not _off_cpu(example_inputs):
        backend = get_backend(parsed.backend_name)
        return training_backend(
            gm, example_inputs, backend, parsed.fallback, Warner().warn, parsed.cache_size
        )
    return CompiledGraph(gm, example_inputs, parsed)


class Warner:
    """Issues each FallbackWarning message once (new shapes recompile, and would otherwise
    repeat it)."""

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            warnings.warn(f"opgraph: {message}", FallbackWarning, stacklevel=4)


class CompiledGraph:
    """One dynamo graph: a cache of specialisations keyed by input signature (symbolic sizes
    left out of the key when the graph has them: one symbolic compile serves them all)."""

    def __init__(
        self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], options: BackendOptions
    ) -> None:
        self.gm = gm
        self.options = options
        self.weights = _weight_positions(gm, example_inputs) if options.freeze else frozenset()
        self.dynamic = DynamicSignature.of(gm)
        self._cache: LruCache[tuple[Any, ...], Callable[[Sequence[Any]], Any]] = LruCache(
            options.cache_size
        )
        self._lock = threading.Lock()
        self.warn = Warner().warn

    def __call__(self, *args: Any) -> Any:
        if _needs_autograd(args) or _off_cpu(args):
            self._warn_eager(args)
            return self.gm(*args)
        key = self._key(args)
        run = self._cache.get(key)
        if run is None:
            run = self._specialize(args, key)
        return run(args)

    def _key(self, args: Sequence[Any]) -> tuple[Any, ...]:
        parts: list[Any] = []
        dynamic = self.dynamic
        for index, arg in enumerate(args):
            if dynamic is not None and index in dynamic.sizes:
                continue  # a symbolic size: bound from the tensors at each call
            if isinstance(arg, torch.Tensor):
                shape = arg.shape if dynamic is None else dynamic.key(index, arg)
                parts.append((shape, arg.dtype))
                if index in self.weights:
                    parts.append((id(arg), _version(arg), arg.data_ptr()))
            elif isinstance(arg, bool | int | float) or arg is None:
                parts.append((type(arg), arg))
            else:
                parts.append(type(arg))
        return tuple(parts)

    def _specialize(self, args: Sequence[Any], key: tuple[Any, ...]) -> Callable[..., Any]:
        with self._lock:
            run = self._cache.get(key)
            if run is None and self.dynamic is not None:
                run = self._symbolic(args)
                if run is None:  # specialise from now on, keyed by concrete shapes
                    self.dynamic = None
                    self._cache.clear()
                    key = self._key(args)
            if run is None:
                run = specialize(self.gm, args, self.weights, self.options, self.warn)
            if key not in self._cache:
                self._cache.put(key, run)
            return run

    def _symbolic(self, args: Sequence[Any]) -> Callable[[Sequence[Any]], Any] | None:
        """One compile for every binding of the graph's symbolic sizes; None when torch
        cannot export it with them symbolic (the caller then specialises per signature)."""
        assert self.dynamic is not None
        kept = self.dynamic.kept()
        try:
            program = self.dynamic.export(self.gm, args)
        except Exception as error:  # torch raises many kinds; any means "not symbolically"
            log.debug(
                "torch.export could not keep the sizes symbolic (%s: %s); specialising per "
                "input signature",
                type(error).__name__,
                str(error).splitlines()[0] if str(error) else "",
            )
            return None
        weights = frozenset(kept.index(w) for w in self.weights if w in kept)
        reduced = [args[i] for i in kept]
        compiled = Specialization(program, reduced, weights, self.options, self.warn)
        return lambda call_args: compiled([call_args[i] for i in kept])

    def _warn_eager(self, args: Sequence[Any]) -> None:
        why = (
            "inputs live off the CPU"
            if _off_cpu(args)
            else "inputs require grad, but the graph was compiled for inference (with grad "
            "mode off)"
        )
        self.warn(f"{why}; this graph runs in eager PyTorch")


def _version(tensor: torch.Tensor) -> int:
    try:
        return int(tensor._version)
    except RuntimeError:  # inference tensors have no version counter
        return -1


def _needs_autograd(args: Sequence[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in args
    )


def _off_cpu(args: Sequence[Any]) -> bool:
    return any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args)


def _weight_positions(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> frozenset[int]:
    """Positions of the arguments that are module parameters or buffers."""
    try:
        # deferred: torch._dynamo is slow to import, and some torch versions lack this helper
        from torch._dynamo.source import is_from_unspecialized_param_buffer_source
    except ImportError:  # pragma: no cover - other torch versions
        is_from_unspecialized_param_buffer_source = None  # type: ignore[assignment]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    found = set()
    for index, (node, example) in enumerate(zip(placeholders, example_inputs, strict=False)):
        grapharg = node.meta.get("grapharg")
        source = getattr(grapharg, "source", None)
        by_source = (
            source is not None
            and is_from_unspecialized_param_buffer_source is not None
            and is_from_unspecialized_param_buffer_source(source)
        )
        if by_source or isinstance(example, torch.nn.Parameter):
            found.add(index)
    return frozenset(found)


# ------------------------------------------------------------------------ specialisation
def specialize(
    gm: torch.fx.GraphModule,
    args: Sequence[Any],
    weights: frozenset[int],
    options: BackendOptions,
    warn: Callable[[str], None],
) -> Callable[[Sequence[Any]], Any]:
    """Compile ``gm`` for the concrete ``args``: export, partition, compile; ``warn``
    reports what runs in eager PyTorch."""
    try:
        program = export(gm, args)
    except Exception as error:  # torch raises many kinds; any of them means "cannot lower"
        message = f"torch.export could not lower the graph ({type(error).__name__}: {error})"
        if options.fallback == "error":
            raise ConversionError(message) from error
        warn(f"{message.splitlines()[0]}; it runs in eager PyTorch")
        return lambda call_args: gm(*call_args)
    return Specialization(program, args, weights, options, warn)


def export(gm: torch.fx.GraphModule, args: Sequence[Any]) -> torch.export.ExportedProgram:
    """``gm`` in core ATen for ``args`` (shapes and Python scalars specialised)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch-internal deprecation noise
        program = torch.export.export(gm, tuple(args), strict=False)
        return program.run_decompositions()


class Specialization:
    """One exported, partitioned and compiled version of a graph."""

    def __init__(
        self,
        program: torch.export.ExportedProgram,
        args: Sequence[Any],
        weights: frozenset[int],
        options: BackendOptions,
        warn: Callable[[str], None],
    ) -> None:
        module = program.graph_module
        self.sources, constants = _sources(program, args, weights, options.freeze)
        self.roles = _output_roles(program)
        self.out_spec = program.call_spec.out_spec
        self.module = compile_graph(
            module, constants, get_backend(options.backend_name), options.fallback, warn
        )

    def __call__(self, args: Sequence[Any]) -> Any:
        flat = [args[s] if isinstance(s, int) else s for s in self.sources]
        outputs = self.module(*flat)
        users = []
        for role, value in zip(self.roles, outputs, strict=True):
            if role is None:
                users.append(value)
            else:
                target = args[role] if isinstance(role, int) else role
                with torch.no_grad():
                    target.copy_(value)
        return pytree.tree_unflatten(users, self.out_spec)


def _sources(
    program: torch.export.ExportedProgram,
    args: Sequence[Any],
    weights: frozenset[int],
    freeze: bool,
) -> tuple[list[int | torch.Tensor], dict[str, Any]]:
    """For each placeholder, the argument index feeding it or its lifted tensor; and the
    placeholders (by name) whose values are fixed for this compilation."""
    placeholders = [n for n in program.graph_module.graph.nodes if n.op == "placeholder"]
    sources: list[int | torch.Tensor] = []
    constants: dict[str, Any] = {}
    user = 0
    for node, spec in zip(placeholders, program.graph_signature.input_specs, strict=True):
        if spec.kind == InputKind.USER_INPUT:
            if user >= len(args):
                raise ConversionError("the exported program has more inputs than the graph")
            if user in weights or not isinstance(args[user], torch.Tensor):
                constants[node.name] = args[user]
            sources.append(user)
            user += 1
        else:
            tensor = lifted_tensor(program, str(spec.target), f"input {node.name!r}")
            if freeze or spec.kind == InputKind.CONSTANT_TENSOR:
                constants[node.name] = tensor
            sources.append(tensor)
    if user != len(args):
        raise ConversionError(f"the exported program reads {user} of {len(args)} arguments")
    return sources, constants


def _output_roles(program: torch.export.ExportedProgram) -> list[int | torch.Tensor | None]:
    """For each output: None for a user output, else the argument index or lifted tensor it
    updates in place."""
    signature = program.graph_signature
    user_inputs = [s.arg.name for s in signature.input_specs if s.kind == InputKind.USER_INPUT]
    roles: list[int | torch.Tensor | None] = []
    for spec in signature.output_specs:
        if spec.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT):
            roles.append(None)
        elif spec.kind == OutputKind.USER_INPUT_MUTATION:
            roles.append(user_inputs.index(str(spec.target)))
        elif spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
            roles.append(lifted_tensor(program, str(spec.target), f"output {spec.arg}"))
        else:
            raise ConversionError(f"{spec.kind.name} outputs are not supported")
    return roles
