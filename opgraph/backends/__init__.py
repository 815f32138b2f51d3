"""Backends. Importing this package registers the built-in ones."""

from opgraph.backends import interpreter as interpreter  # registers INTERPRETER
from opgraph.backends import cpu as cpu  # registers CPU
