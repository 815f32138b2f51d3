"""Reference kernels for rnn ops."""
