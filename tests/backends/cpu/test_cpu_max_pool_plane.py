"""2-D max pooling on the CPU by bands of padded rows in flat loops
(``PoolEmitter.plane_max``) agrees exactly with INTERPRETER: strides 1, 2 and 3, dilations,
uneven padding, ceil mode, one band and many (small ``PLANE_BAND``), NaN and infinities,
integer and 16-bit float data, AVX2 code; a band too small for one output row keeps the rows
form."""

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfigError, default_config
from opgraph.backends.cpu.codegen import windows

INTERPRETER = og.backend("INTERPRETER")

CASES = [  # (shape, window, strides, padding below, padding above, dilations, ceil)
    ((1, 3, 28, 28), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), False),  # stride 1, one band
    ((1, 2, 112, 112), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), False),  # the stem: bands
    ((2, 3, 9, 11), (2, 3), (1, 1), (0, 1), (1, 2), (1, 1), False),  # uneven padding
    ((1, 4, 10, 13), (3, 2), (3, 2), (1, 0), (1, 1), (2, 3), False),  # dilations, stride 3
    ((1, 2, 7, 7), (3, 3), (2, 2), (0, 0), (0, 0), (1, 1), True),  # ceil: a window past the end
    ((1, 1, 5, 5), (5, 5), (1, 1), (2, 2), (2, 2), (1, 1), False),  # window as wide as the data
    ((1, 2, 13, 6), (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), False),  # odd rows dropped
]


def data_for(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    rng = np.random.default_rng(sum(shape))
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    data = (rng.standard_normal(shape) * 4).astype(dtype)
    flat = data.reshape(-1)
    flat[rng.integers(0, flat.size, 3)] = np.nan
    flat[rng.integers(0, flat.size, 2)] = -np.inf
    flat[rng.integers(0, flat.size, 2)] = np.inf
    return data


def check(cpu: CpuBackend, case: tuple, dtype: type, plane: bool) -> None:
    shape, window, strides, below, above, dil, ceil = case
    data = data_for(shape, dtype)
    x = og.parameter(og.element.from_dtype(np.dtype(dtype)), shape)
    y = ops.max_pool(x, window, strides, below, above, dil, ceil_mode=ceil)
    fn = og.Function([y], [x])
    exe = cpu.compile(fn)
    assert ("hm[q] = a;" in exe.source()) == plane  # type: ignore[attr-defined]
    np.testing.assert_array_equal(exe(data)[0], INTERPRETER.compile(fn)(data)[0])


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.float16])
def test_max_pool_plane_is_exact(cpu: CpuBackend, case: tuple, dtype: type) -> None:
    check(cpu, case, dtype, True)


@pytest.mark.parametrize("case", CASES)
def test_many_small_bands(cpu: CpuBackend, case: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bands of one or a few output rows (the last band shorter than the others)."""
    shape, window, strides, below, _, dil, _ = case
    pitch = max(below[1] + shape[3], 2 * window[1] * dil[1]) + strides[1]
    span = (window[0] - 1) * dil[0] + 1
    monkeypatch.setattr(windows, "PLANE_BAND", pitch * (span + strides[0]))
    check(cpu, case, np.float32, True)


def test_a_band_too_small_keeps_the_rows(cpu: CpuBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(windows, "PLANE_BAND", 16)
    check(cpu, CASES[1], np.float32, False)


def test_rows_form_still_exact(cpu: CpuBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PLANE_MAX`` off: the rows form (``window_max``), as before."""
    monkeypatch.setattr(windows, "PLANE_MAX", False)
    for case in CASES:
        check(cpu, case, np.float32, False)


@pytest.mark.parametrize("case", [CASES[0], CASES[1], CASES[3]])
def test_avx2_build(case: tuple) -> None:
    """AVX2 code: bands for a column stride of 1, the rows form (the ``#else`` branch) for
    column-strided pools."""
    try:
        config = dataclasses.replace(default_config(), isa="avx2", num_threads=2)
        backend = CpuBackend(config)
        check(backend, case, np.float32, True)
    except CpuConfigError as e:
        pytest.skip(f"this CPU cannot run AVX2 code: {e}")
