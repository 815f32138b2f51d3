"""Inline vector math of AVX2 builds (``codegen/vector_math.py``): f32 ``tanh`` as an inline
function instead of libmvec's AVX2 variant, vectorized, within a few ulp of the reference on
every kind of input; AVX-512 builds keep libmvec."""

import dataclasses
import re

import numpy as np
import pytest
from asm_checks import simd_loop_asm  # beside this file (rootdir import)

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CpuBackend, default_config
from opgraph.backends.cpu import config as cpu_config
from opgraph.backends.cpu.codegen import dialect, vector_math
from opgraph.backends.cpu.compiler import CFLAGS
from opgraph.testing.compare import assert_close
from opgraph.testing.records import RECORDS

#: libmvec's documented bound for its vector functions (glibc manual); the inline tanh
#: measured 2.43 ulp at most over every f32 input.
MAX_ULP = 4.0


def backend_for(isa: str) -> CpuBackend:
    if not cpu_config.supports_isa(isa):
        pytest.skip(f"this CPU cannot run {isa} code")
    return CpuBackend(dataclasses.replace(default_config(), isa=isa))


def tanh_inputs() -> np.ndarray:
    """Every binade from subnormals to 2^30 (dense where tanh bends), both signs, the
    thresholds (0.55, 9.01, the clamp at 10) and the special values."""
    rng = np.random.default_rng(17)
    dense = np.linspace(-12.0, 12.0, 200_001)
    binades = np.ldexp(rng.uniform(1.0, 2.0, 4000), rng.integers(-149, 31, 4000))
    edges = [0.0, 0.549, 0.55, 0.551, 9.0, 9.01, 9.02, 10.0, 10.5, 1e-45, 1e-38, 3.4e38]
    values = np.concatenate([dense, binades, -binades, edges, np.negative(edges)])
    return np.concatenate([values, [np.inf, -np.inf, np.nan]]).astype(np.float32)


def ulp_error(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|got - tanh(x)| in units of the last place of the correctly rounded f32 result."""
    exact = np.tanh(x.astype(np.float64))
    rounded = exact.astype(np.float32)
    ulp = np.spacing(np.abs(rounded)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_tanh_is_within_libmvec_bounds_on_every_kind_of_input(isa):
    """The AVX2 build's inline tanh and the AVX-512 build's libmvec agree with the reference
    within a few ulp; signed zeros, ±1 at the infinities, NaN and subnormals exact."""
    x = tanh_inputs()
    p = og.parameter(og.f32, x.shape)
    exe = backend_for(isa).compile(og.Function([ops.tanh(p)], [p]))
    (got,) = exe(x)
    finite = np.isfinite(x)
    assert ulp_error(got[finite], x[finite]).max() <= MAX_ULP
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))
    assert got[x == np.inf].tolist() == [1.0] and got[x == -np.inf].tolist() == [-1.0]
    assert np.isnan(got[np.isnan(x)]).all()
    tiny = np.abs(x) < 1e-30
    assert np.array_equal(got[tiny], x[tiny])
    assert np.array_equal(-got, exe(-x)[0], equal_nan=True)  # odd, bit for bit


def test_the_inline_tanh_replaces_libmvec_only_in_avx2_builds():
    """One generated source: the preprocessor picks the inline function for AVX2 without
    AVX-512, libmvec's declaration otherwise; doubles keep libmvec."""
    text = dialect.simd_declarations({("tanh", og.f32), ("tanh", og.f64), ("exp", og.f32)})
    assert f"#if {vector_math.AVX2_ONLY}" in text
    assert "#define tanhf og_tanhf" in text
    assert "extern float tanhf(float);" in text.split("#else")[1]
    assert "extern double tanh(double);" in text
    assert "og_expf" not in text


def _compiled_loop(isa: str, tmp_path, base: tuple[str, ...] = CFLAGS) -> str:
    """The assembly of a loop calling ``tanhf`` with the module flags ``base`` for ``isa``."""
    return simd_loop_asm("tanh", "y[i] = tanhf(x[i] * 0.5f + 1.0f);", isa, tmp_path, base)


@pytest.mark.parametrize("trapping", [False, True])
def test_the_inline_tanh_vectorizes_in_avx2_builds(tmp_path, trapping):
    """The loop divides 8 lanes at a time and calls nothing (no libmvec, no scalar tanhf),
    also under GCC's default -ftrapping-math (float conditionals there kept a branch)."""
    base = tuple(f for f in CFLAGS if not (trapping and f == "-fno-trapping-math"))
    if not cpu_config.supports_isa("avx2"):
        pytest.skip("this CPU cannot run avx2 code")
    asm = _compiled_loop("avx2", tmp_path, base)
    assert re.search(r"vdivps\s+.*%ymm", asm)
    assert not re.search(r"call\s+\S*tanhf", asm)


def test_avx512_builds_keep_libmvec(tmp_path):
    if not cpu_config.supports_isa("avx512"):
        pytest.skip("this CPU cannot run avx512 code")
    asm = _compiled_loop("avx512", tmp_path)
    assert re.search(r"_ZGVeN16v_tanhf", asm)


TANH_RECORDS = [r for r in RECORDS if r.name in ("tanh", "gelu_tanh", "rnn_cell_sigmoid")]


@pytest.mark.parametrize("record", TANH_RECORDS, ids=lambda r: r.name)
def test_tanh_records_match_interpreter_in_avx2_builds(record):
    backend = backend_for("avx2")
    t = og.f32
    if t not in record.element_types:
        pytest.skip(f"{record.name} has no f32 case")
    args = record.arguments(t)
    params = [og.parameter(t, a.shape) for a in args]
    built = record.build(*params)
    results = list(built) if isinstance(built, tuple | list) else [built]
    fn = og.Function(results, params)
    got = backend.compile(fn)(*args)
    want = og.backend("INTERPRETER").compile(fn)(*args)
    rtol, atol = record.tolerance(t)
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol, atol, f"{record.name} on avx2")


