"""Every ATen overload the test models produce after run_decompositions has a converter.

Run as a script to print the coverage table:
``python tests/frontends/torch/test_aten_coverage.py``.
"""

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_bridge_models import MODELS, make  # noqa: E402

from opgraph.frontends.torch.coverage import overload_coverage  # noqa: E402


def exported_graphs():
    """Each test model exported with grad mode on and off (off takes PyTorch's fused
    inference fast paths, as torch.compile under no_grad does)."""
    graphs = []
    for name in sorted(MODELS):
        for grad in (True, False):
            model, args = make(name)
            with torch.set_grad_enabled(grad):
                program = torch.export.export(model, args).run_decompositions()
            graphs.append(program.graph)
    return graphs


def test_test_models_are_fully_covered():
    report = overload_coverage(exported_graphs())
    assert report.seen, "no overloads collected"
    assert report.missing == [], report.table()


if __name__ == "__main__":
    print(overload_coverage(exported_graphs()).table())
