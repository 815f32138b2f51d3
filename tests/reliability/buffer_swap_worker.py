"""Buffer-swap fuzzer body, run in a subprocess by ``test_tensor_buffers.py``.

    python -X faulthandler buffer_swap_worker.py CASES SEED

Each case gives one tensor of a call a bad buffer — short, long, strided, read-only,
bytes-backed, wrongly typed, not an array, changed in place, or overlapping another tensor —
either through the validated ``buffer`` setter or bypassing it (writing the private slot), on
INTERPRETER and CPU. The call must raise an OpgraphError and write nothing: every output and
every bad buffer keeps its sentinel. A memory error kills this process (faulthandler prints
where), which fails the test. Prints one JSON line: counts per outcome.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

import opgraph as og
from opgraph import ops

SHAPE = (6, 8)
N = SHAPE[0] * SHAPE[1]
SENTINEL = -7.0


def make_function() -> og.Function:
    x, y = og.parameter(og.f32, SHAPE, name="x"), og.parameter(og.f32, SHAPE, name="y")
    return og.Function([ops.add(x, y), ops.multiply(x, y)], [x, y], name="swap")


def sentinel(count: int, dtype: Any = np.float32) -> np.ndarray:
    return np.full(count, SENTINEL, dtype)


def read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


#: name -> bad buffer for a tensor of SHAPE f32 (fresh each time). All hold sentinels.
BAD_BUFFERS: dict[str, Callable[[], Any]] = {
    "short": lambda: sentinel(2),
    "short-by-one": lambda: sentinel(N - 1).reshape(-1),
    "long": lambda: sentinel(N + 16),
    "strided": lambda: sentinel(2 * N)[::2].reshape(SHAPE),
    "fortran": lambda: np.asfortranarray(sentinel(N).reshape(SHAPE)),
    "transposed": lambda: sentinel(N).reshape(SHAPE[::-1]).T,
    "read-only": lambda: read_only(sentinel(N).reshape(SHAPE)),
    "bytes-backed": lambda: np.frombuffer(sentinel(N).tobytes(), np.float32).reshape(SHAPE),
    "float64": lambda: sentinel(N, np.float64).reshape(SHAPE),
    "int32": lambda: np.full(SHAPE, -7, np.int32),
    "big-endian": lambda: sentinel(N, ">f4").reshape(SHAPE),
    "float16-long": lambda: sentinel(2 * N, np.float16).reshape(SHAPE[0], -1),
    "zero-d": lambda: np.float32(SENTINEL),
    "list": lambda: [SENTINEL] * N,
    "bytes": lambda: bytes(4 * N),
    "memoryview": lambda: memoryview(bytearray(4 * N)),
    "none": lambda: None,
    "matrix-of-objects": lambda: np.full(SHAPE, SENTINEL, object),
}

#: name -> in-place change to a tensor's own array (the tensor object is unchanged).
IN_PLACE: dict[str, Callable[[np.ndarray], None]] = {
    "dtype-int32": lambda a: setattr(a, "dtype", np.int32),
    "dtype-int8": lambda a: setattr(a, "dtype", np.int8),
    "shape": lambda a: setattr(a, "shape", (N,)),
    "read-only": lambda a: setattr(a.flags, "writeable", False),
    "strides": lambda a: _set_strides(a),
}


def _set_strides(a: np.ndarray) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        a.strides = (a.strides[0], 0)  # still within its memory, no longer C-contiguous


def fresh(backend: og.Backend) -> tuple[list[Any], list[Any]]:
    rng = np.random.default_rng(0)
    inputs = [backend.create_tensor(og.f32, SHAPE, rng.random(SHAPE, np.float32)) for _ in "xy"]
    outputs = [backend.create_tensor(og.f32, SHAPE, sentinel(N).reshape(SHAPE)) for _ in "ab"]
    return inputs, outputs


def untouched(watched: list[np.ndarray]) -> bool:
    """Every watched array (flat f32 views taken before the case) still holds sentinels."""
    return all(np.all(np.asarray(w, np.float64) == SENTINEL) for w in watched)


def one_case(rng: np.random.Generator, exe: og.Executable, backend: og.Backend) -> str:
    inputs, outputs = fresh(backend)
    side = rng.choice(["input", "output"])
    position = int(rng.integers(2))
    victim = (inputs if side == "input" else outputs)[position]
    mode = rng.choice(["setter", "bypass", "in-place", "overlap"])
    watched = [o._buffer.reshape(-1) for o in outputs]  # views: the memory, whatever happens
    if mode == "in-place":
        name = str(rng.choice(list(IN_PLACE)))
        IN_PLACE[name](victim._buffer)
    elif mode == "overlap":
        base = sentinel(2 * N)
        watched.append(base)
        shift = int(rng.integers(0, N))
        other = outputs[1 - position] if side == "output" else outputs[position]
        object.__setattr__(victim, "_buffer", base[:N].reshape(SHAPE))
        object.__setattr__(other, "_buffer", base[shift : shift + N].reshape(SHAPE))
        name = f"overlap-{shift}"
    else:
        name = str(rng.choice(list(BAD_BUFFERS)))
        bad = BAD_BUFFERS[name]()
        if mode == "setter":
            kept = victim._buffer
            try:
                victim.buffer = bad
            except og.OpgraphError:
                if victim._buffer is not kept:
                    raise AssertionError(f"setter {name}: refused but replaced it") from None
                return "setter-refused"
            raise AssertionError(f"setter {side} {name}: accepted a bad buffer")
        object.__setattr__(victim, "_buffer", bad)
        if isinstance(bad, np.ndarray) and bad.dtype.kind == "f" and bad.size:
            watched.append(bad)
    try:
        exe.call(outputs, inputs)
    except og.OpgraphError as error:
        if not untouched(watched):
            raise AssertionError(f"{mode} {side} {position} {name}: written: {error}") from None
        return f"refused:{type(error).__name__}"
    if not (side == "input" and name in ("read-only", "bytes-backed")):
        raise AssertionError(f"{mode} {side} {position} {name}: call accepted a bad buffer")
    x, y = (np.asarray(t._buffer) for t in inputs)
    if not (
        np.array_equal(outputs[0]._buffer, x + y) and np.array_equal(outputs[1]._buffer, x * y)
    ):
        raise AssertionError(f"{mode} {side} {name}: read-only input gave a wrong result")
    return "accepted-read-only-input"


def main() -> None:
    cases, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = np.random.default_rng(seed)
    fn = make_function()
    executables = [(og.backend(n).compile(fn), og.backend(n)) for n in ("INTERPRETER", "CPU")]
    outcomes: Counter[str] = Counter()
    for _ in range(cases):
        exe, backend = executables[int(rng.integers(len(executables)))]
        outcomes[f"{backend.name}:{one_case(rng, exe, backend)}"] += 1
    print(json.dumps(dict(outcomes)))


if __name__ == "__main__":
    main()
