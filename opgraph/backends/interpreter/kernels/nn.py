"""Reference kernels for nn ops."""
