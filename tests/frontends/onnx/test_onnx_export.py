"""Export: the record table through export_model, checked by onnxruntime against INTERPRETER
and by import_model back into opgraph; plus the exporter's own contract."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is not installed")

import opgraph as og  # noqa: E402
from opgraph import ops  # noqa: E402
from opgraph.core import element_type as et  # noqa: E402
from opgraph.frontends.onnx import export_model, import_model  # noqa: E402
from opgraph.testing.records import RECORDS  # noqa: E402

OPSET = 18  # bitwise ops and max/min scatter reductions need 18
PREFERRED = (et.f32, et.f64, et.i32, et.i64)

#: Records onnxruntime computes differently on purpose; one reason each.
ORT_DIFFERS = {
    "atan2_special": "Atan2 is composed (atan(y/x) moved by quadrant): ±0 and ±inf cases differ",
    "max_pool_nan": "onnxruntime's MaxPool skips NaN; opgraph propagates it",
    "max_pool_with_indices_nan": "onnxruntime's MaxPool skips NaN; opgraph propagates it",
    "arg_max_nan": "onnxruntime's ArgMax ignores NaN; opgraph treats NaN as the maximum",
    "arg_max_nan_last": "onnxruntime's ArgMax ignores NaN; opgraph treats NaN as the maximum",
    "arg_min_nan": "onnxruntime's ArgMin ignores NaN; opgraph treats NaN as the minimum",
    "arg_min_nan_last": "onnxruntime's ArgMin ignores NaN; opgraph treats NaN as the minimum",
}

#: Records onnxruntime computed differently before a release: name -> (fixed in, reason).
ORT_DIFFERED_BEFORE = {
    "top_k_nan": ((1, 32), "onnxruntime's TopK ordered NaN differently before 1.32"),
    "top_k_nan_smallest": ((1, 32), "onnxruntime's TopK ordered NaN differently before 1.32"),
}

#: The floor on exportable records at OPSET (raise it when exporters are added). Lowered from
#: 434 when export began to run ONNX's type inference (``full_check``): six records used to be
#: written as models ONNX refuses (16-bit Quantize/DequantizeLinear and bf16 OneHot values
#: before opset 21, OneHot with scalar indices), which strict import then refused too.
MIN_EXPORTABLE = 429


def _element_type(record: object) -> et.ElementType:
    types = record.element_types  # type: ignore[attr-defined]
    return next((t for t in PREFERRED if t in types), types[0])


def _export(record: object) -> tuple[og.Function, list[np.ndarray], object]:
    element_type = _element_type(record)
    fn = record.function(element_type)  # type: ignore[attr-defined]
    arguments = record.arguments(element_type)  # type: ignore[attr-defined]
    try:
        model = export_model(fn, opset=OPSET)
    except og.ConversionError as error:
        pytest.skip(f"not exportable: {str(error)[:160]}")
    return fn, arguments, model


def _assert_close(got: list[np.ndarray], want: list[np.ndarray], record: object) -> None:
    rtol, atol = record.tolerance(_element_type(record))  # type: ignore[attr-defined]
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        )
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=max(rtol, 1e-5), atol=max(atol, 1e-6))
        else:
            np.testing.assert_array_equal(g, w)


def _ort_version() -> tuple[int, ...]:
    try:
        from importlib.metadata import version

        return tuple(int(part) for part in version("onnxruntime").split(".")[:2])
    except Exception:  # not installed: the test skips itself
        return (0, 0)


def _expected_failure(name: str) -> str | None:
    """Why onnxruntime (the installed release) disagrees with opgraph on record ``name``."""
    if name in ORT_DIFFERS:
        return ORT_DIFFERS[name]
    fixed_in, reason = ORT_DIFFERED_BEFORE.get(name, ((0, 0), ""))
    return reason if _ort_version() < fixed_in else None


def _params() -> list[object]:
    params = []
    for r in RECORDS:
        reason = _expected_failure(r.name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(r, id=r.name, marks=marks))
    return params


@pytest.mark.parametrize("record", _params())
def test_record_export_matches_onnxruntime(record):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    fn, arguments, model = _export(record)
    want = og.backend("INTERPRETER").compile(fn)(*arguments)
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        names = [i.name for i in model.graph.input]
        got = session.run(None, dict(zip(names, arguments, strict=True)))
    except Exception as error:  # onnxruntime lacks a kernel or a case ONNX allows
        pytest.skip(f"onnxruntime cannot run it: {str(error)[:160]}")
    _assert_close(got, want, record)


@pytest.mark.parametrize("record", [pytest.param(r, id=r.name) for r in RECORDS])
def test_record_export_import_round_trip(record):
    fn, arguments, model = _export(record)
    back = import_model(model.SerializeToString())
    interpreter = og.backend("INTERPRETER")
    want = interpreter.compile(fn)(*arguments)
    got = interpreter.compile(back)(*arguments)
    if record.name in ORT_DIFFERS and record.name.startswith("atan2"):
        pytest.xfail(ORT_DIFFERS[record.name])
    _assert_close(got, want, record)


def test_exportable_record_count_only_grows():
    exportable = 0
    for record in RECORDS:
        fn = record.function(_element_type(record))
        try:
            export_model(fn, opset=OPSET)
        except og.ConversionError:
            continue
        exportable += 1
    assert exportable >= MIN_EXPORTABLE, f"{exportable} of {len(RECORDS)} records export"


def test_unsupported_ops_are_listed_at_once():
    x = og.parameter(og.f32, (1, 1, 4, 4), name="x")
    ct = og.parameter(og.f32, (1, 1, 2, 2), name="ct")
    grad = ops.max_pool_backprop(x, ct, (2, 2), strides=(2, 2))
    w = ops.convolution_backprop_filters(x, ct, (3, 3))
    fn = og.Function([grad, w], [x, ct])
    with pytest.raises(
        og.ConversionError, match="2 op.*ConvolutionBackpropFilters, MaxPoolBackprop"
    ):
        export_model(fn)


def test_names_types_and_validity():
    a = og.parameter(og.f32, (2, 3), name="a")
    b = og.parameter(og.i64, (2,), name="b")
    y = ops.softmax(a, axis=1)
    fn = og.Function([y, a, ops.convert(b, og.f32)], [a, b], name="small")
    model = export_model(fn, opset=17)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == ["a", "b"]
    assert model.graph.name == "small"
    assert model.opset_import[0].version == 17
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [1, 1, 1]
    back = import_model(model)
    assert [str(t) for t in back.result_types] == ["f32[2,3]", "f32[2,3]", "f32[2]"]


def test_framework_ops_decompose_unless_exported():
    x = og.parameter(og.f32, (2, 4), name="x")
    fn = og.Function([ops.gelu(x), ops.layer_norm(x)], [x])
    old = {n.op_type for n in export_model(fn, opset=17).graph.node}
    new = {n.op_type for n in export_model(fn, opset=20).graph.node}
    assert "Gelu" not in old and "Erf" in old and "LayerNormalization" in old
    assert "Gelu" in new


def test_opset_range_is_checked():
    x = og.parameter(og.f32, (2,), name="x")
    with pytest.raises(og.ConversionError, match="export targets opsets 13"):
        export_model(og.Function([ops.relu(x)], [x]), opset=9)
