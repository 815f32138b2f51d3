"""pooling ops (being built)."""

__all__: list[str] = []
