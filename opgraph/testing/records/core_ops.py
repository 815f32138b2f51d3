"""Records for the foundation op set (elementwise, conversion, movement, dot, reductions,
tuples and calls), including nGraph's edge cases as data."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.core.function import Function
from opgraph.core.literals import parameter
from opgraph.core.node import Output
from opgraph.testing.records.base import ALL, BOOL, FLOATS, NUMERIC, SIGNED, In, OpRecord

S = (2, 3)

RECORDS: list[OpRecord] = [
    # unary
    OpRecord("abs", ops.abs, (In(S),), NUMERIC),
    OpRecord("negative", ops.negative, (In(S),), SIGNED),
    OpRecord("exp", ops.exp, (In(S),), FLOATS),
    OpRecord("log", ops.log, (In(S, low=0.1, high=5),), FLOATS),
    OpRecord("sqrt", ops.sqrt, (In(S, low=0.0, high=5),), FLOATS),
    OpRecord("tanh", ops.tanh, (In(S),), FLOATS),
    OpRecord("sigmoid", ops.sigmoid, (In(S, low=-8, high=8),), FLOATS),
    OpRecord("relu", ops.relu, (In(S),), NUMERIC),
    OpRecord(
        "log_special",
        ops.log,
        (In((4,), values=[0.0, -1.0, float("inf"), 1.0]),),
        FLOATS,
        differentiable=False,
    ),
    # binary
    OpRecord("add", ops.add, (In(S), In(S)), NUMERIC),
    OpRecord("subtract", ops.subtract, (In(S, low=3, high=9), In(S, low=0, high=3)), NUMERIC),
    OpRecord("multiply", ops.multiply, (In(S), In(S)), NUMERIC),
    OpRecord(
        "divide", ops.divide, (In(S, low=-9, high=9), In(S, nonzero=True, low=1, high=4)), NUMERIC
    ),
    OpRecord(
        "divide_signed_floor",
        ops.divide,
        (In((4,), values=[-10, 10, -7, 7]), In((4,), values=[3, -3, 2, 2])),
        SIGNED,
    ),
    OpRecord(
        "divide_signed_trunc",
        lambda a, b: ops.divide(a, b, floor_division=False),
        (In((4,), values=[-10, 10, -7, 7]), In((4,), values=[3, -3, 2, 2])),
        et.SIGNED_INTS,
    ),
    OpRecord(
        "divide_by_zero_float",
        ops.divide,
        (In((3,), values=[1.0, -1.0, 0.0]), In((3,), values=[0.0, 0.0, 0.0])),
        FLOATS,
        differentiable=False,
    ),
    OpRecord("maximum", ops.maximum, (In(S), In(S)), NUMERIC),
    OpRecord("minimum", ops.minimum, (In(S), In(S)), NUMERIC),
    OpRecord("power", ops.power, (In(S, low=0.5, high=2), In(S, low=0, high=3)), NUMERIC),
    # comparisons and logic
    OpRecord("equal", ops.equal, (In(S, low=0, high=2), In(S, low=0, high=2)), ALL),
    OpRecord("not_equal", ops.not_equal, (In(S, low=0, high=2), In(S, low=0, high=2)), ALL),
    OpRecord("less", ops.less, (In(S), In(S)), ALL),
    OpRecord("less_equal", ops.less_equal, (In(S, low=0, high=2), In(S, low=0, high=2)), ALL),
    OpRecord("greater", ops.greater, (In(S), In(S)), ALL),
    OpRecord("greater_equal", ops.greater_equal, (In(S, low=0, high=2), In(S, low=0, high=2)), ALL),
    OpRecord("logical_and", ops.logical_and, (In(S), In(S)), BOOL),
    OpRecord("logical_or", ops.logical_or, (In(S), In(S)), BOOL),
    OpRecord("logical_not", ops.logical_not, (In(S),), BOOL),
    OpRecord("select", ops.select, (In(S, et.boolean), In(S), In(S)), ALL),
    # conversion: every source type into f32, i32, u8 and boolean
    *(
        OpRecord(
            f"convert_to_{target.name}",
            lambda x, t=target: ops.convert(x, t),
            (In(S, low=-300, high=300),),
            ALL,
        )
        for target in (et.f32, et.f16, et.i32, et.u8, et.i64, et.boolean)
    ),
    OpRecord(
        "convert_special",
        lambda x: ops.convert(x, et.i8),
        (In((5,), values=[float("nan"), 1e9, -1e9, -2.7, 2.7]),),
        (et.f32, et.f64),
    ),
    # f64 -> f64 keeps the graph in f64, so the gradient check covers Convert's adjoint.
    OpRecord("convert_same_type", lambda x: ops.convert(ops.exp(x), et.f64), (In(S),), (et.f64,)),
    *(
        OpRecord(
            f"bitcast_to_{target.name}",
            lambda x, t=target: ops.bitcast(x, t),
            (In(S, low=-50, high=50),),
            sources,
        )
        for target, sources in (
            (et.i32, (et.f32, et.u32)),
            (et.f32, (et.i32, et.u32)),
            (et.u64, (et.f64, et.i64)),
            (et.f64, (et.i64,)),
            (et.i16, (et.f16, et.bf16, et.u16)),
            (et.u8, (et.i8,)),
        )
    ),
    # movement
    OpRecord(  # sizes taken from the input, so a symbolic input broadcasts too
        "broadcast_middle",
        lambda x: ops.broadcast(x, (x.shape[0], 4, x.shape[1]), (1,)),
        (In(S),),
        ALL,
    ),
    OpRecord("broadcast_scalar", lambda x: ops.broadcast(x, (2, 2), (0, 1)), (In(()),), ALL),
    OpRecord("reshape", lambda x: ops.reshape(x, x.shape[::-1]), (In(S),), ALL),
    OpRecord(
        "reshape_m2m_transpose", lambda x: ops.reshape(x, x.shape[::-1], (1, 0)), (In(S),), ALL
    ),
    OpRecord(
        "reshape_3d_transpose_120",
        lambda x: ops.reshape(x, (x.shape[2], x.shape[0], x.shape[1]), (1, 2, 0)),
        (In((2, 3, 4)),),
        NUMERIC,
    ),
    OpRecord(
        "reshape_6d",
        lambda x: ops.reshape(x, (x.shape[2], *x.shape[:2], *x.shape[3:]), (1, 2, 0, 3, 5, 4)),
        (In((2, 2, 3, 3, 2, 2)),),
        (et.f32, et.i32),
    ),
    OpRecord("transpose", lambda x: ops.transpose(x, (2, 0, 1)), (In((2, 3, 4)),), ALL),
    OpRecord("slice", lambda x: ops.slice(x, (0, 1), (2, 3)), (In(S),), ALL),
    OpRecord(
        "slice_strided", lambda x: ops.slice(x, (1, 0), (7, 5), (2, 3)), (In((8, 5)),), NUMERIC
    ),
    OpRecord("slice_empty", lambda x: ops.slice(x, (1, 0), (1, 3)), (In(S),), NUMERIC),
    OpRecord(
        "concat",
        lambda a, b, c: ops.concat([a, b, c], 1),
        (In((2, 1)), In((2, 3)), In((2, 2))),
        ALL,
    ),
    OpRecord(
        "concat_zero_length_middle",
        lambda a, b, c: ops.concat([a, b, c], 0),
        (In((4,)), In((0,)), In((8,))),
        NUMERIC,
    ),
    OpRecord(
        "replace_slice",
        lambda x, u: ops.replace_slice(x, u, (1, 0), (5, 3), (2, 2)),
        (In((6, 4)), In((2, 2))),
        ALL,
    ),
    # Not gradient-checked: stop_gradient differs from the numeric derivative by design.
    OpRecord(
        "stop_gradient",
        lambda x: ops.add(ops.stop_gradient(x), x),
        (In(S),),
        NUMERIC,
        differentiable=False,
    ),
    # dot
    OpRecord("dot_matrix", ops.dot, (In((2, 3)), In((3, 4))), NUMERIC),
    OpRecord("dot_vector", ops.dot, (In((5,)), In((5,))), NUMERIC),
    OpRecord("dot_scalar", ops.dot, (In(()), In((2, 3))), NUMERIC),
    OpRecord("dot_2_axes", lambda a, b: ops.dot(a, b, 2), (In((2, 3, 4)), In((3, 4, 2))), NUMERIC),
    OpRecord("dot_matrix_2x0_0x2", ops.dot, (In((2, 0)), In((0, 2))), NUMERIC),
    # reductions
    *(
        OpRecord(
            f"{name}_{suffix}",
            lambda x, b=builder, a=axes: b(x, a),
            (In((2, 3, 4), low=-2, high=2),),
            NUMERIC,
        )
        for name, builder in (
            ("reduce_sum", ops.reduce_sum),
            ("reduce_prod", ops.reduce_prod),
            ("reduce_max", ops.reduce_max),
            ("reduce_min", ops.reduce_min),
        )
        for suffix, axes in (
            ("axis1", (1,)),
            ("all", (0, 1, 2)),
            ("negative", (-1, 0)),
            ("none", ()),
        )
    ),
    *(
        OpRecord(f"{name}_rows_zero", lambda x, b=builder: b(x, (1,)), (In((3, 0)),), NUMERIC)
        for name, builder in (
            ("reduce_sum", ops.reduce_sum),
            ("reduce_prod", ops.reduce_prod),
            ("reduce_max", ops.reduce_max),
            ("reduce_min", ops.reduce_min),
        )
    ),
    OpRecord(
        "reduce_sum_keep_dims", lambda x: ops.reduce_sum(x, (1,), keep_dims=True), (In(S),), NUMERIC
    ),
    # results: a parameter returned directly, one value returned several times
    OpRecord("parameter_as_output", lambda x: [x, ops.negative(x)], (In(S),), SIGNED),
    OpRecord(
        "aliased_output",
        lambda a, b: [ops.add(a, b)] * 2 + [ops.multiply(ops.add(a, b), b)],
        (In(S), In(S)),
        NUMERIC,
    ),
    # tuples and calls
    OpRecord(
        "tuple_results",
        lambda a, b: [ops.tuple_(a, ops.tuple_(ops.add(a, b), b))],
        (In(S), In(S)),
        NUMERIC,
    ),
    OpRecord(
        "get_tuple_element",
        lambda a, b: ops.get_tuple_element(ops.tuple_(a, ops.add(a, b)), 1),
        (In(S), In(S)),
        NUMERIC,
    ),
]


def _call_record(a: Output, b: Output) -> list[Output]:
    x = parameter(a.element_type, a.shape)
    y = parameter(b.element_type, b.shape)
    inner = Function([ops.multiply(ops.add(x, y), y), ops.tuple_(x, y)], [x, y], name="inner")
    product, pair = ops.call(inner, a, b)
    return [ops.subtract(product, ops.get_tuple_element(pair, 0))]


RECORDS.append(OpRecord("call", _call_record, (In(S), In(S)), NUMERIC))
