"""Tensor buffers cannot make a backend write out of bounds (repro 03) and call validation is
linear in the number of tensors (repro 08).

The buffer tests run in a subprocess with faulthandler on: a memory error there fails the
test with a native traceback instead of killing pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import executable
from opgraph.core.tensor_type import TensorType
from opgraph.runtime import validation
from opgraph.runtime.tensor import Tensor

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def run_python(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run python with this checkout's opgraph, faulthandler on (crashes print a traceback)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_buffer_swap_fuzz(fuzz_cases):
    result = run_python(str(HERE / "buffer_swap_worker.py"), str(fuzz_cases(600)), "20")
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = Counter(json.loads(result.stdout.strip().splitlines()[-1]))
    for backend in ("INTERPRETER", "CPU"):
        assert outcomes[f"{backend}:refused:CallTypeError"] > 0
        assert outcomes[f"{backend}:refused:AliasingError"] > 0
        assert outcomes[f"{backend}:setter-refused"] > 0


REPRO_03 = textwrap.dedent(
    """
    import numpy as np, opgraph as og
    from opgraph import ops
    x = og.parameter(og.f32, (4096,), name="x")
    cpu = og.backend("CPU")
    exe = cpu.compile(og.Function([ops.add(x, x)], [x]))
    inp = cpu.create_tensor(og.f32, (4096,), np.ones(4096, np.float32))
    out = cpu.create_tensor(og.f32, (4096,))
    try:
        out.buffer = np.zeros(2, np.float32)
    except og.GraphError as e:
        print("setter:", e)
    object.__setattr__(out, "_buffer", np.zeros(2, np.float32))  # around the setter
    try:
        exe.call([out], [inp])
    except og.CallTypeError as e:
        print("call:", e)
    frozen = bytes(16)
    p = og.parameter(og.f32, (4,))
    e2 = cpu.compile(og.Function([ops.relu(p)], [p]))
    out2 = cpu.create_tensor(og.f32, (4,))
    object.__setattr__(out2, "_buffer", np.frombuffer(frozen, np.float32))
    try:
        e2.call([out2], [cpu.create_tensor(og.f32, (4,), np.full(4, 7, np.float32))])
    except og.CallTypeError as e:
        print("call:", e)
    print("bytes intact:", frozen == bytes(16))
    """
)


def test_repro_03_short_and_immutable_buffers_are_refused():
    result = run_python("-c", REPRO_03)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "setter: Tensor.buffer: buffer shape [2] does not match [4096]" in out
    assert "output 0: buffer is [2] (8 bytes), the tensor's type f32[4096] needs" in out
    assert "output 0: buffer is read-only" in out
    assert "bytes intact: True" in out


# ----------------------------------------------------------------- linear validation (08)


def _tensors(count: int) -> list[Tensor]:
    return [Tensor(og.f32, (4,)) for _ in range(count)]


def _traced_lines(call) -> int:
    """Python lines executed by ``call`` in opgraph's runtime and CPU executable modules."""
    files = {validation.__file__, executable.__file__}
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code.co_filename in files:
            if event == "line":
                count += 1
            return tracer
        return None

    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


def test_validate_call_work_is_linear_in_outputs():
    """Quadrupling the outputs quadruples the lines run (a pairwise check would give 16x)."""
    t = TensorType(og.f32, (4,))

    def lines(n: int) -> int:
        outputs, inputs = _tensors(n), _tensors(1)
        return _traced_lines(
            lambda: validation.validate_call(outputs, inputs, [t] * n, [t], "many")
        )

    small, large = lines(200), lines(800)
    assert large < 5 * small, (small, large)


def test_cpu_call_work_is_linear_in_outputs():
    x = og.parameter(og.f32, (4,))
    backend = og.backend("CPU")

    def lines(n: int) -> int:
        fn = og.Function(
            [ops.add(x, og.constant(np.full(4, i, np.float32))) for i in range(n)], [x]
        )
        exe = backend.compile(fn)
        outputs, inputs = _tensors(n), _tensors(1)
        exe.call(outputs, inputs)  # warm: the first call also caches addresses
        assert np.array_equal(outputs[-1].read(), np.full(4, n - 1, np.float32))
        return _traced_lines(lambda: exe.call(outputs, inputs))

    small, large = lines(40), lines(160)
    assert large < 5 * small, (small, large)


@pytest.mark.timeout(120)
def test_repro_08_many_results_validate_quickly():
    """200,000 results: a pairwise check would compare 2e10 pairs (hours); linear takes
    about a second. Bounded by the timeout, not timed."""
    n = 200_000
    t = TensorType(og.f32, (4,))
    outputs, inputs = _tensors(n), _tensors(2)
    validation.validate_call(outputs, inputs, [t] * n, [t, t], "many")
    object.__setattr__(outputs[-1], "_buffer", inputs[0].buffer)
    with pytest.raises(og.AliasingError, match=f"output {n - 1} shares memory with input 0"):
        validation.validate_call(outputs, inputs, [t] * n, [t, t], "many")


@pytest.mark.timeout(120)
def test_repro_08_interpreter_with_many_results():
    x = og.parameter(og.f32, (4,))
    n = 20_000
    exe = og.backend("INTERPRETER").compile(og.Function([ops.relu(x) for _ in range(n)], [x]))
    results = exe(np.arange(4, dtype=np.float32) - 2)
    assert len(results) == n and np.array_equal(results[-1], [0, 0, 0, 1])
