"""Operator sugar: core's Output looks the builders up in OPERATORS, which opgraph.ops fills."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.core.errors import OpTypeError, RegistryError
from opgraph.core.node import OPERATORS


def test_ops_registers_every_operator():
    assert sorted(OPERATORS) == ["add", "divide", "multiply", "negative", "subtract"]


@pytest.mark.parametrize(
    ("build", "op_class"),
    [
        (lambda x, y: x + y, ops.Add),
        (lambda x, y: x - y, ops.Sub),
        (lambda x, y: x * y, ops.Mul),
        (lambda x, y: x / y, ops.Div),
    ],
)
def test_binary_operators_build_the_strict_ops(build, op_class):
    x, y = og.parameter(og.f32, (2, 3)), og.parameter(og.f32, (2, 3))
    z = build(x, y)
    assert isinstance(z.op, op_class)
    assert z.node.inputs == (x, y)


def test_python_scalar_becomes_a_broadcast_constant_of_the_other_operand_type():
    x = og.parameter(og.f16, (2, 3))
    z = 1 - x
    assert isinstance(z.op, ops.Sub) and z.node.inputs[1] is x
    scalar = z.node.inputs[0]
    assert isinstance(scalar.op, ops.Broadcast) and scalar.type == x.type
    assert scalar.node.inputs[0].op.element_type is og.f16
    np.testing.assert_array_equal(scalar.node.inputs[0].op.value, np.float16(1))


def test_negation_and_scalar_operands_of_rank_zero():
    x = og.parameter(og.f32, ())
    assert isinstance((-x).op, ops.Neg)
    assert (x * 0.5).node.inputs[1].op.__class__ is ops.Constant


def test_scalar_that_does_not_fit_is_a_type_error():
    x = og.parameter(og.i32, (2,))
    with pytest.raises(OpTypeError, match="does not fit|not representable|i32"):
        x * 0.5


def test_missing_operator_lists_the_registered_ones():
    with pytest.raises(RegistryError, match="registered: add"):
        OPERATORS["power"]
