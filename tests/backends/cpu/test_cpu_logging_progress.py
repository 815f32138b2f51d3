"""What a CPU compile tells: log records (passes, kernel counts, compiler runs, cache hits and
misses), OPGRAPH_LOG, and the progress callback over the module's translation units."""

import dataclasses
import io
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu.codegen import module as codegen
from opgraph.backends.cpu.codegen.context import panel_unit
from opgraph.cli._progress import CompileBar, compile_with_progress


def small_function(name="logged"):
    x = og.parameter(og.f32, (5,))
    return og.Function([ops.exp(ops.negative(x)) + 1.0], [x], name=name)


def layered_function(layers=24, width=48):
    """Products separated by row softmaxes and tanh: one step per product and per kernel,
    enough code for the module to be split into several translation units."""
    x = og.parameter(og.f32, (16, width))
    h = x
    rng = np.random.default_rng(0)
    for i in range(layers):
        w = og.constant((rng.standard_normal((width, width)) * 0.2).astype(np.float32))
        h = ops.matmul(h, w)
        h = ops.softmax(h, 1) if i % 2 else ops.tanh(ops.add(ops.multiply(h, h), h))
    return og.Function([h], [x], name="layered")


@pytest.fixture
def fresh_cpu(tmp_path):
    """A CPU backend with an empty cache of its own (every module is compiled)."""
    return CpuBackend(dataclasses.replace(default_config(), cache_dir=tmp_path))


def messages(caplog, logger):
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_compiling_logs_passes_kernels_compiler_runs_and_cache_misses(caplog, fresh_cpu):
    with caplog.at_level(logging.DEBUG, logger="opgraph"):
        fresh_cpu.compile(small_function())
    passes = messages(caplog, "opgraph.passes")
    assert any(m.startswith("pass fold_constants on logged: ") and " ms" in m for m in passes)
    assert any("pass(es) on logged:" in m for m in passes)
    cpu = messages(caplog, "opgraph.cpu")
    assert any(m.startswith("compile cache miss: ") for m in cpu)
    assert any(m.startswith("C compiler built ") and m.endswith(" s") for m in cpu)
    summary = [m for m in cpu if m.startswith("compiled logged: ")]
    assert len(summary) == 1
    assert "1 step(s) (1 fused loop kernel(s) over 3 op(s))" in summary[0]
    assert "1 C batch(es)" in summary[0]


def test_a_second_compile_logs_a_cache_hit_and_no_compiler_run(caplog, fresh_cpu):
    fresh_cpu.compile(small_function())
    with caplog.at_level(logging.DEBUG, logger="opgraph"):
        fresh_cpu.compile(small_function())
    cpu = messages(caplog, "opgraph.cpu")
    assert any(m.startswith("compile cache hit: ") for m in cpu)
    assert not any(m.startswith(("compile cache miss", "C compiler built")) for m in cpu)
    assert any(m.endswith("(cache hit)") for m in cpu)


def test_info_level_leaves_out_the_per_pass_lines(caplog, fresh_cpu):
    with caplog.at_level(logging.INFO, logger="opgraph"):
        fresh_cpu.compile(small_function())
    assert not any(m.startswith("pass ") for m in messages(caplog, "opgraph.passes"))
    assert any(m.startswith("compiled logged: ") for m in messages(caplog, "opgraph.cpu"))


def test_progress_is_reported_once_per_translation_unit(fresh_cpu):
    fn = layered_function()
    calls = []
    exe = fresh_cpu.compile(fn, progress=lambda done, total: calls.append((done, total)))
    units = len(exe.generated.units)
    assert units > 1
    assert calls == [(done, units) for done in range(units + 1)]
    x = np.random.default_rng(1).standard_normal((16, 48)).astype(np.float32)
    want = og.backend("INTERPRETER").compile(fn)(x)[0]
    np.testing.assert_allclose(exe(x)[0], want, rtol=1e-4, atol=1e-5)
    # the units' step entries stay inside the module: only og_run is exported
    assert hasattr(exe.compiled.library, "og_run")
    assert not hasattr(exe.compiled.library, "og_step_1")


def test_a_split_module_runs_fallbacks_and_reports_failing_checks_by_node():
    """Steps in later units still call back into Python (a reference kernel) and pass their
    run-time check failures through og_run with the step's number."""
    layered = layered_function()
    x = layered.parameters[0]
    a, b = og.parameter(og.i32, (4,)), og.parameter(og.i32, (4,))
    lengths = og.constant(np.full(16, 5, np.int64), og.i64)
    reversed_ = ops.reverse_sequence(layered.results[0], lengths, 0, 1)
    results = [*layered.results, reversed_, ops.divide(a, b)]
    fn = og.Function(results, [x, a, b], name="split_checks")
    exe = og.backend("CPU").compile(fn)
    assert len(exe.generated.units) > 1
    assert "ReverseSequence" in exe.fallback_ops()
    division = ") : i32[4] */"  # the integer division's step comment
    assert division not in exe.generated.units[0]  # it runs in a later unit
    assert any(division in unit for unit in exe.generated.units[1:])
    values = np.random.default_rng(2).standard_normal((16, 48)).astype(np.float32)
    ones = np.ones(4, np.int32)
    got = exe(values, ones * 6, ones * 3)
    want = og.backend("INTERPRETER").compile(fn)(values, ones * 6, ones * 3)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[2], [2, 2, 2, 2])
    with pytest.raises(og.ExecutionError, match=r"while executing %\d+ = Div.*division by zero"):
        exe(values, ones, np.array([1, 0, 1, 1], np.int32))


