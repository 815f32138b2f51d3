"""convolution ops (being built)."""

__all__: list[str] = []
