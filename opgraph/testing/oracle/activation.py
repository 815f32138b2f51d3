"""Oracle entries for activation ops."""
