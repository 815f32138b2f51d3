"""ONNX's backend node tests against import → an opgraph backend.

``python -m opgraph.frontends.onnx.conformance [--backend NAME] [--failures]`` prints the pass
rate on the measured subset (tests whose inputs and outputs are all float32/float64/integer/
bool tensors) and on all tests, and the op types that still fail. The tests are the files the
installed ``onnx`` wheel ships (onnx 1.22: ``onnx/backend/test/data/node``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RTOL, ATOL = 1e-3, 1e-7
_SUBSET_TYPES = {1, 2, 3, 4, 5, 6, 7, 9, 11, 12, 13}  # float, double, ints, bool


def data_dir() -> Path:
    import onnx

    return Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "node"


def test_names() -> list[str]:
    """Every node test shipped by the installed onnx."""
    root = data_dir()
    return (
        sorted(p.name for p in root.iterdir() if (p / "model.onnx").exists())
        if root.exists()
        else []
    )


def in_subset(model: Any) -> bool:
    """True when every graph input and output is a float32/float64/integer/bool tensor."""
    for info in list(model.graph.input) + list(model.graph.output):
        if info.type.WhichOneof("value") != "tensor_type":
            return False
        if info.type.tensor_type.elem_type not in _SUBSET_TYPES:
            return False
    return True


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: bool
    subset: bool
    message: str
    op_types: tuple[str, ...]


def run_test(name: str, backend: str = "INTERPRETER") -> Outcome:
    """Import, compile and run one node test on every data set; compare like ONNX does."""
    import onnx

    folder = data_dir() / name
    model = onnx.load(str(folder / "model.onnx"))
    subset = in_subset(model)
    op_types = tuple(sorted({n.op_type for n in model.graph.node}))
    try:
        for data_set in sorted(folder.glob("test_data_set_*")):
            _run_data_set(model, data_set, backend)
    except Exception as error:  # the report records every failure kind
        return Outcome(name, False, subset, f"{type(error).__name__}: {error}"[:500], op_types)
    return Outcome(name, True, subset, "", op_types)


def _read(paths: list[Path]) -> list[np.ndarray]:
    from onnx import TensorProto, numpy_helper

    arrays = []
    for path in paths:
        tensor = TensorProto()
        tensor.ParseFromString(path.read_bytes())
        arrays.append(numpy_helper.to_array(tensor))
    return arrays


def _run_data_set(model: Any, data_set: Path, backend: str) -> None:
    import opgraph as og
    from opgraph.core.errors import ConversionError
    from opgraph.frontends.onnx import import_model

    inputs = _read(sorted(data_set.glob("input_*.pb"), key=_index))
    expected = _read(sorted(data_set.glob("output_*.pb"), key=_index))
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    shapes = {n: a.shape for n, a in zip(names, inputs, strict=False)}
    try:
        fn = import_model(model, input_shapes=shapes)
        arguments = list(inputs)
    except ConversionError as error:
        if "computable at import time" not in str(error):
            raise
        # Shapes are static in opgraph: specialise the integer inputs the model computes
        # shapes from (their values come with the test).
        static = {n: a for n, a in zip(names, inputs, strict=False) if a.dtype.kind in "iu"}
        fn = import_model(model, input_shapes=shapes, constant_inputs=static)
        arguments = [a for n, a in zip(names, inputs, strict=False) if n not in static]
    got = og.backend(backend).compile(fn)(*arguments)
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} outputs, expected {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        _compare(g, e, i)


def _index(path: Path) -> int:
    return int(path.stem.split("_")[-1])


def _compare(got: np.ndarray, expected: np.ndarray, index: int) -> None:
    if got.shape != expected.shape:
        raise AssertionError(f"output {index}: shape {got.shape}, expected {expected.shape}")
    if got.dtype != expected.dtype:
        raise AssertionError(f"output {index}: dtype {got.dtype}, expected {expected.dtype}")
    if expected.dtype.kind in "biuUSO":
        np.testing.assert_array_equal(got, expected, err_msg=f"output {index}")
    else:
        np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=f"output {index}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="INTERPRETER")
    parser.add_argument("--failures", action="store_true", help="list every failing test")
    parser.add_argument("-k", default="", help="only tests whose name contains this")
    args = parser.parse_args(argv)
    outcomes = [run_test(n, args.backend) for n in test_names() if args.k in n]
    subset = [o for o in outcomes if o.subset]
    import onnx

    print(f"ONNX {onnx.__version__} node tests on {args.backend}")
    for label, group in (("subset (f32/f64/int/bool tensors)", subset), ("all", outcomes)):
        passed = sum(o.passed for o in group)
        rate = 100.0 * passed / max(1, len(group))
        print(f"  {label}: {passed}/{len(group)} passed ({rate:.1f} %)")
    failing_ops = Counter(op for o in subset if not o.passed for op in o.op_types)
    print(
        "  op types in failing subset tests:",
        ", ".join(f"{k} ({v})" for k, v in failing_ops.most_common()),
    )
    if args.failures:
        for o in subset:
            if not o.passed:
                print(f"FAIL {o.name}: {o.message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
