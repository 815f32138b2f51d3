"""Records for linear quantization: ties (round half to even), saturation, per-axis scales,
every quantized type. Scales are powers of two, so ``x / scale`` is exact in every float type
and the integer results do not depend on the precision a backend divides in."""

from __future__ import annotations

from opgraph import ops
from opgraph.core import element_type as et
from opgraph.testing.records.base import FLOATS, In, OpRecord

# x / 0.5: ties at ±0.5, ±1.5, ±2.5 and values beyond every 8-bit range.
TIES = [-1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 200.0, -200.0]
PER_AXIS_SCALES = [0.25, 0.5, 0.125]
#: The integer products' inputs all have fixed types: one run (the element type is unused).
INTEGER_PRODUCT = (et.i32,)

RECORDS: list[OpRecord] = [
    *(
        OpRecord(
            f"quantize_linear_ties_saturate_{t.name}",
            lambda x, s, z: ops.quantize_linear(x, s, z),
            (In((8,), values=TIES), In((), values=0.5), In((), t, values=zero)),
            FLOATS,
        )
        for t, zero in ((et.u8, 3), (et.i8, -2), (et.u16, 0), (et.i16, 5))
    ),
    OpRecord(
        "quantize_linear_per_axis",
        lambda x, s, z: ops.quantize_linear(x, s, z, axis=1),
        (In((2, 3, 2), low=-20, high=20), In((3,), values=PER_AXIS_SCALES), In((3,), et.i8)),
        FLOATS,
    ),
    OpRecord(
        "quantize_linear_default_zero_point",
        lambda x, s: ops.quantize_linear(x, s, axis=-1, element_type=et.i8),
        (In((4, 3), low=-20, high=20), In((3,), values=PER_AXIS_SCALES)),
        FLOATS,
    ),
    *(
        OpRecord(
            f"dequantize_linear_{t.name}",
            lambda x, s, z: ops.dequantize_linear(x, s, z),
            (In((2, 3), t, low=-100, high=200), In(()), In((), t, low=-5, high=5)),
            FLOATS,
        )
        for t in (et.u8, et.i8, et.u16, et.i16, et.i32)
    ),
    OpRecord(
        "dequantize_linear_per_axis",
        lambda x, s, z: ops.dequantize_linear(x, s, z, axis=0),
        (In((3, 4), et.u8, low=0, high=255), In((3,)), In((3,), et.u8, low=0, high=255)),
        FLOATS,
    ),
    OpRecord(
        "quantize_dequantize_round_trip",
        lambda x, s: ops.dequantize_linear(ops.quantize_linear(x, s, axis=0), s, axis=0),
        (In((3, 4), low=0, high=30), In((3,), values=PER_AXIS_SCALES)),
        FLOATS,
        differentiable=False,  # QuantizeLinear is not differentiable
    ),
    OpRecord(
        "matmul_integer_u8_i8_per_column",
        lambda a, b, az, bz: ops.matmul_integer(a, b, az, bz),
        (
            In((2, 3, 7), et.u8, low=0, high=255),
            In((7, 5), et.i8, low=-128, high=127),
            In((), et.u8, values=131),
            In((5,), et.i8, low=-3, high=3),
        ),
        INTEGER_PRODUCT,
        differentiable=False,
    ),
    OpRecord(
        "matmul_integer_i8_u8",
        lambda a, b, az, bz: ops.matmul_integer(a, b, az, bz),
        (
            In((4, 9), et.i8, low=-128, high=127),
            In((9, 3), et.u8, low=0, high=255),
            In((), et.i8, values=-5),
            In((), et.u8, values=200),
        ),
        INTEGER_PRODUCT,
        differentiable=False,
    ),
    OpRecord(
        "conv_integer_padded_strided_per_channel",
        lambda x, w, xz, wz: ops.conv_integer(
            x, w, xz, wz, strides=(2, 1), padding_below=(1, 1), padding_above=(1, 0)
        ),
        (
            In((2, 3, 5, 6), et.u8, low=0, high=255),
            In((4, 3, 3, 2), et.i8, low=-128, high=127),
            In((), et.u8, values=77),
            In((4,), et.i8, low=-2, high=2),
        ),
        INTEGER_PRODUCT,
        differentiable=False,
    ),
    OpRecord(
        "conv_integer_grouped_dilated_1d",
        lambda x, w, xz, wz: ops.conv_integer(x, w, xz, wz, dilations=(2,), groups=2),
        (
            In((1, 4, 9), et.i8, low=-128, high=127),
            In((6, 2, 3), et.i8, low=-128, high=127),
            In((), et.i8, values=-9),
            In((), et.i8, values=0),
        ),
        INTEGER_PRODUCT,
        differentiable=False,
    ),
]
