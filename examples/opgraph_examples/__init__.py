"""The demos behind ``opgraph demo``, ``opgraph train-demo`` and ``opgraph viz seed|mlp``.

Examples of using opgraph, not part of the library: the package installs with opgraph (so the
commands work from an installed copy) and lives in ``examples/`` of a source checkout, beside
the example scripts that use it.
"""
