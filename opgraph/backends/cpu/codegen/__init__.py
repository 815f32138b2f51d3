"""C code generation for the CPU backend: the dialect (types, literals, helpers), loop
kernels, BLAS calls and the module's single entry function."""
