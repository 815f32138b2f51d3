"""The per-cache generic kernel library: one unit per helper, built on demand and checked like
every cache entry; and the compile-time arrays derived once per constant."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import dialect, kernels
from opgraph.backends.cpu.codegen.context import panel_unit
from opgraph.backends.fused import derived
from opgraph.core.errors import RegistryError

ROOT = Path(__file__).resolve().parents[3]


#: The panel GEMM unit the default configuration builds for these small models (here and in the
#: subprocesses): AVX2's half panels where the configured build is AVX2 without AVX-512 (an
#: AVX2-only CPU, or ``OPGRAPH_CPU_ISA=avx2``), else the unit for panels that stay in L3.
PANEL_UNIT = panel_unit(default_config().panel_halves(), resident=True)


def backend_at(directory: Path) -> CpuBackend:
    return CpuBackend(dataclasses.replace(default_config(), cache_dir=directory))


def units_in(directory: Path) -> list[str]:
    """The helpers whose library unit the cache in ``directory`` holds."""
    return sorted(p.name.split("-kernel-", 1)[1][:-3] for p in directory.glob("*-kernel-*.so"))


def float_product() -> og.Function:
    """A product by a constant matrix with several rows: the panel GEMM (``gemm_panels``)."""
    x = og.parameter(og.f32, (8, 64))
    w = og.constant(np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64))
    return og.Function([ops.tanh(ops.matmul(x, w))], [x], name="float_product")


def int8_product() -> og.Function:
    """An 8-bit product by constant weights: the 8-bit GEMM (``q8_gemm``)."""
    rng = np.random.default_rng(3)
    a = og.parameter(og.u8, (6, 40))
    weights = rng.integers(-128, 128, (40, 40)).astype(np.int8)
    y = ops.matmul_integer(
        a, og.constant(weights), og.constant(np.uint8(3)), og.constant(np.int8(0))
    )
    return og.Function([y], [a], name="int8_product")


def test_a_float_model_builds_only_the_units_it_calls(tmp_path):
    backend = backend_at(tmp_path)
    exe = backend.compile(float_product())
    assert f"kernel:{PANEL_UNIT}" in exe.generated.needs
    assert units_in(tmp_path) == [PANEL_UNIT]  # no 8-bit kernels for a float model
    x = np.linspace(-1, 1, 8 * 64, dtype=np.float32).reshape(8, 64)
    want = og.backend("INTERPRETER").compile(float_product())(x)[0]
    np.testing.assert_allclose(exe(x)[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("isa", ["native", "avx2", "avx512"])
def test_a_cache_share_prebuilds_every_unit_of_its_target(tmp_path, isa):
    """``Toolchain.kernels()`` builds the units the target can call: the half-panel unit
    (which refuses other targets) for AVX2 builds only, the whole-panel unit elsewhere."""
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    config = dataclasses.replace(default_config(), cache_dir=tmp_path, isa=isa)
    CpuBackend(config).toolchain.kernels()
    halves = config.panel_halves()
    assert units_in(tmp_path) == list(kernels.target_units(halves))
    assert ("gemm_half_panels" in units_in(tmp_path)) is halves
    assert ("gemm_panels" in units_in(tmp_path)) is not halves


def test_a_module_that_needs_int8_builds_that_unit(tmp_path):
    exe = backend_at(tmp_path).compile(int8_product())
    assert {"kernels", "kernel:q8_gemm"} <= exe.generated.needs
    assert units_in(tmp_path) == ["q8_gemm"]
    a = np.arange(6 * 40, dtype=np.uint8).reshape(6, 40)
    np.testing.assert_array_equal(exe(a), og.backend("INTERPRETER").compile(int8_product())(a))


def test_needs_name_each_unit_and_a_bare_kernels_means_all():
    assert kernels.needs_of(["gemm_panels", "bf16"]) == {"kernels", "kernel:gemm_panels"}
    assert kernels.needs_of(["gemv_panels"]) == set()
    assert kernels.units_needed({"blas", "kernel:q8_gemm"}) == ("q8_gemm",)
    every = set(kernels.LIBRARY_HELPERS) - {"gemm_half_panels"}  # the layout of their day
    assert kernels.units_needed({"kernels"}) == tuple(sorted(every))
    assert kernels.units_needed({"mvec"}) == ()
    with pytest.raises(RegistryError, match="unknown library units"):
        kernels.units_needed({"kernel:nothing"})


def test_each_unit_exports_its_functions_under_its_own_hash():
    target = ("-march=x86-64-v3",)
    # by unit and function: two units may define one C function for two layouts of its
    # operands (gemm_panels and gemm_half_panels both define og_gemm_panels)
    names = {
        (helper, function): kernels.symbol(function, helper, target)
        for helper, functions in kernels.LIBRARY_HELPERS.items()
        for function in functions
    }
    assert len(set(names.values())) == len(names)
    for helper, functions in kernels.LIBRARY_HELPERS.items():
        source = kernels.library_source(helper, target)
        for function in functions:
            assert f"#define {function} {names[helper, function]}" in source
            assert f"void {function}(" in source and f"static void {function}(" not in source
        others = {f for _, f in names} - set(functions)
        assert not any(f"void {o}(" in source for o in others)
    assert (
        kernels.symbol("og_gemm_panels", "gemm_panels", ("-march=native",))
        != (names["gemm_panels", "og_gemm_panels"])
    )


def test_a_helper_may_export_several_functions(monkeypatch):
    code = "static void og_two_a(long n) { (void)n; }\nstatic void og_two_b(void) {}"
    monkeypatch.setitem(dialect.HELPERS, "two_functions", lambda: code)
    monkeypatch.setitem(kernels.LIBRARY_HELPERS, "two_functions", {})
    kernels.library_helper(
        "two_functions", {"og_two_a": "void {name}(long n);", "og_two_b": "void {name}(void);"}
    )
    target = ("-march=x86-64-v3",)
    source = kernels.library_source("two_functions", target)
    assert "void og_two_a(long n)" in source and "void og_two_b(void)" in source
    assert "static" not in source.split("og_two_a(long n)")[0].splitlines()[-1]
    declared = kernels.declarations(["two_functions"], target)
    a = kernels.symbol("og_two_a", "two_functions", target)
    b = kernels.symbol("og_two_b", "two_functions", target)
    assert f"#define og_two_a {a}" in declared and f"extern void {b}(void);" in declared
    assert kernels.needs_of(["two_functions"]) == {"kernels", "kernel:two_functions"}


def test_a_library_helper_needs_a_named_prototype():
    with pytest.raises(RegistryError, match="must contain"):
        kernels.library_helper("gemm_panels", "void og_gemm_panels(void);")


# ------------------------------------------------------------------ other processes
SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    import numpy as np, opgraph as og
    from opgraph import ops
    warnings.simplefilter("always")
    x = og.parameter(og.f32, (8, 64))
    w = og.constant(np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64))
    fn = og.Function([ops.tanh(ops.matmul(x, w))], [x], name="float_product")
    v = np.linspace(-1, 1, 8 * 64, dtype=np.float32).reshape(8, 64)
    with warnings.catch_warnings(record=True) as seen:
        out = og.backend("CPU").compile(fn)(v)[0]
    want = np.tanh(v.astype(np.float64) @ w.node.op.value.astype(np.float64))
    print("RESULT", json.dumps({"close": bool(np.allclose(out, want, rtol=1e-5, atol=1e-5)),
                                "warnings": [str(s.message) for s in seen]}))
    """
)


