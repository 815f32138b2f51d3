"""Oracle entries for quantization ops."""
