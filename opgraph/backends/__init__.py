"""Backends. Importing this package registers the built-in ones."""

from opgraph.backends import cpu as cpu  # registers CPU
from opgraph.backends import gpu as gpu  # registers GPU when CuPy sees a CUDA device
from opgraph.backends import interpreter as interpreter  # registers INTERPRETER
