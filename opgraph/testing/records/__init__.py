"""The op record table, one module per op family."""

from __future__ import annotations

from opgraph.testing.records import (
    activation,
    collective,
    convolution,
    core_ops,
    dynamic,
    elementwise,
    indexing,
    linalg,
    movement,
    nn,
    normalization,
    ordering,
    pooling,
    quantization,
    rearrange,
    reduction,
    resize,
    rnn,
    shape_tensors,
    shaping,
)
from opgraph.testing.records.base import In, OpRecord

#: Every record, from every family module.
RECORDS: list[OpRecord] = [
    *core_ops.RECORDS,
    *elementwise.RECORDS,
    *reduction.RECORDS,
    *movement.RECORDS,
    *rearrange.RECORDS,
    *indexing.RECORDS,
    *nn.RECORDS,
    *quantization.RECORDS,
    *activation.RECORDS,
    *normalization.RECORDS,
    *shaping.RECORDS,
    *rnn.RECORDS,
    *resize.RECORDS,
    *linalg.RECORDS,
    *collective.RECORDS,
    *pooling.RECORDS,
    *convolution.RECORDS,
    *ordering.RECORDS,
    *dynamic.RECORDS,
]

#: Records whose output size the input values decide (tag ``data_dependent``): they run on
#: INTERPRETER only (CPU and GPU refuse them, format 1 cannot store them), so they are kept
#: out of ``RECORDS``, which every backend and the serializer round trip iterate.
DATA_DEPENDENT_RECORDS: list[OpRecord] = [*dynamic.DATA_DEPENDENT, *shape_tensors.DATA_DEPENDENT]

__all__ = ["DATA_DEPENDENT_RECORDS", "RECORDS", "In", "OpRecord"]
