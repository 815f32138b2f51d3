"""Reference kernels for ordering ops."""
