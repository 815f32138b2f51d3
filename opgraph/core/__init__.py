"""The typed graph IR."""
