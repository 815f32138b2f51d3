"""Graph passes: pure ``Function -> Function`` functions named with a verb."""

from opgraph.passes.decompose import decompose
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.unbox_tuples import unbox_tuples

__all__ = ["decompose", "inline_calls", "unbox_tuples"]
