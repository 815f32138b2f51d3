"""Oracle entries for pooling ops."""
