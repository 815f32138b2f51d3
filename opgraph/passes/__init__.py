"""Graph passes: pure ``Function -> Function`` functions named with a verb, the PassManager,
the default pipeline (:func:`optimize`), and the analyses backends use (liveness, memory
planning). See ``docs/passes.md``."""

from opgraph.passes.decompose import decompose
from opgraph.passes.eliminate_common_subexpressions import eliminate_common_subexpressions
from opgraph.passes.eliminate_dead_code import eliminate_dead_code
from opgraph.passes.eliminate_nops import eliminate_nops
from opgraph.passes.eliminate_reshapes import eliminate_reshapes
from opgraph.passes.fold_constants import fold_constants
from opgraph.passes.fuse_core import fuse_core
from opgraph.passes.inline_calls import inline_calls
from opgraph.passes.liveness import Liveness, liveness
from opgraph.passes.manager import PassManager, PassTiming, verify_function
from opgraph.passes.pipeline import optimize
from opgraph.passes.plan_memory import IN_PLACE, MemoryPlan, in_place_pairs, plan_memory
from opgraph.passes.simplify_algebra import simplify_algebra
from opgraph.passes.sink_transposes import sink_transposes
from opgraph.passes.specialize_shapes import specialize_shapes
from opgraph.passes.transpose_products import transpose_products
from opgraph.passes.unbox_tuples import unbox_tuples

__all__ = [
    "IN_PLACE",
    "Liveness",
    "MemoryPlan",
    "PassManager",
    "PassTiming",
    "decompose",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "eliminate_nops",
    "eliminate_reshapes",
    "fold_constants",
    "fuse_core",
    "in_place_pairs",
    "inline_calls",
    "liveness",
    "optimize",
    "plan_memory",
    "simplify_algebra",
    "sink_transposes",
    "specialize_shapes",
    "transpose_products",
    "unbox_tuples",
    "verify_function",
]
