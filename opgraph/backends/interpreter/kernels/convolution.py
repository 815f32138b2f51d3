"""Reference kernels for convolution ops."""
