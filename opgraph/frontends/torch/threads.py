"""Sharing torch's OpenMP team with opgraph's parallel kernels.

torch's CPU wheels run ATen's parallel ops on GNU OpenMP, whose idle workers spin for
milliseconds after each parallel region. Between opgraph's calls in a ``torch.compile``d
training step, torch's own ops run (the loss, AOTAutograd's glue, the optimizer), and a second
pool (opgraph's) would then fight torch's spinning workers for the cores. Before each call of
a compiled forward or backward graph of a ``torch.compile``d training step (autograd.py) the
bridge declares torch's libgomp
(:func:`opgraph.runtime.host_threads.declare_host_openmp`), and the CPU backend runs its
parallel kernels on that team (docs/torch.md, "Threads"). ``compile_train_step`` has no torch
op inside its step and withdraws the declaration
(:func:`opgraph.runtime.host_threads.withdraw_host_openmp`): its jobs follow each other
closely, and opgraph's own pool stops spinning sooner than libgomp's workers and never waits
for a worker that has not joined (libgomp's closing barrier does).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from opgraph.runtime.host_threads import declare_host_openmp, withdraw_host_openmp


@functools.cache
def torch_openmp_library() -> str | None:
    """The libgomp torch's ATen runs on (the file in torch's ``lib`` directory, else the
    soname ``libgomp.so.1``), or None when ATen's parallel backend is not OpenMP."""
    info = torch.__config__.parallel_info()
    backend = info.rpartition("ATen parallel backend:")[2].strip()
    if not backend.startswith("OpenMP"):
        return None
    bundled = sorted((Path(torch.__file__).parent / "lib").glob("libgomp*.so*"))
    return str(bundled[0]) if bundled else "libgomp.so.1"


_enabled = True


def share_torch_team(enabled: bool) -> None:
    """Whether ``torch.compile``d training steps run opgraph's parallel kernels on torch's
    OpenMP team (the default) or on opgraph's own thread pool (``False``: on a machine whose
    cores are shared with other busy processes the own pool measured faster, docs/torch.md,
    "Threads")."""
    global _enabled
    _enabled = enabled
    if not enabled:
        withdraw_host_openmp()


def share_torch_threads() -> None:
    """Declare torch's OpenMP team to opgraph's backends, unless :func:`share_torch_team`
    turned that off (cheap when nothing changes: the bridge calls this before each compiled
    forward and backward of a training step)."""
    library = torch_openmp_library() if _enabled else None
    if library is not None:
        declare_host_openmp(library)
