"""The error hierarchy.

Every error opgraph raises derives from :class:`OpgraphError` and from the builtin exception a
Python user would expect (``TypeError`` for ill-typed graphs, ``ValueError`` for bad values…), so
``except TypeError`` works as well as ``except og.OpTypeError``.
"""

from __future__ import annotations


class OpgraphError(Exception):
    """Base class of every error raised by opgraph."""


class OpTypeError(OpgraphError, TypeError):
    """An op's type rule rejected its inputs or attributes (raised while building a node)."""


class GraphError(OpgraphError, ValueError):
    """A graph, Function or call is malformed (bad parameters, bad arguments, aliasing…)."""


class CallTypeError(OpgraphError, TypeError):
    """A call's arguments have the wrong element type."""


class AliasingError(GraphError):
    """A call's result tensors overlap each other or an argument tensor."""


class UnsupportedOpError(OpgraphError, NotImplementedError):
    """A backend or a pass has no implementation for an op."""


class ConversionError(OpgraphError, ValueError):
    """A framework bridge could not convert a model."""


class SerializationError(OpgraphError, ValueError):
    """A file or byte string could not be serialized or deserialized."""


class NotDifferentiableError(OpgraphError, TypeError):
    """A gradient was requested through an op that has no adjoint."""


class ExecutionError(OpgraphError, RuntimeError):
    """A kernel failed while an Executable ran; the message names the node."""


class RegistryError(OpgraphError, KeyError):
    """A registry lookup missed, or a key was registered twice."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""
