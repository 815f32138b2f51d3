"""opgraph: a strongly-typed tensor computation-graph library (nGraph design).

Build graphs of ops, group them into Functions, compile them on a backend and run them::

    import opgraph as og
    from opgraph import ops

    a, b, c = (og.parameter(og.f32, (32, 32)) for _ in range(3))
    f = og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c], name="f")
    exe = og.backend("INTERPRETER").compile(f)
"""

import importlib
from typing import TYPE_CHECKING

from opgraph import autodiff, builders, distributed, ops, optim, passes, pattern
from opgraph import backends as _backends  # noqa: F401 - registers the built-in backends
from opgraph import logs as _logs
from opgraph._version import __version__ as __version__
from opgraph.core import element_type as element
from opgraph.core.dim import DimExpr, dim
from opgraph.core.element_type import (
    ElementType,
    bf16,
    boolean,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
)
from opgraph.core.errors import (
    AliasingError,
    CallTypeError,
    ConversionError,
    ExecutionError,
    GraphError,
    NotDifferentiableError,
    OpgraphError,
    OpTypeError,
    RegistryError,
    SerializationError,
    UnsupportedOpError,
)
from opgraph.core.function import Function
from opgraph.core.literals import constant, parameter
from opgraph.core.node import Node, Output
from opgraph.core.op import Op, opclass
from opgraph.core.tensor_type import TensorType, TupleType
from opgraph.distributed.communicator import CommunicatorError
from opgraph.runtime.backend import (
    Backend,
    BackendStatus,
    BackendUnavailableError,
    Executable,
    PerformanceCounter,
    backend,
    backend_status,
    register_backend,
)
from opgraph.runtime.tensor import Tensor
from opgraph.serialize import deserialize, load, save, serialize
from opgraph.visualize import visualize

if TYPE_CHECKING:
    # At run time ``opgraph.backends`` is the backends package itself, made callable
    # (``og.backends()`` lists the usable backends) so that ``import
    # opgraph.backends.cpu.codegen.x as y`` still finds the subpackage.
    from opgraph.runtime.backend import backends as backends

_logs.configure_from_environment()  # a NullHandler; a stderr handler when OPGRAPH_LOG is set


def __getattr__(name: str) -> object:
    """``og.onnx`` is the ONNX bridge, imported on first use (onnx is an optional extra)."""
    if name == "onnx":
        return importlib.import_module("opgraph.frontends.onnx")
    raise AttributeError(f"module 'opgraph' has no attribute {name!r}")


__all__ = [
    "AliasingError",
    "Backend",
    "BackendStatus",
    "BackendUnavailableError",
    "CallTypeError",
    "CommunicatorError",
    "ConversionError",
    "DimExpr",
    "ElementType",
    "Executable",
    "ExecutionError",
    "Function",
    "GraphError",
    "Node",
    "NotDifferentiableError",
    "Op",
    "OpTypeError",
    "OpgraphError",
    "Output",
    "PerformanceCounter",
    "RegistryError",
    "SerializationError",
    "Tensor",
    "TensorType",
    "TupleType",
    "UnsupportedOpError",
    "autodiff",
    "backend",
    "backend_status",
    "backends",
    "bf16",
    "boolean",
    "builders",
    "constant",
    "deserialize",
    "dim",
    "distributed",
    "element",
    "f16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "load",
    "opclass",
    "optim",
    "ops",
    "parameter",
    "passes",
    "pattern",
    "register_backend",
    "save",
    "serialize",
    "u8",
    "u16",
    "u32",
    "u64",
    "visualize",
]