def test_a_cached_module_reports_no_progress(fresh_cpu):
    fresh_cpu.compile(small_function())
    calls = []
    fresh_cpu.compile(small_function(), progress=lambda d, t: calls.append((d, t)))
    assert calls == []


def test_a_one_unit_module_reports_zero_then_one(fresh_cpu):
    calls = []
    exe = fresh_cpu.compile(small_function(), progress=lambda d, t: calls.append((d, t)))
    assert len(exe.generated.units) == 1
    assert calls == [(0, 1), (1, 1)]


@pytest.mark.parametrize(
    ("sizes", "unit_chars", "expected"),
    [
        ([100, 100], 4000, [[0, 1]]),  # small: one unit
        ([3000] * 4, 6000, [[0, 1], [2, 3]]),
        ([3000] * 40, 1000, [[i * 5 + j for j in range(5)] for i in range(8)]),  # MAX_UNITS
        ([5000, 100, 5000, 100, 5000], 4000, [[0, 1], [2, 3], [4]]),
    ],
)
def test_steps_are_grouped_into_consecutive_units_of_about_equal_size(sizes, unit_chars, expected):
    functions = ["x" * n for n in sizes]
    assert codegen.group_steps(functions, unit_chars) == expected


def test_products_by_constant_weights_call_the_shared_kernel_library(fresh_cpu):
    """The panel GEMM is compiled once per cache, not in every module: modules declare it."""
    exe = fresh_cpu.compile(layered_function())
    unit = panel_unit(fresh_cpu.config.panel_halves(), resident=True)  # a small module
    assert {"kernels", f"kernel:{unit}"} <= exe.generated.needs
    assert "extern void og_gemm_panels_" in exe.source()
    assert "static void og_gemm_panels" not in exe.source()
    names = sorted(p.name for p in fresh_cpu.config.cache_dir.glob("*-kernel-*.so"))
    assert len(names) == 1 and names[0].endswith(f"-kernel-{unit}.so")  # no int8 unit


def test_compile_bar_advances_once_per_batch_and_clears():
    stream = io.StringIO()
    bar = CompileBar("compiling", stream, delay=0.0)
    bar(0, 3)
    seen = [bar.bar.n]
    for done in (1, 2, 3):
        bar(done, 3)
        seen.append(bar.bar.n)
    bar.close()
    assert seen == [0, 1, 2, 3]
    assert "compiling" in stream.getvalue() and "/3" in stream.getvalue()


def test_compile_with_progress_shows_nothing_for_a_backend_without_progress():
    stream = io.StringIO()
    fn = small_function()
    exe = compile_with_progress(og.backend("INTERPRETER"), fn, stream=stream, delay=0.0)
    np.testing.assert_allclose(exe(np.zeros(5, np.float32))[0], np.full(5, 2.0, np.float32))
    assert stream.getvalue() == ""


def _run_with_log(value, tmp_path):
    env = {**os.environ, "OPGRAPH_CACHE_DIR": str(tmp_path), "OPGRAPH_CPU_CACHE_DIR": str(tmp_path)}
    env.pop("OPGRAPH_LOG", None)
    if value is not None:
        env["OPGRAPH_LOG"] = value
    code = (
        "import numpy as np, opgraph as og\n"
        "from opgraph import ops\n"
        "x = og.parameter(og.f32, (3,))\n"
        "og.backend('CPU').compile(og.Function([ops.exp(x)], [x], name='envlog'))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


def test_opgraph_log_installs_a_stderr_handler_only_when_set(tmp_path):
    quiet = _run_with_log(None, tmp_path / "a")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    loud = _run_with_log("info", tmp_path / "b")
    assert loud.returncode == 0, loud.stderr
    assert "opgraph.cpu INFO: compiled envlog:" in loud.stderr
    assert "opgraph.cpu INFO: C compiler built" in loud.stderr
    assert "DEBUG" not in loud.stderr


def test_an_unknown_opgraph_log_value_warns_naming_the_variable(tmp_path):
    done = _run_with_log("loud", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "OPGRAPH_LOG='loud' is not a log level; use one of debug, info" in done.stderr
