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
    """Pass rates on the subset and on all node tests with the models as is, and the failing
    subset tests by op type (``onnx_conformance.report``)."""
    import onnx_conformance as conformance

    outcomes = [conformance.run_test(n, backend) for n in conformance.test_names()]
    return conformance.report(outcomes, backend, conformance.AS_IS, failures=False)


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
