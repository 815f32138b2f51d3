"""Oracle entries for nn ops."""
