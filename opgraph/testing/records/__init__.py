"""The op record table, one module per op family."""

from __future__ import annotations

from opgraph.testing.records import core_ops
from opgraph.testing.records.base import In, OpRecord

#: Every record, from every family module.
RECORDS: list[OpRecord] = [*core_ops.RECORDS]

__all__ = ["RECORDS", "In", "OpRecord"]
