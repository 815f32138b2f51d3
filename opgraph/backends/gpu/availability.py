"""Whether the GPU backend can run here: CuPy imports and a CUDA device is present.

The probe runs once per process; it imports CuPy only when it is installed.
"""

from __future__ import annotations

import functools
import importlib.util


@functools.cache
def probe() -> tuple[bool, str]:
    """(usable, why): usable when CuPy imports and reports at least one CUDA device."""
    if importlib.util.find_spec("cupy") is None:
        return False, "CuPy is not installed (pip install 'opgraph[gpu]')"
    try:
        # deferred: cupy is an optional dependency (and slow to import)
        import cupy

        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as error:  # ImportError of a broken install, CUDARuntimeError, …
        return False, f"CuPy cannot reach a CUDA device ({type(error).__name__}: {error})"
    if count <= 0:
        return False, "CuPy reports no CUDA device"
    return True, f"{count} CUDA device(s)"


def available() -> bool:
    """Whether ``og.backend("GPU")`` is registered: CuPy imports and a CUDA device exists."""
    return probe()[0]


def unavailable_reason() -> str:
    """Why the GPU backend is unavailable ("" when it is available)."""
    usable, why = probe()
    return "" if usable else why
