"""Op classes and their builders, one module per family.

``ops.Add`` is the class, ``ops.add`` the builder. Every family module lists its public names
in ``__all__`` (a test checks the lists are complete); this package re-exports them all, and
the broadcasting helpers (``scalar_like``, ``broadcast_to``, ``numpy_broadcast``). Importing it
registers the operator sugar of ``Output`` (``a + b``, ``x * 0.5``; see ``ops.operators``).
"""

from opgraph.core.literals import Constant, Parameter, constant, parameter
from opgraph.ops import operators as _operators
from opgraph.ops.activation import *
from opgraph.ops.bitwise import *
from opgraph.ops.broadcasting import *
from opgraph.ops.collective import *
from opgraph.ops.conversion import *
from opgraph.ops.convolution import *
from opgraph.ops.dynamic import *
from opgraph.ops.elementwise import *
from opgraph.ops.indexing import *
from opgraph.ops.linalg import *
from opgraph.ops.movement import *
from opgraph.ops.nn import *
from opgraph.ops.normalization import *
from opgraph.ops.ordering import *
from opgraph.ops.pooling import *
from opgraph.ops.quantization import *
from opgraph.ops.rearrange import *
from opgraph.ops.reduction import *
from opgraph.ops.resize import *
from opgraph.ops.rnn import *
from opgraph.ops.shape_tensors import *
from opgraph.ops.shaping import *
from opgraph.ops.structural import *
from opgraph.ops.trigonometric import *

FAMILIES = (
    "conversion",
    "elementwise",
    "linalg",
    "movement",
    "reduction",
    "structural",
    "indexing",
    "nn",
    "quantization",
    "activation",
    "normalization",
    "shaping",
    "rnn",
    "resize",
    "ordering",
    "convolution",
    "pooling",
    "bitwise",
    "trigonometric",
    "rearrange",
    "collective",
    "dynamic",
    "shape_tensors",
)
