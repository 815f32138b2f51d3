"""The compile cache and the toolchain errors."""

import dataclasses
import threading

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.backends.cpu import CompilerError, CpuBackend, default_config


def small_function(name="f"):
    x = og.parameter(og.f32, (5,))
    return og.Function([ops.exp(ops.negative(x))], [x], name=name)


def test_second_compile_hits_the_cache(tmp_path):
    backend = CpuBackend(dataclasses.replace(default_config(), cache_dir=tmp_path))
    first = backend.compile(small_function())
    second = backend.compile(small_function())
    assert not first.compiled.cache_hit
    assert second.compiled.cache_hit
    assert second.compiled.path == first.compiled.path
    assert first.compiled.path.parent == tmp_path
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    np.testing.assert_allclose(second(x)[0], np.exp(-x), rtol=1e-6)


def test_cache_key_covers_flags(tmp_path):
    base = dataclasses.replace(default_config(), cache_dir=tmp_path)
    plain = CpuBackend(base).compile(small_function())
    other = CpuBackend(dataclasses.replace(base, extra_cflags=("-DOPGRAPH_TEST=1",)))
    assert other.compile(small_function()).compiled.key != plain.compiled.key


def test_concurrent_compiles_write_atomically(tmp_path):
    """Threads compiling the same module at once all load a complete file, and no temporary
    file is left behind (each compiles privately, then renames)."""
    backend = CpuBackend(dataclasses.replace(default_config(), cache_dir=tmp_path))
    results, errors = [], []

    def compile_one():
        try:
            results.append(backend.compile(small_function()))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=compile_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r.compiled.key for r in results}) == 1
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".build-")]
    assert leftovers == []
    assert all(p.suffix in (".so", ".c", ".json", ".lock") for p in tmp_path.iterdir())
    x = np.ones(5, np.float32)
    for exe in results:
        np.testing.assert_allclose(exe(x)[0], np.exp(-x), rtol=1e-6)


def test_missing_compiler_says_so_and_suggests_the_interpreter(tmp_path):
    config = dataclasses.replace(
        default_config(), compiler=str(tmp_path / "no-such-cc"), cache_dir=tmp_path
    )
    with pytest.raises(CompilerError, match="needs a C compiler and none was found") as info:
        CpuBackend(config).compile(small_function())
    assert "INTERPRETER" in str(info.value)
    assert isinstance(info.value, og.OpgraphError)


def test_generated_source_names_the_fused_nodes(cpu):
    x = og.parameter(og.f32, (64,))
    exe = cpu.compile(og.Function([ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x / 3.0], [x]))
    source = exe.source()
    assert "Tanh(" in source and "Sigmoid(" in source  # the comment lists the fused nodes
    assert '__attribute__((simd("notinbranch"))) extern float tanhf(float);' in source
    assert len(exe.program.steps) == 1  # the whole expression is one kernel
