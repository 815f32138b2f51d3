"""The single-output adjoint hook: ``Op.vjp`` returns zeros (None) when no gradient reaches the
first output, and otherwise asks ``Op.adjoint``; only ops whose gradient needs the cotangents
of several outputs override ``vjp`` itself."""

import inspect

import opgraph as og
from opgraph import ops
from opgraph.core.op import OP_REGISTRY, Op


def test_no_cotangent_gives_none_for_every_input():
    a, b, c = (og.parameter(og.f32, (2, 2)) for _ in range(3))
    node = ops.concat([a, b, c], 0).node
    assert node.op.vjp(node.inputs, node.outputs, (None,)) == (None, None, None)


def test_adjoint_gets_the_first_output_and_its_cotangent():
    x = og.parameter(og.f32, (2, 3))
    y = ops.transpose(x, (1, 0))
    ct = og.parameter(og.f32, (3, 2))
    (dx,) = y.op.vjp(y.node.inputs, y.node.outputs, (ct,))
    assert isinstance(dx.op, ops.Transpose) and dx.node.inputs == (ct,) and dx.type == x.type


def test_multi_output_op_with_the_hook_uses_its_other_outputs_through_the_node():
    x = og.parameter(og.f32, (5,))
    values, indices = ops.top_k(x, 2, axis=0)
    ct = og.parameter(og.f32, (2,))
    (dx,) = values.op.vjp((x,), (values, indices), (ct, None))
    assert dx.type == x.type
    assert indices in dx.node.inputs


def test_only_ops_needing_several_cotangents_override_vjp():
    overriding = {
        name
        for name, cls in OP_REGISTRY.items()
        if cls.__module__.startswith("opgraph.ops.")
        and any("vjp" in vars(base) for base in inspect.getmro(cls) if base is not Op)
    }
    assert overriding == {"Split", "BatchNormTraining"}


def test_has_vjp_sees_the_hook():
    assert (
        ops.Transpose.has_vjp()
        and ops.Concat.has_vjp()
        and ops.ConvolutionBackpropFilters.has_vjp()
    )
