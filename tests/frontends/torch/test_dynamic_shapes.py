"""Dynamic shapes through the PyTorch bridge: one symbolic Function per graph.

``torch.compile(dynamic=True)``, dynamo's automatic dynamic shapes and ``torch.export`` with
``Dim`` give symbolic opgraph Functions, compiled once; calls at other batch sizes or sequence
lengths recompile neither in dynamo nor in opgraph (counted).
"""

import contextlib
import copy
import functools
import logging
import warnings
from collections.abc import Iterator

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch._dynamo.testing import CompileCounterWithBackend  # noqa: E402
from torch.export import Dim  # noqa: E402
from torch_bridge_helpers import assert_close  # noqa: E402

import opgraph as og  # noqa: E402
import opgraph.frontends.torch as og_torch  # noqa: E402
from opgraph import ops  # noqa: E402
from opgraph.core.errors import UnsupportedOpError  # noqa: E402
from opgraph.frontends.torch.runtime import SpecializingExecutable, compile_function  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

CPU_MISSING = "CPU" not in og.backends()


class Compiles:
    """Counts ``Backend.compile`` calls of one opgraph backend."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.count = 0
        cls = type(og.backend(name))
        original = cls.compile

        def counting(backend, function, profile=False):
            self.count += 1
            return original(backend, function, profile)

        monkeypatch.setattr(cls, "compile", counting)


def counted(name: str) -> CompileCounterWithBackend:
    """The "opgraph" backend on ``name``, counting dynamo's compiles (``frame_count``)."""
    return CompileCounterWithBackend(functools.partial(og_torch.backend, options={"backend": name}))


@contextlib.contextmanager
def no_mha_fastpath() -> Iterator[None]:
    """Eval-mode ``TransformerEncoderLayer`` under ``no_grad`` otherwise runs one fused op,
    whose metadata leaves the embedding size symbolic under ``dynamic=True``."""
    enabled = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(enabled)


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).eval()


def encoder_layer() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval()


def run_sizes(compiled, model, shapes, tol=1e-5) -> None:
    with torch.no_grad():
        for shape in shapes:
            x = torch.randn(shape)
            assert_close(compiled(x), model(x), tol)


