"""Oracle entries for normalization ops."""
