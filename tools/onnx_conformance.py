"""ONNX's backend node tests against import → an opgraph backend.

``python tools/onnx_conformance.py [--backend NAME] [--failures]`` prints the pass
rate on the measured subset (tests whose inputs and outputs are all float32/float64/integer/
bool tensors) and on all tests, and the op types that still fail. The tests are the files the
installed ``onnx`` wheel ships (onnx 1.22: ``onnx/backend/test/data/node``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RTOL, ATOL = 1e-3, 1e-7
#: Ops whose output shape depends on input *data*: their tests pass only with that data
#: specialised as constants (the whole graph folds), which the report counts separately.
DATA_DEPENDENT = frozenset({"Compress", "ImageDecoder", "NonMaxSuppression", "NonZero", "Unique"})
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


AS_IS, SPECIALISED = "as-is", "specialised"
MODES = (AS_IS, SPECIALISED)


@dataclass(frozen=True)
class Outcome:
    name: str
    passed: bool
    subset: bool
    message: str
    op_types: tuple[str, ...]
    specialised: tuple[str, ...] = ()
    #: Op classes of the imported Function that read shape-like values at run time.
    run_time: tuple[str, ...] = ()


def run_test(name: str, backend: str = "INTERPRETER", mode: str = AS_IS) -> Outcome:
    """Import, compile and run one node test on every data set; compare like ONNX does."""
    import onnx

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    folder = data_dir() / name
    model = onnx.load(str(folder / "model.onnx"))
    subset = in_subset(model)
    op_types = tuple(sorted({n.op_type for n in model.graph.node}))
    specialised: set[str] = set()
    run_time: set[str] = set()
    try:
        for data_set in sorted(folder.glob("test_data_set_*")):
            static, dynamic = _run_data_set(model, data_set, backend, mode)
            specialised.update(static)
            run_time.update(dynamic)
    except Exception as error:  # the report records every failure kind
        return Outcome(name, False, subset, f"{type(error).__name__}: {error}"[:500], op_types)
    return Outcome(
        name, True, subset, "", op_types, tuple(sorted(specialised)), tuple(sorted(run_time))
    )


def _read(paths: list[Path]) -> list[np.ndarray]:
    from onnx import TensorProto, numpy_helper

    arrays = []
    for path in paths:
        tensor = TensorProto()
        tensor.ParseFromString(path.read_bytes())
        arrays.append(numpy_helper.to_array(tensor))
    return arrays


def _run_data_set(
    model: Any, data_set: Path, backend: str, mode: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Run one data set; returns the names of the inputs specialised as constants and the op
    classes whose sizes were decided at run time."""
    import opgraph as og
    from opgraph.frontends.onnx import import_model

    inputs = _read(sorted(data_set.glob("input_*.pb"), key=_index))
    expected = _read(sorted(data_set.glob("output_*.pb"), key=_index))
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    values = dict(zip(names, inputs, strict=False))
    static: dict[str, Any] = {}
    if mode == AS_IS:
        fn = import_model(model, input_shapes={n: a.shape for n, a in values.items()})
        exe = og.backend(backend).compile(fn)
    else:
        fn, static = import_specialised(model, values)
        try:
            exe = og.backend(backend).compile(fn)
        except og.UnsupportedOpError as error:
            if "decided by the input values" not in str(error):
                raise
            # A backend that refuses data-dependent sizes (NonZero, Unique…): specialise every
            # input as a constant, so those nodes fold at import.
            fn, static = import_specialised(model, values, everything=True)
            exe = og.backend(backend).compile(fn)
    arguments = [values[n] for n in names if n in values and n not in static]
    got = exe(*arguments)
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} outputs, expected {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        _compare(g, e, i)
    dynamic = {n.op.name for n in fn.nodes if n.op.bound_symbols() or _run_time_node(n.op)}
    return tuple(sorted(static)), tuple(sorted(dynamic))


def _run_time_node(op: Any) -> bool:
    from opgraph.frontends.onnx.deferred import RunTimeOnnxModel, RunTimeOnnxNode
    from opgraph.ops import ShapeTensorOp

    return isinstance(op, RunTimeOnnxModel | RunTimeOnnxNode | ShapeTensorOp)


def import_specialised(
    model: Any, values: dict[str, np.ndarray], everything: bool = False
) -> tuple[Any, dict[str, Any]]:
    """Import with the inputs' shapes; opgraph shapes are static, so when a converter needs an
    import-time value that is a graph input (a Reshape target, Resize scales, the data of an
    op whose output shape depends on it), retry with that input specialised as a constant.
    When the needed value is computed from inputs, specialise every shape-like input (integer
    and bool tensors, scalars) once."""
    from opgraph.frontends.onnx import import_model
    from opgraph.frontends.onnx.context import NeedsConstantError

    shapes = {n: a.shape for n, a in values.items()}
    static: dict[str, np.ndarray] = dict(values) if everything else {}
    widened = False
    while True:
        try:
            fn = import_model(
                model, input_shapes=shapes, constant_inputs=static, run_time_values=False
            )
            return fn, static
        except NeedsConstantError as error:
            if error.value_name in values and error.value_name not in static:
                static[error.value_name] = values[error.value_name]
            elif not widened:
                widened = True
                static.update({n: a for n, a in values.items() if _shape_like(a)})
            else:
                raise


def _shape_like(array: np.ndarray) -> bool:
    return array.dtype.kind in "iub" or array.ndim == 0


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
    parser.add_argument(
        "--mode",
        choices=MODES,
        default=AS_IS,
        help="as-is (default) or specialised (inputs read as values retried as constants)",
    )
    parser.add_argument("--failures", action="store_true", help="list every failing test")
    parser.add_argument("-k", default="", help="only tests whose name contains this")
    args = parser.parse_args(argv)
    outcomes = [run_test(n, args.backend, args.mode) for n in test_names() if args.k in n]
    for line in report(outcomes, args.backend, args.mode, args.failures):
        print(line)
    return 0


def report(outcomes: list[Outcome], backend: str, mode: str, failures: bool) -> list[str]:
    """The printed report: pass rates, the run-time or specialised counts, the failures
    grouped by op type with their reasons."""
    import onnx

    subset = [o for o in outcomes if o.subset]
    lines = [
        f"ONNX {onnx.__version__} node tests on {backend}, models {mode} (the wheel's shipped "
        f"test data files: {len(outcomes)} tests from {data_dir()})"
    ]
    for label, group in (("subset (f32/f64/int/bool tensors)", subset), ("all", outcomes)):
        passed = sum(o.passed for o in group)
        rate = 100.0 * passed / max(1, len(group))
        lines.append(f"  {label}: {passed}/{len(group)} passed ({rate:.1f} %)")
    if mode == AS_IS:
        dynamic = [o for o in subset if o.passed and o.run_time]
        kinds = Counter(k for o in dynamic for k in o.run_time)
        lines.append(
            f"  passing subset tests with run-time shape nodes: {len(dynamic)} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
            + ")"
        )
    else:
        constant = [o for o in subset if o.passed and o.specialised]
        folded = [o for o in constant if DATA_DEPENDENT & set(o.op_types)]
        lines.append(
            f"  passing subset tests that needed inputs specialised as constants: "
            f"{len(constant)} ({len(folded)} of them data for {', '.join(sorted(DATA_DEPENDENT))})"
        )
    lines.append("  failing subset tests by op type (the reason of the first):")
    for op_type, group in sorted(group_failures(subset).items(), key=lambda kv: -len(kv[1])):
        reason = " ".join(group[0].message.split())[:160]
        lines.append(f"    {op_type} ({len(group)}): {reason}")
    if failures:
        lines.extend(f"FAIL {o.name}: {o.message}" for o in subset if not o.passed)
    return lines


def group_failures(outcomes: list[Outcome]) -> dict[str, list[Outcome]]:
    """Failing tests by the op type their message names (``ONNX node … (OpType)``), else by
    the test's op types joined."""
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        if o.passed:
            continue
        named = re.search(r"node '[^']*' \((\w+)\)", o.message)
        key = (
            named.group(1)
            if named
            else (o.op_types[0] if len(o.op_types) == 1 else "+".join(o.op_types))
        )
        groups.setdefault(key, []).append(o)
    return groups


if __name__ == "__main__":
    sys.exit(main())
