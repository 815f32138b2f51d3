"""Steps placed on the host, run on numpy views of the host side of the call's memory.

Fallback steps run their reference kernels (as the CPU backend runs them); loop, GEMM,
convolution and pooling steps run the numpy semantics of :mod:`opgraph.backends.gpu.interpret`
(small loop kernels between host steps, or steps a device lacks). Keyed by step class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import opgraph.backends.gpu.interpret as interpret
from opgraph.backends.fused.conv_backprop import ConvDataGradientStep, ConvFilterGradientStep
from opgraph.backends.fused.indexed import ArgStep, NodeStep, ScatterStep, TopKStep
from opgraph.backends.fused.lowering.attention import AttentionStep, numpy_attention
from opgraph.backends.fused.lowering.quantized import QConvStep, QGemmStep
from opgraph.backends.fused.program import (
    ConvStep,
    FallbackStep,
    GemmStep,
    LoopKernel,
    LoopStep,
    PoolStep,
    ScanStep,
    Step,
)
from opgraph.backends.fused.views import Literal, Operand, View, static
from opgraph.backends.gpu.cuda.kernel import IntGemm
from opgraph.backends.gpu.steps import direct, im2col_spec, pool_spec
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core import element_type as et
from opgraph.core.errors import ExecutionError, OpgraphError
from opgraph.core.registry import Registry
from opgraph.pattern import constant_value

Resolve = Callable[[View], np.ndarray]
HostStep = Callable[[Any, Resolve], None]

#: How the host runs each kind of step: ``run(step, resolve)``, ``resolve(view)`` giving the
#: host numpy view of a program view.
HOST_STEPS: Registry[type, HostStep] = Registry("GPU backend host step")


def run_host_step(step: Step, resolve: Resolve, describe: Callable[[Any], str]) -> None:
    """Run ``step`` on the host; errors name the node being executed."""
    try:
        HOST_STEPS[type(step)](step, resolve)
    except ExecutionError:
        raise
    except (OpgraphError, ArithmeticError, ValueError, TypeError, IndexError) as error:
        node = step.nodes[0] if step.nodes else None
        where = f"{describe(node)} (built at {node.provenance})" if node is not None else step.label
        raise ExecutionError(f"while executing {where}: {error}") from error


def _operand(x: Operand, resolve: Resolve) -> np.ndarray:
    if isinstance(x, Literal):
        return np.full(x.shape, x.value, x.element_type.dtype)
    return resolve(x)


@HOST_STEPS.register(FallbackStep)
def _fallback(step: FallbackStep, resolve: Resolve) -> None:
    node = step.node
    assert node is not None
    inputs = [_operand(x, resolve) for x in step.inputs]
    try:
        interpret.run_reference(node, inputs, [resolve(v) for v in step.outputs])
    except ExecutionError as error:
        raise ExecutionError(
            f"while executing {step.label} (built at {node.provenance}): {error}"
        ) from error


def run_loop(kernel: LoopKernel, resolve: Resolve) -> None:
    """Interpret a loop kernel on host views."""
    loads, stores = interpret.loop_names(kernel)
    arrays = {name: resolve(interpret.loop_read(kernel.nodes[k])) for k, name in loads.items()}  # type: ignore[arg-type]
    arrays.update({name: resolve(kernel.stores[slot][1]) for slot, name in stores.items()})
    interpret.run_loop_kernel(kernel, arrays)


#: Step classes the host runs through the ops' reference kernels (``fallback_ops`` lists them
#: beside the fallback steps).
REFERENCE_STEPS: frozenset[type] = frozenset(
    {
        ScanStep,
        ArgStep,
        TopKStep,
        ScatterStep,
        ConvDataGradientStep,
        ConvFilterGradientStep,
        QGemmStep,
        QConvStep,
    }
)


def _node_step(step: NodeStep, resolve: Resolve) -> None:
    """Index searches, selections and scatters have no GPU kernel: the host runs the node's
    reference kernel on the step's operands (in the node's shapes)."""
    assert step.node is not None
    inputs = [_operand(x, resolve) for x in step.inputs]
    interpret.run_reference(step.node, inputs, [resolve(v) for v in step.outputs])


for _step in (ArgStep, TopKStep, ScatterStep):
    HOST_STEPS.add(_step, _node_step)


@HOST_STEPS.register(ScanStep)
def _scan(step: ScanStep, resolve: Resolve) -> None:
    """A cumulative sum has no GPU kernel: the host runs its reference kernel."""
    assert step.x is not None and step.out is not None
    (node,) = step.nodes
    x = resolve(step.x).reshape(node.inputs[0].shape)
    interpret.run_reference(node, [x], [resolve(step.out).reshape(node.outputs[0].shape)])


@HOST_STEPS.register(ConvDataGradientStep)
@HOST_STEPS.register(ConvFilterGradientStep)
def _conv_gradient(step: ConvDataGradientStep | ConvFilterGradientStep, resolve: Resolve) -> None:
    """A convolution's gradient has no GPU kernel: the host runs its reference kernel."""
    assert step.ct is not None and step.out is not None
    (node,) = step.nodes
    if isinstance(step, ConvDataGradientStep):
        assert step.w is not None
        views = [step.ct, step.w]
    else:
        assert step.x is not None
        views = [step.x, step.ct]
    inputs = [resolve(v).reshape(x.shape) for v, x in zip(views, node.inputs, strict=True)]
    interpret.run_reference(node, inputs, [resolve(step.out).reshape(node.outputs[0].shape)])


