"""Python scalars as typed constants; defined in :mod:`opgraph.ops.broadcasting`."""

from opgraph.ops.broadcasting import scalar_like

__all__ = ["scalar_like"]
