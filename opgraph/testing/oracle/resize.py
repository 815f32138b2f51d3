"""Oracle entries for resize ops."""
