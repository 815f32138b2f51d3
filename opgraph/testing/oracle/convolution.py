"""Oracle entries for convolution ops."""