def reduction_edges() -> np.ndarray:
    """Inputs around every point where the inline tanh's ``n = rint(2|x|/ln2)`` steps
    (``|x| = (j + 1/2) ln2/2``, j = 0..28) and around the clamp at 10, a few ulp each side,
    both signs: where the shifter's rounding and the one-constant reduction decide."""
    centres = (np.arange(29) + 0.5) * np.log(2) / 2
    centres = np.concatenate([centres, [10.0, 9.01]]).astype(np.float32)
    steps = np.arange(-8, 9)
    bits = centres.view(np.int32)[:, None] + steps[None, :]
    values = bits.astype(np.int32).view(np.float32).ravel()
    return np.concatenate([values, -values])


def test_avx2_tanh_is_within_its_measured_bound_where_the_reduction_steps():
    """2.43 ulp was the exhaustive maximum (every f32 input); the reduction's steps and the
    clamp stay within it, and the function stays odd there."""
    x = reduction_edges()
    p = og.parameter(og.f32, x.shape)
    exe = backend_for("avx2").compile(og.Function([ops.tanh(p)], [p]))
    (got,) = exe(x)
    assert ulp_error(got, x).max() <= 2.5
    assert np.array_equal(-got, exe(-x)[0])


def test_w2_expression_matches_interpreter_in_avx2_builds():
    """W2's loop (``tanh(x*0.5+1) * sigmoid(x) - x/3``, bench/models.py) under AVX2 against
    INTERPRETER, over the benchmark's range and beyond the tanh clamp."""
    rng = np.random.default_rng(93)
    x = np.concatenate([rng.uniform(-4, 4, 50_000), rng.uniform(-40, 40, 5_000)])
    x = x.astype(np.float32)
    p = og.parameter(og.f32, x.shape)
    fn = og.Function([ops.tanh(p * 0.5 + 1.0) * ops.sigmoid(p) - p / 3.0], [p])
    (got,) = backend_for("avx2").compile(fn)(x)
    (want,) = og.backend("INTERPRETER").compile(fn)(x)
    assert_close(got, want, 1e-6, 1e-6, "W2 on avx2")
