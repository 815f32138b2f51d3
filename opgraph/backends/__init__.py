"""Backends. Importing this package registers the built-in ones."""

from opgraph.backends import interpreter as interpreter  # registers INTERPRETER
