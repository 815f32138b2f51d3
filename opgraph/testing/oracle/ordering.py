"""Oracle entries for ordering ops."""
