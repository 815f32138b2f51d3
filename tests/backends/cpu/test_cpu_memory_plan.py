"""The memory plan: arena reuse, in-place kernels, and results computed where they belong."""

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.program import BufferKind


def chain(n=6, shape=(64, 32)):
    """Each value needs a buffer of its own (a reduction reads it), so the plan must reuse."""
    x = og.parameter(og.f32, shape)
    value, sums = x, []
    for i in range(n):
        value = ops.softmax(ops.add(value, value), -1 if i % 2 else 0)
        sums.append(ops.reduce_sum(value, (0, 1)))
    total = sums[0]
    for s in sums[1:]:
        total = ops.add(total, s)
    return og.Function([value, total], [x])


def test_arena_is_reused(cpu):
    exe = cpu.compile(chain())
    plan = exe.memory_plan()
    arena = [b for b in exe.program.buffers if b.kind is BufferKind.ARENA]
    assert len(arena) >= 4
    assert 0 < plan.peak < sum(plan.sizes.values())
    x = np.random.default_rng(1).random((64, 32), np.float32)
    want = og.backend("INTERPRETER").compile(chain())(x)
    for got, expected in zip(exe(x), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)


def test_live_buffers_never_overlap(cpu):
    exe = cpu.compile(chain())
    plan = exe.memory_plan()
    spans = step_spans(exe.program)
    assert plan.intervals == {b: spans[b] for b in plan.offsets}
    inplace = {frozenset(pair) for pair in plan.inplace}
    for a, (offset_a, size_a) in enumerate_blocks(plan):
        for b, (offset_b, size_b) in enumerate_blocks(plan):
            if a >= b or frozenset((a, b)) in inplace:
                continue
            first_a, last_a = spans[a]
            first_b, last_b = spans[b]
            if first_a <= last_b and first_b <= last_a:
                assert offset_a + size_a <= offset_b or offset_b + size_b <= offset_a


def step_spans(program):
    """(first, last) step touching each buffer, from the steps themselves."""
    spans = {}
    for i, step in enumerate(program.steps):
        for view in [*step.reads(), *step.writes()]:
            first, _ = spans.get(view.buffer, (i, i))
            spans[view.buffer] = (first, i)
    return spans


def enumerate_blocks(plan):
    return [(b, (plan.offsets[b], plan.sizes[b])) for b in sorted(plan.offsets)]


def test_elementwise_kernels_run_in_place(cpu):
    """A kernel whose input dies there writes its output over it: ``h`` is read by a
    reduction, then last by ``tanh``, whose result takes ``h``'s block."""
    x = og.parameter(og.f32, (256,))
    w = og.parameter(og.f32, (256, 256))
    h = ops.dot(x, w)  # an arena temporary with two readers: not an epilogue
    total = ops.reduce_sum(h, (0,))
    y = ops.dot(ops.tanh(h), w)
    exe = cpu.compile(og.Function([total, y], [x, w]))
    plan = exe.memory_plan()
    assert plan.inplace, "tanh(h) should take h's block"
    rng = np.random.default_rng(2)
    args = [rng.random(256, np.float32) * 0.1, rng.random((256, 256), np.float32) * 0.1]
    want = og.backend("INTERPRETER").compile(exe.function)(*args)
    for got, expected in zip(exe(*args), want, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-4)


def test_products_write_into_their_epilogues_results(cpu):
    """dot + bias + relu: the product goes straight into the result buffer and the bias and
    activation run on it in place, block by block (no arena, one step)."""
    x = og.parameter(og.f32, (64, 128))
    w = og.parameter(og.f32, (128, 96))
    b = og.parameter(og.f32, (96,))
    y = ops.relu(ops.add(ops.dot(x, w), ops.broadcast(b, (64, 96), (0,))))
    exe = cpu.compile(og.Function([y], [x, w, b]))
    (step,) = exe.program.steps
    assert step.epilogue is not None
    assert exe.memory_plan().peak == 0
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((64, 128), np.float32), rng.standard_normal((128, 96), np.float32),
            rng.standard_normal(96).astype(np.float32)]  # fmt: skip
    np.testing.assert_allclose(
        exe(*args)[0], np.maximum(args[0] @ args[1] + args[2], 0), rtol=1e-4, atol=1e-4
    )
