"""Oracle entries for indexing ops."""
