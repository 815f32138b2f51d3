"""Reference kernels for shaping ops."""
