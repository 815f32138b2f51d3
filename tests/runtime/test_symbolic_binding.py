"""Calls of a symbolic Function: symbols bound per call from the argument shapes, errors
naming the symbol and both values, nothing written on an error."""

import numpy as np
import pytest

import opgraph as og
from opgraph import ops
from opgraph.passes import specialize_shapes

batch, seq = og.dim("batch"), og.dim("seq", max=8)


def make():
    x = og.parameter(og.f32, (batch, seq), name="x")
    y = og.parameter(og.f32, (batch, 1), name="y")
    z = ops.concat([x, y], 1)
    return og.Function([ops.relu(z), ops.slice(z, [0, 1], [batch, seq + 1])], [x, y], name="f")


def arrays(b, s, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((b, s)).astype(np.float32), rng.standard_normal((b, 1)).astype(
        np.float32
    )


def test_one_compile_runs_every_binding():
    exe = og.backend("INTERPRETER").compile(make())
    for b, s in ((1, 3), (4, 8), (2, 0)):
        x, y = arrays(b, s)
        relu, tail = exe(x, y)
        z = np.concatenate([x, y], 1)
        np.testing.assert_array_equal(relu, np.maximum(z, 0))
        np.testing.assert_array_equal(tail, z[:, 1:])


def test_call_with_result_tensors_checks_bound_shapes():
    backend = og.backend("INTERPRETER")
    exe = backend.compile(make())
    x, y = arrays(3, 5)
    inputs = [backend.create_tensor(og.f32, (3, 5), x), backend.create_tensor(og.f32, (3, 1), y)]
    outputs = [backend.create_tensor(og.f32, (3, 6)), backend.create_tensor(og.f32, (3, 5))]
    exe.call(outputs, inputs)
    np.testing.assert_array_equal(outputs[1].read(), np.concatenate([x, y], 1)[:, 1:])
    wrong = [backend.create_tensor(og.f32, (3, 6)), backend.create_tensor(og.f32, (3, 6))]
    with pytest.raises(og.GraphError, match=r"output 1 has shape \[3, 6\], result 1 has \[3, 5\]"):
        exe.call(wrong, inputs)
    assert not wrong[0].read().any()  # nothing written


def test_disagreeing_arguments_name_the_symbol_and_both_values():
    exe = og.backend("INTERPRETER").compile(make())
    x, _ = arrays(3, 5)
    with pytest.raises(og.CallTypeError, match="symbol batch is 3 from argument 0 axis 0 but 2"):
        exe(x, np.zeros((2, 1), np.float32))


def test_a_value_above_its_bound():
    exe = og.backend("INTERPRETER").compile(make())
    x, y = arrays(2, 9)
    with pytest.raises(og.CallTypeError, match=r"symbol seq is 9 .* outside its bounds 0\.\.8"):
        exe(x, y)


def test_static_dimension_and_rank_still_checked():
    exe = og.backend("INTERPRETER").compile(make())
    x, _ = arrays(2, 3)
    with pytest.raises(og.GraphError, match="parameter 1 has"):
        exe(x, np.zeros((2, 2), np.float32))
    with pytest.raises(og.GraphError, match="rank 2"):
        exe(x, np.zeros((2,), np.float32))


def test_a_binding_a_type_rule_rejects_is_a_call_error():
    x = og.parameter(og.f32, (og.dim("n"),), name="x")
    exe = og.backend("INTERPRETER").compile(og.Function([ops.slice(x, [2], [5])], [x]))
    assert exe(np.arange(6, dtype=np.float32))[0].tolist() == [2, 3, 4]
    with pytest.raises(og.CallTypeError, match="with n=4, .*Slice"):
        exe(np.arange(4, dtype=np.float32))


def test_cpu_runs_symbolic_functions_from_one_compile():
    if "CPU" not in og.backends():
        pytest.skip("the CPU backend is unavailable here (no C compiler)")
    exe = og.backend("CPU").compile(make())
    reference = og.backend("INTERPRETER").compile(make())
    for b, s in ((1, 3), (4, 8), (2, 0)):
        for got, want in zip(exe(*arrays(b, s)), reference(*arrays(b, s)), strict=True):
            np.testing.assert_array_equal(got, want)
    with pytest.raises(og.CallTypeError, match="symbol seq is 9"):
        exe(*arrays(1, 9))


def test_specialize_shapes_gives_a_static_function():
    fn = specialize_shapes(make(), {"batch": 2, "seq": 3})
    assert [str(t) for t in fn.flat_result_types] == ["f32[2,4]", "f32[2,3]"]


def test_a_symbol_only_inside_expressions_cannot_be_bound():
    x = og.parameter(og.f32, (2 * og.dim("n"),))
    with pytest.raises(og.GraphError, match="only inside expressions"):
        og.backend("INTERPRETER").compile(og.Function([ops.relu(x)], [x]))


def test_symbolic_function_survives_the_file_format():
    fn = make()
    back = og.deserialize(og.serialize(fn))  # format version 2 stores the symbols
    assert str(back) == str(fn)
    assert [p.shape for p in back.parameters] == [p.shape for p in fn.parameters]