def start(cache: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "OPGRAPH_CACHE_DIR": str(cache),
        "OPGRAPH_CPU_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    command = [sys.executable, "-X", "faulthandler", "-c", SCRIPT]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def finish(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def test_two_processes_building_the_same_units_at_once(tmp_path):
    cache = tmp_path / "shared"
    first, second = start(cache), start(cache)
    results = [finish(first), finish(second)]
    assert all(r["close"] and r["warnings"] == [] for r in results)
    assert units_in(cache) == [PANEL_UNIT]
    assert len(list(cache.glob("*-runtime.so"))) == 1
    assert not list(cache.glob(".build-*"))  # both builds cleaned up


def _flip_byte(so: Path) -> None:
    data = bytearray(so.read_bytes())
    data[len(data) // 2] ^= 0xFF
    fresh = so.with_name("fresh.tmp")
    fresh.write_bytes(bytes(data))
    os.chmod(fresh, 0o600)
    os.replace(fresh, so)


def test_a_corrupted_unit_is_rejected_and_rebuilt(tmp_path):
    cache = tmp_path / "c"
    assert finish(start(cache))["close"]
    (unit,) = cache.glob(f"*-kernel-{PANEL_UNIT}.so")
    _flip_byte(unit)
    result = finish(start(cache))
    assert result["close"]
    assert any("SHA-256 does not match" in w and unit.name in w for w in result["warnings"])
    assert json.loads(unit.with_suffix(".json").read_text())["size"] == unit.stat().st_size
    assert finish(start(cache))["warnings"] == []  # repaired


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_unit_owned_by_another_user_is_never_loaded(tmp_path):
    cache = tmp_path / "c"
    assert finish(start(cache))["close"]
    (unit,) = cache.glob(f"*-kernel-{PANEL_UNIT}.so")
    os.chown(unit, 65534, 65534)
    result = finish(start(cache))
    assert result["close"]
    assert any("owned by uid 65534" in w for w in result["warnings"])
    assert unit.stat().st_uid == os.geteuid()  # replaced by this user's build


# ------------------------------------------------------------------ derived arrays
def test_derived_arrays_are_made_once_per_constant_and_dropped_with_it():
    source = np.arange(12, dtype=np.float32)
    source.flags.writeable = False
    made = []

    def make() -> np.ndarray:
        made.append(1)
        return np.arange(12, dtype=np.float32)[::-1] * 2

    gc.collect()
    before = derived.entries()
    first = derived.derived(source, "twice reversed", make)
    assert derived.derived(source, "twice reversed", make) is first
    assert len(made) == 1 and not first.flags.writeable
    derived.derived(source, "another kind", make)
    assert len(made) == 2 and derived.entries() == before + 2
    del source
    gc.collect()
    assert derived.entries() == before


def test_writable_arrays_are_never_cached():
    source = np.ones(4, np.float32)
    assert derived.derived(source, "k", lambda: source + 1) is not derived.derived(
        source, "k", lambda: source + 1
    )


def test_a_recompiled_resnet_block_reuses_its_packed_weights(tmp_path):
    """Winograd filters and panel weights of a model compiled twice are the same arrays."""
    rng = np.random.default_rng(5)
    x = og.parameter(og.f32, (1, 32, 14, 14))
    w3 = og.constant((rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32))
    y = ops.relu(ops.convolution(x, w3, padding_below=(1, 1), padding_above=(1, 1)))
    fc = og.constant((rng.standard_normal((32 * 14 * 14, 64)) * 0.01).astype(np.float32))
    z = ops.matmul(ops.reshape(y, (1, 32 * 14 * 14)), fc)
    fn = og.Function([z], [x])
    backend = backend_at(tmp_path)
    first, second = backend.compile(fn), backend.compile(fn)
    constants = [b.data for b in first.program.buffers if b.data is not None]
    again = [b.data for b in second.program.buffers if b.data is not None]
    assert any(a is b for a, b in zip(constants, again, strict=True))
    v = rng.standard_normal((1, 32, 14, 14)).astype(np.float32)
    np.testing.assert_array_equal(first(v)[0], second(v)[0])
