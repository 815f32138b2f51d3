"""The fused-program compiler shared by the CPU and GPU backends (see docs/design.md §3)."""
