"""Logging: the one module that reads ``OPGRAPH_LOG``.

opgraph logs through the standard :mod:`logging` module, under the logger ``"opgraph"`` and
its children, one per component:

* ``opgraph.passes``: each pass with its time and node counts (DEBUG), each pass pipeline
  (INFO);
* ``opgraph.cpu``: each CPU compile with its step and kernel counts and times (INFO), compile
  cache hits (DEBUG) and misses (INFO), each C compiler run with its duration (INFO) and
  each of its translation units (DEBUG);
* ``opgraph.distributed``: which communicator ``og.distributed.init()`` selected (INFO).

As a library should, opgraph only adds a :class:`logging.NullHandler` to ``"opgraph"``: an
application configures logging as it likes (``logging.basicConfig(level=logging.INFO)``).
Setting ``OPGRAPH_LOG`` to ``debug``, ``info``, ``warning`` or ``error`` also installs a
handler writing to stderr at that level (``OPGRAPH_LOG=info opgraph demo``).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

LOGGER_NAME = "opgraph"
ENVIRONMENT_VARIABLE = "OPGRAPH_LOG"
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
FORMAT = "%(asctime)s %(name)s %(levelname)s: %(message)s"

_installed: logging.Handler | None = None


def requested_level() -> int | None:
    """The level ``OPGRAPH_LOG`` asks for, or None when it is unset or empty.

    An unknown value warns (naming the variable, the value and the accepted ones) and gives
    None: a typo in an environment variable should not stop a program.
    """
    value = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if not value:
        return None
    level = LEVELS.get(value.lower())
    if level is None:
        warnings.warn(
            f"{ENVIRONMENT_VARIABLE}={value!r} is not a log level; use one of "
            f"{', '.join(LEVELS)} (opgraph logs nothing to stderr)",
            RuntimeWarning,
            stacklevel=2,
        )
    return level


def configure_from_environment() -> None:
    """Give ``"opgraph"`` a NullHandler, and a stderr handler when ``OPGRAPH_LOG`` asks.

    Called once when opgraph is imported; calling it again replaces the stderr handler it
    installed (after a change of ``OPGRAPH_LOG``).
    """
    global _installed
    logger = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    if _installed is not None:
        logger.removeHandler(_installed)
        _installed = None
    level = requested_level()
    if level is None:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.setLevel(level)
    logger.addHandler(handler)
    logger.setLevel(level)
    _installed = handler
