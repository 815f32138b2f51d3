"""No kernels: the rnn ops are lowered by the ``decompose`` pass before the
interpreter runs (their decomposition is their specification; register a native kernel here
to keep one)."""
