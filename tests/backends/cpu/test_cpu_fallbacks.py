"""Ops without a native path run their reference kernels inside the plan. The list of such
ops is pinned here so that it only shrinks: an op that gains a native lowering must leave
the list, and a known op must not start falling back. Ops added to the catalogue after the
list was pinned fall back automatically (every registered op works on CPU)."""

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering import (
    GATHERS,
    REDUCTIONS,
    REWRITES,
    SCALAR_OPS,
    STEP_OPS,
    VIEW_OPS,
)
from opgraph.backends.interpreter.kernels import KERNELS
from opgraph.core.literals import Constant, Parameter
from opgraph.core.op import OP_REGISTRY

#: Ops that ran through their reference kernels when this list was last updated.
PINNED = {
    "AllReduce", "BatchNormTraining", "BroadcastDistributed",
    "LRN", "MaxPoolBackprop", "MaxPoolWithIndices", "ReverseSequence",
}  # fmt: skip

#: Every op class registered when the list was pinned (later ones may fall back).
KNOWN_WHEN_PINNED = {
    "Abs", "Acos", "Acosh", "Add", "AllReduce", "And", "ArgMax", "ArgMin", "Asin", "Asinh",
    "Atan", "Bitcast", "BroadcastDistributed",
    "Atan2", "Atanh", "AvgPool", "BatchNormInference", "BatchNormTraining", "BitShift",
    "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Broadcast", "Ceil", "Clamp",
    "Concat", "Convert", "Convolution", "ConvolutionBackpropData", "ConvolutionBackpropFilters",
    "Cos", "Cosh", "CumSum", "DepthToSpace", "DequantizeLinear", "Div", "Dot", "Elu", "Equal",
    "Erf", "Exp", "Expand", "Flatten", "Floor", "GRUCell", "Gather", "GatherElements",
    "GatherND", "Gelu", "Gemm", "Greater", "GreaterOrEqual", "GroupNorm", "HardSigmoid",
    "HardSwish", "InstanceNorm", "IsFinite", "IsInf", "IsNaN", "LRN", "LSTMCell", "LayerNorm",
    "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max", "MaxPool",
    "MaxPoolBackprop", "MaxPoolWithIndices", "Min", "Mish", "Mod", "Mul", "Neg", "Not",
    "NotEqual", "OneHot", "Or", "PRelu", "Pad", "Pow", "QuantizeLinear", "RNNCell",
    "Reciprocal", "ReduceAll", "ReduceAny", "ReduceL1", "ReduceL2", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
    "ReduceSumSquare", "Relu", "ReplaceSlice", "Reshape", "Resize", "Reverse",
    "ReverseSequence", "Round", "ScatterElements", "ScatterND", "Select", "Selu", "Sigmoid",
    "Sign", "Sin", "Sinh", "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth",
    "Split", "Sqrt", "SquaredDifference", "Squeeze", "Stack", "StopGradient", "Sub", "Tan",
    "Tanh", "Tile", "TopK", "Transpose", "Unsqueeze", "Xor",
}  # fmt: skip

NATIVE = (SCALAR_OPS, REDUCTIONS, VIEW_OPS, STEP_OPS, REWRITES, GATHERS)


def falls_back(cls: type) -> bool:
    """Runs through its reference kernel on CPU: no native lowering, no decomposition."""
    if cls in (Parameter, Constant) or cls.lowered_by is not None:
        return False
    if any(cls in table for table in NATIVE):
        return False
    return not cls.has_decomposition() and cls in KERNELS


def current_fallbacks() -> set[str]:
    return {name for name, cls in OP_REGISTRY.items() if falls_back(cls)}


def test_known_ops_do_not_start_falling_back():
    new = {n for n in current_fallbacks() & KNOWN_WHEN_PINNED if n not in PINNED}
    assert not new, f"ops that had a native CPU path now fall back: {sorted(new)}"


def test_the_pinned_list_only_shrinks():
    stale = {n for n in PINNED if n in OP_REGISTRY and n not in current_fallbacks()}
    assert not stale, f"these ops have a native CPU path now; remove them from PINNED: {stale}"


def test_new_ops_fall_back_automatically():
    """Ops registered after the pin need nothing from the CPU backend to run."""
    for name in current_fallbacks() - KNOWN_WHEN_PINNED:
        cls = OP_REGISTRY[name]
        assert cls in KERNELS, f"{name} falls back but has no reference kernel"


def test_fallback_ops_are_listed_by_the_executable(cpu):
    x = og.parameter(og.f32, (2, 3))
    lengths = og.constant(np.array([3, 2], np.int64), og.i64)
    reversed_ = ops.reverse_sequence(ops.exp(x), lengths, 0, 1)
    exe = cpu.compile(og.Function([ops.negative(reversed_)], [x]))
    assert exe.fallback_ops() == ["ReverseSequence"]
    data = np.array([[0.5, 3.0, -1.0], [2.0, 0.0, 1.0]], np.float32)
    want = -np.exp([[-1.0, 3.0, 0.5], [0.0, 2.0, 1.0]])
    np.testing.assert_allclose(exe(data)[0], want, rtol=1e-6)
