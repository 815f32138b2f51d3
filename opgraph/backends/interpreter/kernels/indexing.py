"""Reference kernels for indexing ops."""