@HOST_STEPS.register(AttentionStep)
def _attention(step: AttentionStep, resolve: Resolve) -> None:
    """Fused attention has no GPU kernel: the host runs its numpy semantics per entry."""
    assert step.q is not None and step.k is not None and step.v is not None
    assert step.out is not None
    (node,) = step.nodes
    for qo, ko, vo, oo, mo in step.batch:
        q, k = resolve(_shifted(step.q, qo)), resolve(_shifted(step.k, ko))
        v, out = resolve(_shifted(step.v, vo)), resolve(_shifted(step.out, oo))
        mask = None if step.mask is None else resolve(_shifted(step.mask, mo))
        out[...] = numpy_attention(q, k, v, mask, node.op)  # type: ignore[arg-type]


@HOST_STEPS.register(LoopStep)
def _loop(step: LoopStep, resolve: Resolve) -> None:
    for kernel in step.kernels:
        run_loop(kernel, resolve)


def _shifted(view: View, delta: int) -> View:
    return View(view.buffer, view.element_type, view.shape, view.strides, view.offset + delta)


@HOST_STEPS.register(GemmStep)
def _gemm(step: GemmStep, resolve: Resolve) -> None:
    a, b, c = step.a, step.b, step.out
    assert a is not None and b is not None and c is not None
    for da, db, dc in step.batch:
        left, right, out = (
            resolve(_shifted(a, static(da))),
            resolve(_shifted(b, static(db))),
            resolve(_shifted(c, static(dc))),
        )
        if c.element_type in (et.f32, et.f64):
            interpret.matmul(left, right, out)
        else:
            gemm = IntGemm(static(c.shape[0]), static(c.shape[1]), static(a.shape[1]))
            interpret.run_int_gemm(gemm, left, right, out)
    if step.epilogue is not None:
        run_loop(step.epilogue, resolve)


@HOST_STEPS.register(QGemmStep)
@HOST_STEPS.register(QConvStep)
def _integer_product(step: QGemmStep | QConvStep, resolve: Resolve) -> None:
    """A quantized model's integer product (no device kernel yet): the reference kernel of
    its node on the host, then the epilogue."""
    node = step.nodes[0]
    data = step.a if isinstance(step, QGemmStep) else step.x
    assert data is not None and step.out is not None
    source = node.inputs[0]
    values = np.ascontiguousarray(resolve(data)).reshape(source.shape)
    constants = [constant_value(x) for x in node.inputs[1:]]
    result = KERNELS[type(node.op)](node.op, values, *constants)
    out = resolve(step.out)
    out[...] = result.reshape(out.shape)
    if step.epilogue is not None:
        run_loop(step.epilogue, resolve)


@HOST_STEPS.register(ConvStep)
def _conv(step: ConvStep, resolve: Resolve) -> None:
    assert step.x is not None and step.w is not None and step.out is not None
    x, w = resolve(step.x), resolve(step.w)
    n = x.shape[0]
    o, k = w.shape
    g, p = step.groups, step.images[1] * step.images[2]
    if direct(step):
        patches = np.ascontiguousarray(x).reshape(n, g, k, p)
    else:
        patches = np.empty((n, g, k, p), x.dtype)
        interpret.run_im2col(im2col_spec(step), x, patches)
    og = o // g
    product = np.stack(
        [np.matmul(w[i * og : (i + 1) * og], patches[:, i]) for i in range(g)], axis=1
    ).reshape(n, o, p)  # (N, O, P)
    out = resolve(step.out)
    layout = product.transpose(1, 0, 2).reshape(o, n * p) if step.wide else product
    np.copyto(out, layout.reshape(out.shape).astype(out.dtype, copy=False))
    if step.epilogue is not None:
        run_loop(step.epilogue, resolve)


@HOST_STEPS.register(PoolStep)
def _pool(step: PoolStep, resolve: Resolve) -> None:
    assert step.x is not None and step.out is not None
    interpret.run_pool(pool_spec(step), resolve(step.x), resolve(step.out))
