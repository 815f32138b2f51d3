"""Shared helpers for the pass tests (not a test module)."""

import numpy as np

from opgraph.testing.compare import assert_close
from opgraph.testing.oracle import evaluate


def op_names(fn):
    """The op names of ``fn``'s non-Parameter nodes, in order."""
    return [n.op.name for n in fn.ops]


def random_arguments(fn, seed=0, low=-2.0, high=2.0):
    rng = np.random.default_rng(seed)
    args = []
    for p in fn.parameters:
        dtype = p.element_type.dtype
        if p.element_type.is_boolean:
            args.append(rng.random(p.shape) < 0.5)
        elif p.element_type.is_real:
            args.append(rng.uniform(low, high, p.shape).astype(dtype))
        else:
            args.append(rng.integers(-5, 6, p.shape).astype(dtype))
    return args


def assert_same_numerics(before, after, seed=0, rtol=1e-5, atol=1e-6, low=-2.0, high=2.0):
    """``before`` and ``after`` agree on random arguments (the oracle evaluates both)."""
    args = random_arguments(before, seed, low, high)
    want = evaluate(before, args)
    got = evaluate(after, args)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert_close(g, w, rtol, atol, "after the pass")
