"""import_exported: signatures, errors that list every problem, provenance, type promotion."""

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from torch_bridge_helpers import assert_close, numpy_of  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

import opgraph as og  # noqa: E402
from opgraph.frontends.torch import aten_op, import_exported, registered  # noqa: E402


def export(model, *args, **kwargs):
    return torch.export.export(model, args, **kwargs).run_decompositions()


def run(function, *args):
    return [torch.from_numpy(a) for a in og.backend("INTERPRETER").compile(function)(*args)]


class Lambda(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def test_every_unsupported_overload_is_listed_at_once():
    model = Lambda(lambda x: torch.special.bessel_j0(x) + torch.special.erfcx(x) + torch.lgamma(x))
    with pytest.raises(og.ConversionError) as error:
        import_exported(export(model, torch.rand(3) + 0.5))
    message = str(error.value)
    assert "3 unsupported ATen overload(s)" in message
    for name in ("aten.special_bessel_j0.default", "aten.special_erfcx.default", "aten.lgamma"):
        assert name in message


def test_non_core_programs_get_a_hint():
    model = torch.nn.Conv2d(2, 2, 3)
    program = torch.export.export(model, (torch.randn(1, 2, 5, 5),))  # not decomposed
    with pytest.raises(og.ConversionError, match="run_decompositions"):
        import_exported(program)


def test_unsupported_dtype_is_named():
    model = Lambda(lambda x: torch.view_as_real(x * x))
    with pytest.raises(og.ConversionError, match="complex64"):
        import_exported(export(model, torch.randn(3, dtype=torch.complex64)))


def test_in_place_buffer_updates_are_refused_or_returned():
    model = torch.nn.BatchNorm1d(3).train()
    x = torch.randn(4, 3)
    program = export(model, x)
    with pytest.raises(og.ConversionError, match=r"running_mean.*in place.*eval\(\)"):
        import_exported(program)
    function = import_exported(program, keep_mutations=True)
    y, mean, var, batches = run(function, numpy_of(x))
    with torch.no_grad():
        want = model(x)  # updates the running statistics
    assert_close(y, want)
    assert_close(mean, model.running_mean)
    assert_close(var, model.running_var)
    assert batches.item() == model.num_batches_tracked.item()


def test_input_mutations_become_extra_results():
    def f(x, total):
        total.add_(x.sum(0))
        return x * 2

    x, total = torch.randn(3, 4), torch.ones(4)
    function = import_exported(export(Lambda(f), x, total), keep_mutations=True)
    doubled, new_total = run(function, numpy_of(x), numpy_of(total))
    assert_close(doubled, x * 2)
    assert_close(new_total, total + x.sum(0))


def test_dynamic_shapes_become_symbols():
    batch = torch.export.Dim("batch")
    program = torch.export.export(
        torch.nn.Linear(4, 2), (torch.randn(3, 4),), dynamic_shapes={"input": {0: batch}}
    ).run_decompositions()
    function = import_exported(program)  # more in test_dynamic_shapes.py
    assert str(function.flat_result_types[0]) == "f32[batch,2]"


def test_scalar_inputs_are_specialised_and_promotion_is_explicit():
    def f(x, k):
        return (x * k + 1.5) // 2, x.float() / 3

    x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    function = import_exported(export(Lambda(f), x, 4))
    assert [str(p.type) for p in function.parameters] == ["i32[2,3]"]
    assert [str(r.type) for r in function.results] == ["f32[2,3]", "f32[2,3]"]
    got = run(function, numpy_of(x))
    assert_close(got, f(x, 4))


def test_nodes_name_the_torch_node_and_source_line():
    program = export(torch.nn.Linear(4, 2), torch.randn(3, 4))
    function = import_exported(program)
    provenances = {n.provenance for n in function.nodes if n.inputs}
    assert any("torch node 'addmm'" in p and "(aten.addmm.default)" in p for p in provenances)
    assert any("linear.py:" in p for p in provenances)


def test_converter_errors_name_the_node():
    model = Lambda(lambda x: torch.nn.functional.avg_pool2d(x, 2, divisor_override=3))
    with pytest.raises(og.ConversionError, match=r"torch node 'avg_pool2d'.*divisor_override"):
        import_exported(export(model, torch.randn(1, 1, 4, 4)))


def test_registry_refuses_duplicates_and_lists_converters():
    assert "aten.addmm.default" in registered()
    assert "operator.getitem" in registered()
    with pytest.raises(og.RegistryError, match="already registered"):
        aten_op(torch.ops.aten.addmm.default)(lambda ctx: None)
