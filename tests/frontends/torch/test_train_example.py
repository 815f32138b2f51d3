"""examples/torch_train.py at reduced size: opgraph training reaches eager's accuracy."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("sklearn", reason="the example needs scikit-learn's digits")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "torch_train.py"


@pytest.mark.filterwarnings("error::opgraph.frontends.torch.FallbackWarning")
def test_digits_cnn_trains_to_eagers_accuracy():
    spec = importlib.util.spec_from_file_location("torch_train_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    accuracy, eager = module.main(epochs=2, limit=480)
    test_size = 480 - int(0.8 * 480)
    assert abs(accuracy - eager) <= 1 / test_size  # at most one test image differs
    assert accuracy > 0.3  # it learned something (chance is 0.1)
