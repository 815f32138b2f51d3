"""Records for pooling ops."""

from opgraph.testing.records.base import OpRecord

RECORDS: list[OpRecord] = []
