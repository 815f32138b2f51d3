"""Comparing backend results with the oracle."""

from __future__ import annotations

import numpy as np


def assert_close(
    got: np.ndarray, want: np.ndarray, rtol: float, atol: float, what: str = ""
) -> None:
    """Equal dtype and shape; values within tolerance (NaN equals NaN; exact for integers)."""
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    np.testing.assert_allclose(
        got.astype(np.float64),
        want.astype(np.float64),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
        err_msg=what,
    )
