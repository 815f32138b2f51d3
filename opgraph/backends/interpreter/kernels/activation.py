"""Reference kernels for activation ops."""
