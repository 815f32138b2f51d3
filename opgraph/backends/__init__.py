"""Backends. Importing this package registers the built-in ones.

The package is also ``og.backends()``: calling it lists the backends that can run here
(:func:`opgraph.runtime.backend.backends`). A plain function of that name on ``opgraph`` would
hide the package from ``import opgraph.backends.<sub> as name``.
"""

import sys
import types

from opgraph.backends import cpu as cpu  # registers CPU
from opgraph.backends import gpu as gpu  # registers GPU when CuPy sees a CUDA device
from opgraph.backends import interpreter as interpreter  # registers INTERPRETER
from opgraph.runtime.backend import backends as _usable


class _CallablePackage(types.ModuleType):
    """This package's class: calling it is :func:`opgraph.runtime.backend.backends`."""

    def __call__(self) -> list[str]:
        return _usable()


sys.modules[__name__].__class__ = _CallablePackage
