"""Patterns over graph values and rewrite rules (see ``docs/passes.md``).

``P`` builds patterns, ``Rules`` tables of ``(pattern, callback)`` entries, and ``rewrite``
applies a table to a Function until nothing changes.
"""

from opgraph.pattern.pattern import P, Pattern, PatternError, constant_value, source_constant
from opgraph.pattern.rewrite import MatchContext, Rule, Rules, rewrite

__all__ = [
    "MatchContext",
    "P",
    "Pattern",
    "PatternError",
    "Rule",
    "Rules",
    "constant_value",
    "rewrite",
    "source_constant",
]
