"""Small real models exported with torch's dynamo ONNX exporter, for the bridge's tests and
its report: a 2-layer BERT and a 2-layer GPT-2 (transformers, random weights from a config)
and a ResNet-18-style CNN (written here; torchvision is not a dependency). Needs the
``models`` extra (torch, transformers, onnxscript) and onnxruntime.

Each builder returns ``(model_path, inputs)``; ``compare`` returns the max absolute difference
between opgraph and onnxruntime and the bound it must stay under.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SEQUENCE = 8
BATCH = 2
VOCAB = 100


def _export(
    module: Any, args: tuple[Any, ...], path: Path, names: list[str], **kwargs: Any
) -> None:
    import torch

    program = torch.onnx.export(
        module, args, kwargs=kwargs or None, dynamo=True, input_names=names, verbose=False
    )
    assert program is not None  # the dynamo exporter always returns the program
    program.save(str(path))


def _tokens() -> np.ndarray:
    return np.random.default_rng(0).integers(0, VOCAB, (BATCH, SEQUENCE)).astype(np.int64)


def bert(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    import torch
    import transformers

    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids = _tokens()
    mask = np.ones((BATCH, SEQUENCE), dtype=np.int64)
    mask[1, SEQUENCE - 2 :] = 0  # padding in the second sequence exercises the attention mask
    path = folder / "bert.onnx"
    args = (torch.from_numpy(ids), torch.from_numpy(mask))
    _export(model, args, path, ["input_ids", "attention_mask"])
    return path, {"input_ids": ids, "attention_mask": mask}


def gpt2(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    import torch
    import transformers

    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=2, n_positions=32
    )
    torch.manual_seed(0)
    model = transformers.GPT2Model(config).eval()
    ids = _tokens()
    path = folder / "gpt2.onnx"
    _export(model, (torch.from_numpy(ids),), path, ["input_ids"], use_cache=False)
    return path, {"input_ids": ids}


def resnet(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    import torch

    torch.manual_seed(0)
    model = _resnet18_module()
    image = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    path = folder / "resnet18.onnx"
    _export(model, (torch.from_numpy(image),), path, ["image"])
    return path, {"image": image}


def _resnet18_module() -> Any:
    """ResNet-18's layout (stem, 4 stages of 2 basic blocks, pooled linear head), narrow."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                nn.BatchNorm2d(cout),
                nn.ReLU(),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                nn.BatchNorm2d(cout),
            )
            self.skip = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: Any) -> Any:
            return nn.functional.relu(self.body(x) + self.skip(x))

    widths = (16, 32, 64, 128)
    stages: list[nn.Module] = []
    cin = widths[0]
    for i, width in enumerate(widths):
        stages += [Block(cin, width, 1 if i == 0 else 2), Block(width, width, 1)]
        cin = width
    model = nn.Sequential(
        nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
        nn.BatchNorm2d(widths[0]),
        nn.ReLU(),
        nn.MaxPool2d(3, 2, 1),
        *stages,
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(cin, 10),
    )
    for module in model.modules():  # non-trivial batch-norm statistics
        if isinstance(module, nn.BatchNorm2d):
            assert module.running_mean is not None and module.running_var is not None
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


MODELS: dict[str, Callable[[Path], tuple[Path, dict[str, np.ndarray]]]] = {
    "bert": bert,
    "gpt2": gpt2,
    "resnet18": resnet,
}


def compare(path: Path, inputs: dict[str, np.ndarray], backend: str) -> tuple[float, float]:
    """``(max |opgraph - onnxruntime|, allowed)`` over every output of the model."""
    import onnxruntime

    import opgraph as og
    from opgraph.frontends.onnx import import_model

    fn = import_model(str(path), input_shapes={k: v.shape for k, v in inputs.items()})
    names = [p.node.name or "" for p in fn.parameters]
    got = og.backend(backend).compile(fn)(*(inputs[n] for n in names))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = session.run(None, inputs)
    error = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
    scale = max(1.0, max(float(np.max(np.abs(w))) for w in want))
    return error, 1e-4 * scale
