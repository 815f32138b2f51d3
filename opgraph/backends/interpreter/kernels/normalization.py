"""Reference kernels for normalization ops."""