# ------------------------------------------------------------------ torch.compile, dynamic
def test_mlp_dynamic_batch_compiles_once(monkeypatch):
    compiles, dynamo = Compiles(monkeypatch, "INTERPRETER"), counted("INTERPRETER")
    model = mlp()
    compiled = torch.compile(model, backend=dynamo, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", og_torch.FallbackWarning)  # all of it in opgraph
        run_sizes(compiled, model, [(3, 16)])
        assert (dynamo.frame_count, compiles.count) == (1, 1)
        run_sizes(compiled, model, [(5, 16), (9, 16), (64, 16), (3, 16)])
    assert (dynamo.frame_count, compiles.count) == (1, 1)


def test_encoder_layer_dynamic_batch_and_sequence_compiles_once(monkeypatch):
    compiles, dynamo = Compiles(monkeypatch, "INTERPRETER"), counted("INTERPRETER")
    model = encoder_layer()
    compiled = torch.compile(model, backend=dynamo, dynamic=True)
    with no_mha_fastpath(), warnings.catch_warnings():
        warnings.simplefilter("error", og_torch.FallbackWarning)
        run_sizes(compiled, model, [(3, 5, 16)])
        first = compiles.count
        run_sizes(compiled, model, [(2, 7, 16), (4, 9, 16), (3, 12, 16)])
    assert first >= 1
    assert (dynamo.frame_count, compiles.count) == (1, first)


def test_automatic_dynamic_compiles_once_after_the_second_shape(monkeypatch):
    compiles, dynamo = Compiles(monkeypatch, "INTERPRETER"), counted("INTERPRETER")
    model = mlp()
    compiled = torch.compile(model, backend=dynamo)  # dynamo marks the batch dynamic itself
    run_sizes(compiled, model, [(3, 16), (5, 16)])
    after_second = (dynamo.frame_count, compiles.count)
    run_sizes(compiled, model, [(7, 16), (11, 16), (5, 16)])
    assert after_second == (2, 2)  # the static graph, then the symbolic one
    assert (dynamo.frame_count, compiles.count) == after_second


def test_automatic_dynamic_converts_the_fused_encoder_fast_path(monkeypatch):
    compiles, dynamo = Compiles(monkeypatch, "INTERPRETER"), counted("INTERPRETER")
    model = encoder_layer()  # no_grad + eval: aten._transformer_encoder_layer_fwd
    compiled = torch.compile(model, backend=dynamo)
    with warnings.catch_warnings():
        warnings.simplefilter("error", og_torch.FallbackWarning)
        run_sizes(compiled, model, [(3, 5, 16), (2, 7, 16)], tol=1e-4)
        after_second = (dynamo.frame_count, compiles.count)
        run_sizes(compiled, model, [(4, 9, 16), (5, 3, 16)], tol=1e-4)
    assert after_second == (2, 2)
    assert (dynamo.frame_count, compiles.count) == after_second


def test_sizes_computed_from_symbols_become_expressions(monkeypatch):
    class Folds(torch.nn.Module):
        def forward(self, x):
            doubled = torch.cat([x, x], 0)  # 2*batch rows
            return doubled.reshape(x.shape[0], 2 * x.shape[1]) * 2 + x.repeat(1, 2)

    compiles, dynamo = Compiles(monkeypatch, "INTERPRETER"), counted("INTERPRETER")
    model = Folds()
    compiled = torch.compile(model, backend=dynamo, dynamic=True)
    run_sizes(compiled, model, [(3, 4), (6, 5), (2, 9)])
    assert (dynamo.frame_count, compiles.count) == (1, 1)


class Slices(torch.nn.Module):
    def forward(self, x):
        steps = (x[:, 1:] - x[:, :-1]) * x[:, -1:]
        return steps + x[:, 0].unsqueeze(1) + x[:, 2:5].sum(1, keepdim=True)


def test_slices_and_selects_on_a_symbolic_axis(monkeypatch):
    compiles, dynamo = Compiles(monkeypatch, "INTERPRETER"), counted("INTERPRETER")
    model = Slices()
    compiled = torch.compile(model, backend=dynamo, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", og_torch.FallbackWarning)
        run_sizes(compiled, model, [(3, 7), (4, 9), (2, 6)])
    assert (dynamo.frame_count, compiles.count) == (1, 1)
    program = torch.export.export(
        model, (torch.randn(3, 7),), dynamic_shapes={"x": {1: Dim("seq", min=6, max=100)}}
    )
    function = og_torch.import_exported(program.run_decompositions())
    assert str(function.flat_result_types[0]) == "f32[3,seq-1]"


@pytest.mark.skipif(CPU_MISSING, reason="the CPU backend is not registered here")
@pytest.mark.parametrize("which", ["mlp", "encoder_layer"])
def test_cpu_compiles_once_and_is_right_at_several_sizes(monkeypatch, which):
    model = mlp() if which == "mlp" else encoder_layer()
    shapes = [(3, 16), (5, 16), (9, 16)] if which == "mlp" else [(3, 5, 16), (2, 7, 16)]
    compiles, dynamo = Compiles(monkeypatch, "CPU"), counted("CPU")
    compiled = torch.compile(model, backend=dynamo, dynamic=True)
    with no_mha_fastpath():
        run_sizes(compiled, model, shapes, tol=1e-4)
    # CPU compiles symbolic Functions: one compile serves every size (no per-binding fallback).
    assert (dynamo.frame_count, compiles.count) == (1, 1)


# --------------------------------------------------------------------- torch.export + Dim
def test_export_with_dim_gives_one_bounded_symbolic_function():
    model = mlp()
    x = torch.randn(3, 16)
    program = torch.export.export(
        model, (x,), dynamic_shapes={"input": {0: Dim("batch", max=64)}}
    ).run_decompositions()
    function = og_torch.import_exported(program)
    batch = og.dim("batch", max=64)
    assert function.parameter_types[0].shape == (batch, 16)
    assert function.flat_result_types[0].shape == (batch, 4)
    exe = og.backend("INTERPRETER").compile(function)
    with torch.no_grad():
        for size in (1, 7, 64):
            x = torch.randn(size, 16)
            (got,) = exe(x.numpy())
            np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(og.CallTypeError, match="batch is 65"):
        exe(np.zeros((65, 16), np.float32))


def test_export_encoder_layer_with_batch_and_sequence():
    model = encoder_layer()
    x = torch.randn(3, 5, 16)
    dims = {"src": {0: Dim("batch", max=32), 1: Dim("seq", max=128)}}
    with torch.no_grad():
        program = torch.export.export(model, (x,), dynamic_shapes=dims).run_decompositions()
    function = og_torch.import_exported(program)
    assert str(function.parameter_types[0]) == "f32[batch,seq,16]"
    exe = og.backend("INTERPRETER").compile(function)
    with torch.no_grad():
        for shape in ((2, 9, 16), (4, 3, 16)):
            x = torch.randn(shape)
            (got,) = exe(x.numpy())
            np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-5)


# ------------------------------------------------------ backends that need static shapes
class StaticOnly(og.Backend):
    """INTERPRETER refusing symbolic Functions, as the CPU backend does today."""

    def __init__(self) -> None:
        self.inner = og.backend("INTERPRETER")
        self.compiled: list[og.Function] = []

    def compile(self, function, profile=False):
        if _symbolic(function):
            raise UnsupportedOpError(f"{function.name}: static shapes only")
        self.compiled.append(function)
        return self.inner.compile(function, profile)


def _symbolic(function: og.Function) -> bool:
    return any(type(d) is not int for t in function.parameter_types for d in t.shape)


def test_static_only_backend_specialises_per_binding(caplog):
    backend = StaticOnly()
    n = og.dim("n", min=1)
    x = og.parameter(og.f32, (n, 3), name="x")
    function = og.Function([ops.relu(ops.concat([x, x], 0))], [x], name="twice")
    with caplog.at_level(logging.DEBUG, logger="opgraph.torch"):
        exe = compile_function(backend, function, [(2, 3)])
    assert isinstance(exe, SpecializingExecutable)
    assert [r.getMessage() for r in caplog.records if "specialising per binding" in r.getMessage()]
    assert len(backend.compiled) == 1  # the traced binding, compiled at once
    module = og_torch.runtime.ExecutableModule(backend, exe, [0], single=True)
    for rows in (2, 5, 2, 5, 7):
        x_value = torch.randn(rows, 3)
        torch.testing.assert_close(module(x_value), torch.cat([x_value, x_value]).relu())
    assert [f.parameter_types[0].shape for f in backend.compiled] == [(2, 3), (5, 3), (7, 3)]


def test_static_only_backend_still_raises_for_static_functions():
    x = og.parameter(og.f32, (2, 3), name="x")
    function = og.Function([ops.relu(x)], [x], name="static")

    class Refuses(StaticOnly):
        def compile(self, function, profile=False):
            raise UnsupportedOpError("no")

    with pytest.raises(UnsupportedOpError, match="no"):
        compile_function(Refuses(), function)


# ------------------------------------------------------------------------------- training
@pytest.mark.parametrize("which", ["mlp", "encoder_layer"])
def test_training_with_dynamic_shapes_compiles_once_and_matches_eager(monkeypatch, which):
    torch.manual_seed(0)
    if which == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
        shapes = [(4, 8), (6, 8), (9, 8), (6, 8)]
    else:
        model = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        shapes = [(4, 5, 8), (6, 3, 8), (2, 9, 8)]
    eager = copy.deepcopy(model)
    compiles, dynamo = Compiles(monkeypatch, "INTERPRETER"), counted("INTERPRETER")
    compiled = torch.compile(model, backend=dynamo, dynamic=True)
    counts = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", og_torch.FallbackWarning)
        for shape in shapes:
            x = torch.randn(shape)
            compiled(x).square().sum().backward()
            eager(x).square().sum().backward()
            for p, q in zip(model.parameters(), eager.parameters(), strict=True):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
                p.grad, q.grad = None, None
            counts.append((dynamo.frame_count, compiles.count))
    assert compiles.count >= 2  # a forward and a backward, in opgraph
    assert counts == [counts[0]] * len(shapes)  # nothing compiled after the first step
