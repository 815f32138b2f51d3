"""The benchmark workloads, each built three times from the same weights: an opgraph Function
(opgraph builders), an ONNX model (``onnx.helper``, for onnxruntime and OpenVINO), and torch /
numpy callables."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
import torch.nn.functional as F

import opgraph as og
from bench.onnx_builder import OnnxGraph
from opgraph import ops


@dataclass
class Case:
    """One benchmark case."""

    name: str
    workload: str
    function: og.Function
    onnx: onnx.ModelProto
    inputs: list[np.ndarray]
    torch_fn: Callable[..., Any]
    numpy_fn: Callable[..., Any] | None
    flops: float = 0.0
    tolerance: float = 1e-4
    notes: list[str] = field(default_factory=list)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _const(value: np.ndarray) -> og.Output:
    return og.constant(np.ascontiguousarray(value, np.float32))


def _bias(b: np.ndarray, shape: tuple[int, ...]) -> og.Output:
    return ops.broadcast(_const(b), shape, tuple(range(len(shape) - 1)))


# ------------------------------------------------------------------------------------ W1
def w1(n: int) -> Case:
    """``(a + b) * c`` on ``n x n`` f32."""
    shape = (n, n)
    a, b, c = (og.parameter(og.f32, shape, name) for name in "abc")
    fn = og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c], name=f"w1_{n}")
    g = OnnxGraph("w1")
    ia, ib, ic = (g.input(name, shape) for name in "abc")
    g.output(g.op("Mul", g.op("Add", ia, ib), ic), shape)
    inputs = [_rng(i).random(shape, np.float32) for i in range(3)]
    return Case(
        f"W1 (a+b)*c {n}x{n}",
        "w1",
        fn,
        g.model(),
        inputs,
        lambda x, y, z: (x + y) * z,
        lambda x, y, z: (x + y) * z,
        flops=2.0 * n * n,
    )


# ------------------------------------------------------------------------------------ W2
def w2(size: int = 1 << 22) -> Case:
    """``tanh(x*0.5 + 1) * sigmoid(x) - x/3`` on ``size`` f32."""
    x = og.parameter(og.f32, (size,), "x")
    y = ops.tanh(x * 0.5 + 1.0) * ops.sigmoid(x) - x / 3.0
    fn = og.Function([y], [x], name="w2")
    g = OnnxGraph("w2")
    ix = g.input("x", (size,))
    half, one, three = (g.const(np.array(v, np.float32)) for v in (0.5, 1.0, 3.0))
    t = g.op("Tanh", g.op("Add", g.op("Mul", ix, half), one))
    left = g.op("Mul", t, g.op("Sigmoid", ix))
    g.output(g.op("Sub", left, g.op("Div", ix, three)), (size,))
    data = _rng(1).uniform(-4, 4, size).astype(np.float32)

    def numpy_fn(v: np.ndarray) -> np.ndarray:
        return np.tanh(v * 0.5 + 1) * (1 / (1 + np.exp(-v))) - v / 3

    return Case(
        "W2 tanh(x*0.5+1)*sigmoid(x)-x/3 4M",
        "w2",
        fn,
        g.model(),
        [data],
        lambda v: torch.tanh(v * 0.5 + 1) * torch.sigmoid(v) - v / 3,
        numpy_fn,
        flops=10.0 * size,
    )


# ------------------------------------------------------------------------------------ W3
def w3(batch: int) -> Case:
    """MLP 784-512-512-10, ReLU, softmax."""
    rng = _rng(3)
    sizes = [784, 512, 512, 10]
    weights = [
        (rng.standard_normal((i, o)) / math.sqrt(i)).astype(np.float32)
        for i, o in itertools.pairwise(sizes)
    ]
    biases = [(rng.standard_normal(o) * 0.1).astype(np.float32) for o in sizes[1:]]
    x = og.parameter(og.f32, (batch, 784), "x")
    h = x
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        h = ops.add(ops.dot(h, _const(w)), _bias(b, (batch, w.shape[1])))
        h = ops.relu(h) if i < 2 else ops.softmax(h, -1)
    fn = og.Function([h], [x], name=f"w3_{batch}")
    g = OnnxGraph("w3")
    t = g.input("x", (batch, 784))
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        t = g.op("Add", g.op("MatMul", t, g.const(w)), g.const(b))
        t = g.op("Relu", t) if i < 2 else g.op("Softmax", t, axis=-1)
    g.output(t, (batch, 10))
    tw = [torch.from_numpy(w.T.copy()) for w in weights]
    tb = [torch.from_numpy(b) for b in biases]

    def torch_fn(v: torch.Tensor) -> torch.Tensor:
        v = F.relu(F.linear(v, tw[0], tb[0]))
        v = F.relu(F.linear(v, tw[1], tb[1]))
        return torch.softmax(F.linear(v, tw[2], tb[2]), -1)

    def numpy_fn(v: np.ndarray) -> np.ndarray:
        v = np.maximum(v @ weights[0] + biases[0], 0)
        v = np.maximum(v @ weights[1] + biases[1], 0)
        z = v @ weights[2] + biases[2]
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    data = _rng(4).random((batch, 784), np.float32)
    flops = 2.0 * batch * sum(i * o for i, o in itertools.pairwise(sizes))
    return Case(f"W3 MLP batch {batch}", "w3", fn, g.model(), [data], torch_fn, numpy_fn, flops)


# ----------------------------------------------------------------------------------- zoo
# Real architectures with random weights, exported by torch's dynamo ONNX exporter. The
# vision models other than MobileNetV3 come from transformers (its ResNet, ConvNeXt,
# EfficientNet and ViT ports follow the torchvision/timm layouts); MobileNetV3-Large is
# written here after torchvision's definition, since the torchvision wheel on the index does
# not import beside the CPU torch. Each builder takes ``small``: the test-sized variant
# (narrow, shallow, 64x64 images, 16 tokens), else the realistic one (batch 1, 224x224,
# sequence 128, 30 s of audio).

ZOO_VERSION = 1  # bump when a definition below changes: it keys the export cache
ZOO_CACHE = Path(__file__).resolve().parent / "out" / "zoo"


@dataclass
class ZooModel:
    """A torch module ready to export: its example inputs, by ONNX input name."""

    module: torch.nn.Module
    inputs: dict[str, np.ndarray]
    config: str  # what the module was built from (part of the cache key)
    kwargs: dict[str, Any] = field(default_factory=dict)  # extra forward keywords


class _Tuple(torch.nn.Module):
    """A transformers model called with fixed keywords, returning a tuple of tensors."""

    def __init__(self, model: torch.nn.Module, **kwargs: Any) -> None:
        super().__init__()
        self.model = model
        self.kwargs = kwargs
        self.train(model.training)

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.model(*args, **self.kwargs, return_dict=True).to_tuple())


def _randomize_norms(model: torch.nn.Module) -> torch.nn.Module:
    """Non-trivial batch-norm statistics and affine terms (fresh ones are identities)."""
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            assert module.running_mean is not None and module.running_var is not None
            module.running_mean.uniform_(-0.2, 0.2)
            module.running_var.uniform_(0.5, 1.5)
            module.weight.data.uniform_(0.5, 1.5)
            module.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


def _image(small: bool) -> dict[str, np.ndarray]:
    size = 64 if small else 224
    return {"pixel_values": _rng(5).standard_normal((1, 3, size, size)).astype(np.float32)}


def _vision(name: str, config: Any, small: bool) -> ZooModel:
    import transformers

    torch.manual_seed(0)
    model = _randomize_norms(getattr(transformers, name)(config))
    return ZooModel(_Tuple(model), _image(small), config.to_json_string())


def zoo_resnet50(small: bool) -> ZooModel:
    """ResNet-50 (bottleneck blocks 3-4-6-3, 1000 classes)."""
    import transformers

    kwargs: dict[str, Any] = {}
    if small:
        kwargs = {"embedding_size": 16, "hidden_sizes": [32, 64, 128, 256], "depths": [1, 1, 2, 1]}
    config = transformers.ResNetConfig(num_labels=1000, **kwargs)
    return _vision("ResNetForImageClassification", config, small)


def zoo_convnext_tiny(small: bool) -> ZooModel:
    """ConvNeXt-T (depths 3-3-9-3, widths 96-768, 1000 classes)."""
    import transformers

    kwargs: dict[str, Any] = {}
    if small:
        kwargs = {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1], "image_size": 64}
    config = transformers.ConvNextConfig(num_labels=1000, layer_scale_init_value=0.5, **kwargs)
    return _vision("ConvNextForImageClassification", config, small)


def zoo_efficientnet_b0(small: bool) -> ZooModel:
    """EfficientNet-B0 (width and depth 1.0, 224x224, 1000 classes)."""
    import transformers

    scale = 0.5 if small else 1.0
    config = transformers.EfficientNetConfig(
        num_labels=1000,
        width_coefficient=scale,
        depth_coefficient=scale,
        image_size=64 if small else 224,
        hidden_dim=640 if small else 1280,
        dropout_rate=0.2,
    )
    spec = _vision("EfficientNetForImageClassification", config, small)
    # transformers pools with AvgPool2d(1280, ceil_mode=True): one window over all of the
    # 7x7 map, which OpenVINO refuses (opgraph and onnxruntime accept it). torchvision's
    # global pool computes the same mean.
    model = spec.module.model  # type: ignore[union-attr]
    model.efficientnet.pooler = torch.nn.AdaptiveAvgPool2d(1)
    spec.config += " pooler=AdaptiveAvgPool2d(1)"
    return spec


def zoo_vit(small: bool) -> ZooModel:
    """ViT-B/16 (12 layers of width 768, 224x224, 1000 classes)."""
    import transformers

    kwargs: dict[str, Any] = {}
    if small:
        kwargs = {
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 128,
            "image_size": 64,
        }
    config = transformers.ViTConfig(num_labels=1000, **kwargs)
    return _vision("ViTForImageClassification", config, small)


def _tokens(small: bool, seed: int) -> np.ndarray:
    length, vocab = (16, 100) if small else (128, 30000)
    return _rng(seed).integers(0, vocab, (1, length)).astype(np.int64)


def zoo_bert(small: bool) -> ZooModel:
    """BERT-base, 2 layers (width 768, 12 heads), sequence 128 with an attention mask."""
    import transformers

    size: dict[str, Any] = {"num_hidden_layers": 2}
    if small:
        size |= {"vocab_size": 100, "hidden_size": 64, "num_attention_heads": 2}
        size |= {"intermediate_size": 128, "max_position_embeddings": 32}
    config = transformers.BertConfig(**size)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids = _tokens(small, 6)
    mask = np.ones_like(ids)
    mask[0, -ids.shape[1] // 4 :] = 0  # padding: the attention mask matters
    inputs = {"input_ids": ids, "attention_mask": mask}
    return ZooModel(_Tuple(model), inputs, config.to_json_string())


def zoo_gpt2(small: bool) -> ZooModel:
    """GPT-2, 2 layers (width 768, 12 heads), sequence 128."""
    import transformers

    size: dict[str, Any] = {"n_layer": 2}
    if small:
        size |= {"vocab_size": 100, "n_embd": 64, "n_head": 2, "n_positions": 32}
    config = transformers.GPT2Config(**size)
    torch.manual_seed(0)
    model = transformers.GPT2Model(config).eval()
    inputs = {"input_ids": _tokens(small, 7)}
    return ZooModel(_Tuple(model, use_cache=False), inputs, config.to_json_string())


def zoo_whisper_encoder(small: bool) -> ZooModel:
    """Whisper-tiny's encoder (4 layers of width 384), 30 s of 80 mel bins (3000 frames)."""
    import transformers

    size: dict[str, Any] = {}
    if small:
        size = {"d_model": 64, "encoder_layers": 2, "encoder_attention_heads": 2}
        size |= {"encoder_ffn_dim": 128, "max_source_positions": 32, "num_mel_bins": 16}
    config = transformers.WhisperConfig(**size)
    torch.manual_seed(0)
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    model = WhisperEncoder(config).eval()
    frames = 2 * config.max_source_positions
    features = _rng(8).standard_normal((1, config.num_mel_bins, frames)).astype(np.float32)
    return ZooModel(_Tuple(model), {"input_features": features}, config.to_json_string())


