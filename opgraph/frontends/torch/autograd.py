"""Training through ``torch.compile(backend="opgraph")``: forward and backward in opgraph.

When grad mode is on and an input requires grad, the backend hands the dynamo graph to
AOTAutograd (``aot_module_simplified``), which traces the joint forward/backward graph in
core ATen, functionalizes it (in-place ops, buffer updates such as batch norm's running
statistics) and splits it into a forward graph (returning the activations the backward
needs) and a backward graph. Both are compiled here like an inference graph: supported nodes
fused into opgraph Executables, the rest in eager PyTorch with one FallbackWarning. Saved
activations travel between the two as torch tensors that the forward's Executables wrote in
place and the backward's wrap without copying.

Double backward (``torch.autograd.grad(..., create_graph=True)`` and then differentiating the
gradients) is not something AOTAutograd's compiled backward supports. The compiled graph
therefore runs on detached aliases of its inputs inside :class:`_Bridge`, an autograd
Function whose backward hands the output cotangents to the compiled backward (the normal
case) or, when it runs with grad mode on (``create_graph=True``), recomputes the graph in
eager PyTorch from the real inputs and differentiates that with ``create_graph=True``, so the
gradients carry their history (one FallbackWarning says so).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_module_simplified
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from opgraph.core.errors import ConversionError, GraphError
from opgraph.frontends.torch.partition import compile_graph
from opgraph.frontends.torch.threads import share_torch_threads
from opgraph.runtime.backend import Backend
from opgraph.runtime.cache import LruCache

log = logging.getLogger("opgraph.torch")

#: dynamo's call targets for ``F.scaled_dot_product_attention``.
_SDPA = {
    torch._C._nn.scaled_dot_product_attention,
    torch.nn.functional.scaled_dot_product_attention,
}


def training_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    backend: Backend,
    fallback: str,
    warn: Callable[[str], None],
    cache_size: int = 8,
) -> Callable[..., Any]:
    """Compile ``gm`` for autograd: AOTAutograd with opgraph forward and backward compilers.

    Args:
        gm: the FX graph dynamo captured.
        example_inputs: its example arguments.
        backend: the opgraph backend compiling each partition.
        fallback: see :func:`~opgraph.frontends.torch.partition.compile_graph`.
        warn: reports what runs in eager PyTorch.
        cache_size: specialisations kept per graph with symbolic shapes.
    """

    def compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        return AtenGraph(gm, backend, fallback, warn, cache_size)

    # Attention traced in its math form: its backward then derives from matmuls and softmax
    # (the fused CPU kernel's backward has no decomposition). oneDNN off while tracing: torch
    # decomposes ``aten.lstm`` into its unrolled cell unless oneDNN is on and the input needs
    # no gradient, when it picks ``mkldnn_rnn_layer``, whose saved workspace (None) torch's
    # own AOTAutograd then refuses.
    with sdpa_kernel(SDPBackend.MATH), _without_onednn():
        compiled = aot_module_simplified(
            gm,
            list(example_inputs),
            fw_compiler=compiler,
            bw_compiler=compiler,
            decompositions=dict(core_aten_decompositions()),
        )
    return TwiceDifferentiable(compiled, gm, warn)


@contextmanager
def _without_onednn() -> Iterator[None]:
    """oneDNN (mkldnn) disabled inside (see :func:`training_backend`)."""
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)


class TwiceDifferentiable:
    """The AOTAutograd-compiled graph, called through :class:`_Bridge` so that a double
    backward recomputes the graph eagerly instead of failing (module doc)."""

    def __init__(
        self, compiled: Callable[..., Any], gm: torch.fx.GraphModule, warn: Callable[[str], None]
    ) -> None:
        self.compiled = compiled
        self.gm = gm
        self.warn = warn

    def __call__(self, *args: Any) -> Any:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors):
            return self.compiled(*args)
        box: list[Any] = []
        outputs = _Bridge.apply(self, box, *args)
        return _restore(box[0], outputs)

    def eager_gradients(
        self, args: tuple[Any, ...], rng: torch.Tensor, cotangents: tuple[torch.Tensor | None, ...]
    ) -> tuple[torch.Tensor | None, ...]:
        """Gradients of the graph's tensor outputs for ``cotangents`` with respect to
        ``args``, recomputed eagerly with history (buffers updated in place are copies)."""
        self.warn("a double backward (create_graph=True) recomputes this graph in eager PyTorch")
        fresh = [
            a.clone() if isinstance(a, torch.Tensor) and not a.requires_grad else a for a in args
        ]
        with torch.random.fork_rng(devices=[]), torch.enable_grad():
            torch.set_rng_state(rng)
            flat = _tensor_outputs(self.gm(*fresh))
        wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        pairs = [(o, c) for o, c in zip(flat, cotangents, strict=True) if c is not None]
        pairs = [(o, c) for o, c in pairs if o.requires_grad]
        found = iter(
            torch.autograd.grad(
                [o for o, _ in pairs], wanted, [c for _, c in pairs], create_graph=True,
                allow_unused=True,
            )
            if pairs
            else [None] * len(wanted)
        )  # fmt: skip
        return tuple(
            next(found) if isinstance(a, torch.Tensor) and a.requires_grad else None for a in args
        )


class _Bridge(torch.autograd.Function):
    """Runs the compiled graph on detached aliases of the inputs (its autograd graph an
    island); backward sends the cotangents through that island, or recomputes eagerly under
    ``create_graph=True``."""

    @staticmethod
    def forward(ctx: Any, owner: TwiceDifferentiable, box: list[Any], *args: Any) -> Any:
        ctx.set_materialize_grads(False)
        ctx.owner, ctx.args, ctx.rng = owner, args, torch.get_rng_state()
        aliases = [_alias(a) for a in args]
        with torch.enable_grad():
            result = owner.compiled(*aliases)
        flat = _tensor_outputs(result)
        box.append(result)
        ctx.island = (flat, aliases)
        outputs = tuple(o.detach() for o in flat)
        ctx.mark_non_differentiable(
            *(o for o, f in zip(outputs, flat, strict=True) if not f.requires_grad)
        )
        return outputs

    @staticmethod
    def backward(ctx: Any, *cotangents: torch.Tensor | None) -> tuple[Any, ...]:
        args = ctx.args
        if torch.is_grad_enabled():  # create_graph=True: gradients with history
            grads = ctx.owner.eager_gradients(args, ctx.rng, cotangents)
            return (None, None, *grads)
        if ctx.island is None:
            raise GraphError(
                "the backward of a torch.compile(backend='opgraph') graph ran a second time: "
                "its saved values are freed by the first backward, as without "
                "retain_graph=True (retain_graph is not kept through opgraph's graphs)"
            )
        flat, aliases = ctx.island
        ctx.island = None  # the island's saved activations go now, as the engine frees them
        pairs = [(o, c) for o, c in zip(flat, cotangents, strict=True) if c is not None]
        pairs = [(o, c) for o, c in pairs if o.requires_grad]
        wanted = [a for a in aliases if isinstance(a, torch.Tensor) and a.requires_grad]
        if not pairs or not wanted:
            return (None, None, *([None] * len(args)))
        direct = _through_node(pairs, aliases)
        if direct is not None:
            return (None, None, *direct)
        found = iter(
            torch.autograd.grad([o for o, _ in pairs], wanted, [c for _, c in pairs],
                                allow_unused=True)
        )  # fmt: skip
        grads = [
            next(found) if isinstance(a, torch.Tensor) and a.requires_grad else None
            for a in aliases
        ]
        return (None, None, *grads)


def _through_node(
    pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], aliases: Sequence[Any]
) -> list[torch.Tensor | None] | None:
    """The island's gradients for ``aliases`` by calling its one backward node directly, or
    None when the island is not that simple (then ``autograd.grad`` runs it).

    The simple island, AOTAutograd's usual one: every output with a cotangent comes from the
    same node, each of that node's outputs has a cotangent (nothing for the engine to
    materialise as zeros), every input of the node is a tensor (no symbolic size), and each
    edge out of the node ends at an alias's ``AccumulateGrad`` or nowhere. Calling the node
    (``grad_fn.apply``, documented for direct calls) is then what the engine would do, without
    a nested graph task (about half the bridge's cost, docs/torch.md); the engine's checks of
    what the node returns (count, shape, dtype) are repeated here."""
    node = pairs[0][0].grad_fn
    metadata = getattr(node, "_input_metadata", None)
    if node is None or metadata is None or len(pairs) != len(metadata):
        return None
    if len(getattr(node, "needs_input_grad", ())) != len(node.next_functions):
        return None  # a forward input that is no tensor (a size): no edge to match it to
    cotangents: list[torch.Tensor | None] = [None] * len(pairs)
    for output, cotangent in pairs:
        if output.grad_fn is not node or cotangents[output.output_nr] is not None:
            return None
        cotangents[output.output_nr] = cotangent
    positions = {id(a): i for i, a in enumerate(aliases) if isinstance(a, torch.Tensor)}
    targets: list[int | None] = []
    for edge, _ in node.next_functions:
        variable = getattr(edge, "variable", None) if edge is not None else None
        if edge is not None and (variable is None or id(variable) not in positions):
            return None
        targets.append(positions[id(variable)] if variable is not None else None)
    returned = node.apply(*cotangents)  # type: ignore[attr-defined]
    return _gathered(returned if isinstance(returned, tuple) else (returned,), targets, aliases)


def _gathered(
    returned: Sequence[torch.Tensor | None], targets: Sequence[int | None], aliases: Sequence[Any]
) -> list[torch.Tensor | None]:
    """Per alias, the sum of the node's gradients along the edges ending at it (``targets``:
    per edge, the alias's position or None), shaped and typed like the alias as the engine
    makes them."""
    if len(returned) != len(targets):
        raise GraphError(
            f"the compiled backward returned {len(returned)} gradients for {len(targets)} "
            "inputs (expected one per input)"
        )
    grads: list[torch.Tensor | None] = [None] * len(aliases)
    for target, grad in zip(targets, returned, strict=True):
        if target is None or grad is None:
            continue
        alias = aliases[target]
        if grad.shape != alias.shape:
            grad = grad.sum_to_size(alias.shape)
        if grad.dtype != alias.dtype:
            grad = grad.to(alias.dtype)
        previous = grads[target]
        grads[target] = grad if previous is None else previous + grad
    return grads


def _alias(value: Any) -> Any:
    """A tensor as a leaf sharing its storage (and version counter), requiring grad as it
    does; anything else unchanged."""
    if not isinstance(value, torch.Tensor):
        return value
    return value.detach().requires_grad_(value.requires_grad)


def _tensor_outputs(result: Any) -> list[torch.Tensor]:
    items = result if isinstance(result, list | tuple) else [result]
    return [o for o in items if isinstance(o, torch.Tensor)]


def _restore(result: Any, outputs: tuple[torch.Tensor, ...]) -> Any:
    """``result`` with its tensors replaced, in order, by the bridge's outputs."""
    replaced = iter(outputs)
    if isinstance(result, list | tuple):
        items = [next(replaced) if isinstance(o, torch.Tensor) else o for o in result]
        return type(result)(items) if isinstance(result, tuple) else items
    return next(replaced) if isinstance(result, torch.Tensor) else result


class AtenGraph:
    """A compiled AOTAutograd graph (forward or backward), called with a list of arguments.

    A graph with symbolic shapes (``dynamic=True``, dynamo's automatic dynamic shapes) compiles
    once into symbolic opgraph Functions; when some of it would then run in PyTorch (an op
    whose converter needs static sizes), it is specialised per call signature instead, by
    retracing it with the concrete sizes. A static graph compiles once.
    """

    _boxed_call = True  # AOTAutograd passes the arguments as one list

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        backend: Backend,
        fallback: str,
        warn: Callable[[str], None],
        cache_size: int,
    ) -> None:
        self.gm = gm
        self.backend = backend
        self.fallback = fallback
        self.warn = warn
        self.cache_size = cache_size
        self.symbolic = _symbolic(gm)
        self._static = self._compile_symbolic(gm) if self.symbolic else self._compile(gm)
        self._cache: LruCache[tuple[Any, ...], Callable[..., Any]] = LruCache(cache_size)

    def __call__(self, args: list[Any]) -> Any:
        share_torch_threads()  # torch's loss, glue and optimizer run between: one OpenMP team
        run = self._static or self._specialised(args)
        arguments = list(args)
        args.clear()  # the boxed convention: let the caller's references go early
        return run(*arguments)

    def _compile(self, gm: torch.fx.GraphModule) -> Callable[..., Any]:
        return compile_graph(gm, {}, self.backend, self.fallback, self.warn)

    def _compile_symbolic(self, gm: torch.fx.GraphModule) -> Callable[..., Any] | None:
        """``gm`` compiled once with its symbolic sizes, or None (then each call signature
        is specialised) when any part of it would run in PyTorch that way."""
        left: list[str] = []
        try:  # AOTAutograd compiles a dynamic backward eagerly, under its fake mode
            with unset_fake_temporarily():
                module = copy.deepcopy(gm)
                run = compile_graph(module, {}, self.backend, self.fallback, left.append)
        except ConversionError:
            return None
        if left:
            log.debug("the symbolic graph leaves %s; specialising per signature", left[0])
            return None
        return run

    def _specialised(self, args: Sequence[Any]) -> Callable[..., Any]:
        key = tuple(
            (a.shape, a.dtype, a.stride()) if isinstance(a, torch.Tensor) else (type(a), a)
            for a in args
        )
        return self._cache.get_or_make(key, lambda: self._trace_and_compile(args))

    def _trace_and_compile(self, args: Sequence[Any]) -> Callable[..., Any]:
        with torch.no_grad():
            traced = make_fx(self.gm, tracing_mode="fake")(*args)
        return self._compile(traced)


def _symbolic(gm: torch.fx.GraphModule) -> bool:
    """True when a placeholder's metadata has a symbolic size or is a symbolic number."""
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt | torch.SymFloat | torch.SymBool):
            return True
        if isinstance(val, torch.Tensor) and any(not isinstance(d, int) for d in val.shape):
            return True
    return False
