"""Test support: the numpy oracle, the op record table, and comparison helpers."""
