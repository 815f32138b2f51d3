"""INTERPRETER: the reference backend (clarity first)."""

from opgraph.backends.interpreter.backend import InterpreterBackend, InterpreterExecutable
from opgraph.runtime.backend import register_backend

register_backend("INTERPRETER", InterpreterBackend)

__all__ = ["InterpreterBackend", "InterpreterExecutable"]
