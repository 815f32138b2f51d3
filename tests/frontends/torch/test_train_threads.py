"""The bridge runs opgraph's parallel kernels on torch's OpenMP team during a torch.compile'd
training step (frontends/torch/threads.py), and on opgraph's own pool in compile_train_step;
the gradients and parameters stay those of eager PyTorch either way. The runtime's counters
(``og_pool_counters``) say where the jobs ran: nothing is timed."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

import opgraph as og  # noqa: E402
from opgraph.backends.cpu.codegen.runtime_counters import runtime_counters  # noqa: E402
from opgraph.frontends.torch import compile_train_step, share_torch_team  # noqa: E402
from opgraph.frontends.torch.threads import torch_openmp_library  # noqa: E402
from opgraph.runtime import host_threads  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.fixture
def runtime():
    if "CPU" not in og.backends():
        pytest.skip("the CPU backend is unavailable here (no C compiler)")
    if torch_openmp_library() is None:
        pytest.skip("this torch build's ATen parallel backend is not OpenMP")
    yield og.backend("CPU").toolchain.runtime()
    host_threads.withdraw_host_openmp()


def _mlp() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    ).train()
    return model, torch.randn(128, 256), torch.randint(0, 10, (128,))


def _sgd(model: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


@pytest.mark.parametrize("team", [True, False], ids=["torch-team", "own-pool"])
def test_torch_compile_step_runs_on_torchs_team_and_matches_eager(runtime, team):
    model, x, y = _mlp()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="opgraph")
    optimizer, eager = _sgd(model), _sgd(reference)
    loss = torch.nn.functional.cross_entropy
    # A fresh declaration (og_set_team) also clears the runtime's count of jobs left to its own
    # pool after an earlier test's late team thread (OG_TEAM_REST): the counts below are this
    # test's alone, whatever ran before in the process.
    host_threads.withdraw_host_openmp()
    share_torch_team(team)
    try:
        before = runtime_counters(runtime)
        for _ in range(5):
            for run, opt in ((compiled, optimizer), (reference, eager)):
                opt.zero_grad()
                loss(run(x), y).backward()
                opt.step()
        after = runtime_counters(runtime)
        assert host_threads.host_openmp() == (torch_openmp_library() if team else None)
        assert runtime.og_team_set() == int(team)
    finally:
        share_torch_team(True)
    if og.backend("CPU").config.num_threads > 1:
        team_jobs = after.team_jobs - before.team_jobs
        assert after.jobs > before.jobs
        if not team:
            assert team_jobs == 0
        elif after.team_late == before.team_late:  # no team thread was descheduled
            assert team_jobs == after.jobs - before.jobs
        else:  # jobs after a late one run on opgraph's own pool (none if it was the last)
            assert 0 < team_jobs <= after.jobs - before.jobs
    want = reference.state_dict()
    for name, got in model.state_dict().items():
        torch.testing.assert_close(got, want[name], rtol=1e-5, atol=1e-6, msg=name)


def test_compile_train_step_runs_on_opgraphs_own_pool(runtime):
    host_threads.declare_host_openmp(torch_openmp_library() or "libgomp.so.1")
    assert runtime.og_team_set() == 1
    model, x, y = _mlp()
    step = compile_train_step(model, torch.nn.functional.cross_entropy, _sgd(model))
    step(x, y)
    before = runtime_counters(runtime)
    step(x, y)
    after = runtime_counters(runtime)
    assert host_threads.host_openmp() is None and runtime.og_team_set() == 0
    assert after.team_jobs == before.team_jobs


def test_training_steps_compile_once(runtime, monkeypatch):
    """A torch.compile'd training step compiles its forward and backward graphs once: later
    steps neither recompile under dynamo (guards hold) nor rebuild opgraph's partitions."""
    from torch._dynamo.utils import counters

    import opgraph.frontends.torch.autograd as autograd

    builds: list[str] = []
    real = autograd.compile_graph
    monkeypatch.setattr(
        autograd,
        "compile_graph",
        lambda gm, *a: (builds.append(gm.__class__.__name__), real(gm, *a))[1],
    )
    torch._dynamo.reset()
    model, x, y = _mlp()
    compiled = torch.compile(model, backend="opgraph")
    optimizer = _sgd(model)

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(compiled(x), y).backward()
        optimizer.step()

    step()
    assert len(builds) == 2  # the forward graph and the backward graph
    graphs = counters["stats"]["unique_graphs"]
    for _ in range(4):
        step()
    assert len(builds) == 2
    assert counters["stats"]["unique_graphs"] == graphs
