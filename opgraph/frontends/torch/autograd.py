"""Training through ``torch.compile(backend="opgraph")``: forward and backward in opgraph.

When grad mode is on and an input requires grad, the backend hands the dynamo graph to
AOTAutograd (``aot_module_simplified``), which traces the joint forward/backward graph in
core ATen, functionalizes it (in-place ops, buffer updates such as batch norm's running
statistics) and splits it into a forward graph (returning the activations the backward
needs) and a backward graph. Both are compiled here like an inference graph: supported nodes
fused into opgraph Executables, the rest in eager PyTorch with one FallbackWarning. Saved
activations travel between the two as torch tensors that the forward's Executables wrote in
place and the backward's wrap without copying.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_module_simplified
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from opgraph.core.errors import ConversionError
from opgraph.frontends.torch.partition import compile_graph
from opgraph.runtime.backend import Backend

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
    # (the fused CPU kernel's backward has no decomposition).
    with sdpa_kernel(SDPBackend.MATH):
        return aot_module_simplified(
            gm,
            list(example_inputs),
            fw_compiler=compiler,
            bw_compiler=compiler,
            decompositions=dict(core_aten_decompositions()),
        )


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
        self._cache: OrderedDict[tuple[Any, ...], Callable[..., Any]] = OrderedDict()

    def __call__(self, args: list[Any]) -> Any:
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
        run = self._cache.get(key)
        if run is None:
            with torch.no_grad():
                traced = make_fx(self.gm, tracing_mode="fake")(*args)
            run = self._compile(traced)
            self._cache[key] = run
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return run


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
