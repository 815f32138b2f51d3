"""2-D max pooling on the CPU by rows of maxima (``PoolEmitter.window_max``: the window's
input rows reduced over whole rows, then each output column's window of that row) agrees
exactly with INTERPRETER's reference: padding, strides, dilations, ceil mode, NaN and
infinities, integer and 16-bit float data. These compile with the default form, which is now
the band form (``PoolEmitter.plane_max``) wherever a band holds an output row;
test_cpu_max_pool_plane.py runs the rows form with ``PLANE_MAX`` off."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend
from opgraph.backends.cpu.codegen import windows

INTERPRETER = og.backend("INTERPRETER")

CASES = [  # (shape, window, strides, padding below, padding above, dilations, ceil)
    ((1, 8, 112, 112), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), False),  # ResNet's stem pool
    ((2, 3, 9, 11), (2, 3), (1, 1), (0, 1), (1, 2), (1, 1), False),  # uneven padding
    ((1, 4, 10, 13), (3, 2), (3, 2), (1, 0), (1, 1), (2, 3), False),  # dilations, stride 3
    ((1, 2, 7, 7), (3, 3), (2, 2), (0, 0), (0, 0), (1, 1), True),  # ceil: a window past the end
    ((3, 5, 6, 4), (1, 1), (1, 1), (0, 0), (0, 0), (1, 1), False),  # 1x1: a copy
    ((1, 1, 5, 5), (5, 5), (1, 1), (2, 2), (2, 2), (1, 1), False),  # window as wide as the data
]


@pytest.mark.parametrize(("shape", "window", "strides", "below", "above", "dil", "ceil"), CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint8, np.float16])
def test_max_pool_rows_are_exact(
    cpu: CpuBackend,
    shape: tuple[int, int, int, int],
    window: tuple[int, int],
    strides: tuple[int, int],
    below: tuple[int, int],
    above: tuple[int, int],
    dil: tuple[int, int],
    ceil: bool,
    dtype: type,
) -> None:
    rng = np.random.default_rng(sum(shape))
    data: np.ndarray
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        data = rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    else:
        data = (rng.standard_normal(shape) * 4).astype(dtype)
        flat = data.reshape(-1)
        flat[rng.integers(0, flat.size, 3)] = np.nan
        flat[rng.integers(0, flat.size, 2)] = -np.inf
        flat[rng.integers(0, flat.size, 2)] = np.inf
    x = og.parameter(og.element.from_dtype(np.dtype(dtype)), shape)
    y = ops.max_pool(x, window, strides, below, above, dil, ceil_mode=ceil)
    fn = og.Function([y], [x])
    got = cpu.compile(fn)(data)[0]
    want = INTERPRETER.compile(fn)(data)[0]
    np.testing.assert_array_equal(got, want)


def test_rows_past_the_stack_limit_keep_the_tap_loop(cpu: CpuBackend) -> None:
    """A padded input row longer than ``MAX_ROW`` is pooled tap by tap (no row of maxima on
    the stack), and agrees too."""
    width = windows.MAX_ROW + 5
    data = np.random.default_rng(2).standard_normal((1, 1, 3, width)).astype(np.float32)
    x = og.parameter(og.f32, data.shape)
    fn = og.Function([ops.max_pool(x, (2, 2), (1, 2), (0, 1), (0, 0))], [x])
    exe = cpu.compile(fn)
    assert "m[" not in exe.source()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(exe(data)[0], INTERPRETER.compile(fn)(data)[0])
