"""Oracle entries for rnn ops."""
