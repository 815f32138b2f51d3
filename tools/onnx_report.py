"""The ONNX bridge's report: conformance per backend, real models against onnxruntime, and
export coverage of the record table.

``python tools/onnx_report.py [--backends INTERPRETER,CPU] [--no-models]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path


def conformance_section(backend: str) -> list[str]:
    """Pass rates on the subset and on all node tests, and the op types still failing."""
    import onnx
    import onnx_conformance as conformance

    names = conformance.test_names()
    outcomes = [conformance.run_test(n, backend) for n in names]
    subset = [o for o in outcomes if o.subset]
    lines = [
        f"conformance on {backend}: onnx {onnx.__version__} node tests (the wheel's shipped "
        f"test data files, {len(names)} tests in {conformance.data_dir()})"
    ]
    for label, group in (("subset", subset), ("all", outcomes)):
        passed = sum(o.passed for o in group)
        rate = 100.0 * passed / max(1, len(group))
        lines.append(f"  {label:<7} {passed}/{len(group)} passed ({rate:.1f} %)")
    specialised = [o for o in subset if o.passed and o.specialised]
    folded = [o for o in specialised if conformance.DATA_DEPENDENT & set(o.op_types)]
    lines.append(
        f"  passing subset tests with inputs specialised as constants: {len(specialised)} "
        f"({len(folded)} of them data-dependent-shape ops that fold entirely)"
    )
    failing = Counter(op for o in subset if not o.passed for op in o.op_types)
    lines.append(
        "  op types in failing subset tests: "
        + (", ".join(f"{k} ({v})" for k, v in failing.most_common()) or "none")
    )
    return lines


def models_section(backends: list[str]) -> list[str]:
    """Max |opgraph - onnxruntime| of the sample models, per backend."""
    import onnx_samples as samples

    lines = ["real models (torch dynamo export) against onnxruntime:"]
    with tempfile.TemporaryDirectory() as folder:
        for name, build in samples.MODELS.items():
            try:
                path, inputs = build(Path(folder))
            except ImportError as missing:
                lines.append(f"  {name:<9} skipped: {missing}")
                continue
            for backend in backends:
                worst, allowed = samples.compare(path, inputs, backend)
                verdict = "ok" if worst <= allowed else "TOO LARGE"
                lines.append(
                    f"  {name:<9} {backend:<12} max |error| {worst:.3g} "
                    f"(allowed {allowed:.3g}) {verdict}"
                )
    return lines


def export_section(opset: int = 18) -> list[str]:
    """How many records export at ``opset`` (the others list an unsupported op)."""
    from opgraph.core import element_type as et
    from opgraph.core.errors import ConversionError
    from opgraph.frontends.onnx import export_model
    from opgraph.testing.records import RECORDS

    preferred = (et.f32, et.f64, et.i32, et.i64)
    exported, refused = 0, Counter[str]()
    for record in RECORDS:
        element_type = next(
            (t for t in preferred if t in record.element_types), record.element_types[0]
        )
        try:
            export_model(record.function(element_type), opset=opset)
            exported += 1
        except ConversionError as error:
            refused[str(error).split(" (node ")[0][:90]] += 1
    lines = [f"export at opset {opset}: {exported}/{len(RECORDS)} records export"]
    lines += [f"  {count} refused: {reason}" for reason, count in refused.most_common()]
    return lines


def main(argv: list[str] | None = None) -> int:
    import opgraph as og

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default=",".join(og.backends()))
    parser.add_argument("--no-models", action="store_true", help="skip the exported models")
    args = parser.parse_args(argv)
    backends = [b for b in args.backends.split(",") if b]
    for backend in backends:
        print("\n".join(conformance_section(backend)))
    if not args.no_models:
        print("\n".join(models_section(backends)))
    print("\n".join(export_section()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
