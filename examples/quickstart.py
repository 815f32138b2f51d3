"""The seed example: build f(a, b, c) = (a + b) * c, compile it, run it."""

import numpy as np

import opgraph as og
from opgraph import ops

a, b, c = (og.parameter(og.f32, (32, 32), name=n) for n in "abc")
f = og.Function([ops.multiply(ops.add(a, b), c)], [a, b, c], name="f")
print(f)

backend = og.backend("INTERPRETER")
exe = backend.compile(f)

# The execution API: tensors created once, outputs first.
args = [backend.create_tensor(og.f32, (32, 32)) for _ in range(3)]
values = [np.random.rand(32, 32).astype(np.float32) for _ in range(3)]
for tensor, value in zip(args, values, strict=True):
    tensor.write(value)
out = backend.create_tensor(og.f32, (32, 32))
exe.call([out], args)
assert np.allclose(out.read(), (values[0] + values[1]) * values[2])

# The convenience form: numpy in, numpy out.
(result,) = exe(*values)
print("max |error|:", float(np.abs(result - (values[0] + values[1]) * values[2]).max()))

# Type errors happen when the graph is built, and name the line.
try:
    ops.add(a, og.parameter(og.f32, (32,)))
except og.OpTypeError as error:
    print("OpTypeError:", error)
