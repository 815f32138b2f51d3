"""Oracle entries for shaping ops."""
