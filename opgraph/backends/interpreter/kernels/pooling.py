"""Reference kernels for pooling ops."""
