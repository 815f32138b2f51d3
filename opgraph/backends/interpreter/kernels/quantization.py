"""Reference kernels for quantization ops."""
