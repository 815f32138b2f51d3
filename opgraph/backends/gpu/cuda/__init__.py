"""The CUDA renderer: the CPU backend's fused programs as CUDA C++ kernels."""
