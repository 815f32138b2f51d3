"""Reference kernels for resize ops."""
