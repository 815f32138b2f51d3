"""The fused compiler's attention step (an internal lowering shared with the CPU backend)
runs on the GPU backend's host side with INTERPRETER's values."""

import numpy as np

import opgraph as og
from opgraph import ops
from opgraph.backends.fused.lowering.attention import AttentionStep


def test_attention_step_runs_on_the_host(fake):
    backend, _ = fake
    q, k, v = (og.parameter(og.f32, s) for s in [(2, 3, 7, 4), (2, 3, 4, 9), (2, 3, 9, 5)])
    m = og.parameter(og.f32, (2, 1, 1, 9))
    scores = ops.add(ops.matmul(q, k) / 2.0, ops.broadcast_to(m, (2, 3, 7, 9)))
    fn = og.Function([ops.matmul(ops.softmax(scores, -1), v)], [q, k, v, m])
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(p.shape).astype(np.float32) for p in fn.parameters]
    exe = backend.compile(fn)
    assert any(isinstance(s, AttentionStep) for s in exe.compiled.program.steps)
    (got,) = exe(*arrays)
    (want,) = og.backend("INTERPRETER").compile(fn)(*arrays)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
