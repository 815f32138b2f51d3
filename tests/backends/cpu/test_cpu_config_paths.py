"""``CpuConfig.cache_dir`` takes any path form a user writes, and rejects what is not a path
with a clear error (a str crashed deep in the cache with AttributeError)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, CpuConfigError, default_config


def test_a_str_cache_dir_is_a_path_and_compiles(tmp_path):
    config = dataclasses.replace(default_config(), cache_dir=str(tmp_path / "cache"))
    assert config.cache_dir == tmp_path / "cache"
    x = og.parameter(og.f32, (3,))
    exe = CpuBackend(config).compile(og.Function([ops.add(x, x)], [x]))
    np.testing.assert_array_equal(exe(np.array([1, 2, 3], np.float32))[0], [2, 4, 6])
    assert any((tmp_path / "cache").iterdir())


@pytest.mark.parametrize("bad", [3, None, b"/tmp/x"])
def test_a_cache_dir_that_is_not_a_path_is_a_clear_error(bad):
    with pytest.raises(CpuConfigError, match=r"cache_dir must be a path \(str or os.PathLike\)"):
        dataclasses.replace(default_config(), cache_dir=bad)
