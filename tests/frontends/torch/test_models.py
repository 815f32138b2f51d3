"""Whole models through both entry points, compared with eager PyTorch to 1e-5."""

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_bridge_helpers import ExecutionCounter, assert_close, numpy_of  # noqa: E402
from torch_bridge_models import MODELS, exported, make  # noqa: E402

pytestmark = [  # torch's own export-time notices
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore:The tensor attributes"),
]

import opgraph as og  # noqa: E402
from opgraph.frontends.torch import import_exported  # noqa: E402


@pytest.mark.parametrize("name", sorted(MODELS))
def test_torch_compile_matches_eager(name, monkeypatch):
    model, args = make(name)
    counter = ExecutionCounter(monkeypatch)
    # dynamo runs nn.LSTM eagerly unless told to trace RNNs
    with torch._dynamo.config.patch(allow_rnn=True), torch.no_grad():
        compiled = torch.compile(model, backend="opgraph", options={"fallback": "error"})
        got = compiled(*args)
        want = model(*args)
    assert counter.calls >= 1, "the graph did not run in opgraph"
    assert_close(got, want)


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_import_exported_matches_eager(name, grad, backend):
    program, model, args = exported(name, grad)
    function = import_exported(program)
    got = backend.compile(function)(*(numpy_of(a) for a in args))
    with torch.no_grad():
        want = model(*args)
    assert_close([torch.from_numpy(g) for g in got], want)


def test_parameters_on_request():
    program, model, args = exported("mlp")
    function = import_exported(program, params_as_parameters=True)
    names = [p.node.name for p in function.parameters]
    assert names[1:] == [name for name, _ in model.named_parameters()]
    weights = [numpy_of(p) for p in model.parameters()]
    (got,) = og.backend("INTERPRETER").compile(function)(numpy_of(args[0]), *weights)
    with torch.no_grad():
        assert_close(torch.from_numpy(got), model(*args))