# torchvision's mobilenet_v3_large table: kernel, expanded, out, squeeze-excite, hard-swish,
# stride (the input width of each row is the previous row's output; the stem gives 16).
_MOBILENET_V3_LARGE = (
    (3, 16, 16, False, False, 1),
    (3, 64, 24, False, False, 2),
    (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2),
    (5, 120, 40, True, False, 1),
    (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2),
    (3, 200, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1),
    (3, 480, 112, True, True, 1),
    (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2),
    (5, 960, 160, True, True, 1),
    (5, 960, 160, True, True, 1),
)


def _divisible(v: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: round to a multiple of 8, losing at most 10 %."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[Any]:
    conv = torch.nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False)
    return [conv, torch.nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]


class _SqueezeExcite(torch.nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        squeeze = _divisible(channels // 4)
        self.fc1 = torch.nn.Conv2d(channels, squeeze, 1)
        self.fc2 = torch.nn.Conv2d(squeeze, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class _InvertedResidual(torch.nn.Module):
    def __init__(self, cin: int, row: tuple[int, int, int, bool, bool, int], width: float):
        super().__init__()
        k, expanded, cout, se, hs, stride = row
        expanded, cout = _divisible(expanded * width), _divisible(cout * width)
        act: type[torch.nn.Module] = torch.nn.Hardswish if hs else torch.nn.ReLU
        layers: list[torch.nn.Module] = []
        if expanded != cin:
            layers += [*_conv_bn(cin, expanded, 1), act()]
        layers += [*_conv_bn(expanded, expanded, k, stride, expanded), act()]
        if se:
            layers.append(_SqueezeExcite(expanded))
        layers += _conv_bn(expanded, cout, 1)
        self.block = torch.nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout
        self.out_channels = cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


def _mobilenet_v3(width: float, rows: int, classes: int = 1000) -> torch.nn.Module:
    """torchvision's ``mobilenet_v3_large(width_mult=width)`` with the first ``rows`` rows."""
    cin = _divisible(16 * width)
    layers: list[torch.nn.Module] = [*_conv_bn(3, cin, 3, 2), torch.nn.Hardswish()]
    for row in _MOBILENET_V3_LARGE[:rows]:
        block = _InvertedResidual(cin, row, width)
        layers.append(block)
        cin = block.out_channels
    last = 6 * cin
    layers += [*_conv_bn(cin, last, 1), torch.nn.Hardswish()]
    head = _divisible(1280 * width)
    return torch.nn.Sequential(
        *layers,
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(last, head),
        torch.nn.Hardswish(),
        torch.nn.Dropout(0.2),
        torch.nn.Linear(head, classes),
    )


def zoo_mobilenet_v3(small: bool) -> ZooModel:
    """MobileNetV3-Large (torchvision's layout: 15 inverted residual blocks, 1000 classes)."""
    width, rows = (0.5, 7) if small else (1.0, len(_MOBILENET_V3_LARGE))
    torch.manual_seed(0)
    model = _randomize_norms(_mobilenet_v3(width, rows))
    return ZooModel(model, _image(small), f"mobilenet_v3_large width={width} rows={rows}")


ZOO: dict[str, Callable[[bool], ZooModel]] = {
    "resnet50": zoo_resnet50,
    "mobilenet_v3": zoo_mobilenet_v3,
    "efficientnet_b0": zoo_efficientnet_b0,
    "convnext_tiny": zoo_convnext_tiny,
    "vit_b16": zoo_vit,
    "bert_2l": zoo_bert,
    "gpt2_2l": zoo_gpt2,
    "whisper_tiny_encoder": zoo_whisper_encoder,
}


def zoo_export(name: str, small: bool = False, folder: Path = ZOO_CACHE) -> tuple[Path, ZooModel]:
    """Export zoo model ``name`` to ONNX under ``folder`` (reused while its key matches).

    The file name carries a digest of the model's configuration, the input shapes, the torch
    and transformers versions and ``ZOO_VERSION``, so a stale export is never reused.
    """
    import transformers

    spec = ZOO[name](small)
    shapes = {k: v.shape for k, v in spec.inputs.items()}
    key = repr((spec.config, shapes, torch.__version__, transformers.__version__, ZOO_VERSION))
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    path = folder / f"{name}{'-small' if small else ''}-{digest}.onnx"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        args = tuple(torch.from_numpy(v) for v in spec.inputs.values())
        with torch.inference_mode(False), torch.no_grad():
            program = torch.onnx.export(
                spec.module, args, dynamo=True, input_names=list(spec.inputs), verbose=False
            )
        assert program is not None  # the dynamo exporter always returns the program
        partial = path.with_suffix(".partial")
        program.save(str(partial))
        partial.replace(path)  # never a half-written model under the final name
    return path, spec


def zoo_case(name: str, small: bool = False, folder: Path = ZOO_CACHE) -> Case:
    """Zoo model ``name`` as a benchmark Case (imported into opgraph, inputs in model order)."""
    from opgraph.frontends.onnx import import_model

    path, spec = zoo_export(name, small, folder)
    model = onnx.load(str(path))
    order = [i.name for i in model.graph.input]
    inputs = [spec.inputs[n] for n in order]
    fn = import_model(model, input_shapes={n: spec.inputs[n].shape for n in order})
    module = spec.module

    def torch_fn(*args: torch.Tensor) -> Any:
        result = module(*args)
        return result if isinstance(result, torch.Tensor) else result[0]

    return Case(name, "zoo", fn, model, inputs, torch_fn, None, tolerance=1e-4)


def zoo_error(got: list[np.ndarray], want: list[np.ndarray]) -> tuple[float, float]:
    """``(max |got - want|, max |want|)`` over every output; the zoo's bound is 1e-4 of the
    second (the output scale)."""
    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs, onnxruntime gives {len(want)}")
    error = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True))
    return error, max(float(np.max(np.abs(w))) for w in want)
