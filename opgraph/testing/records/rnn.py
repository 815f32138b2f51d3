"""Records for the recurrent cells (batch 2, input 3, hidden 4)."""

from __future__ import annotations

from opgraph import ops
from opgraph.testing.records.base import FLOATS, In, OpRecord

BATCH, INPUT, H = 2, 3, 4


def _in(*shape: int) -> In:
    return In(shape, low=-1.0, high=1.0)


LSTM_INPUTS = (_in(BATCH, INPUT), _in(BATCH, H), _in(BATCH, H), _in(4 * H, INPUT), _in(4 * H, H))
GRU_INPUTS = (_in(BATCH, INPUT), _in(BATCH, H), _in(3 * H, INPUT), _in(3 * H, H))
RNN_INPUTS = (_in(BATCH, INPUT), _in(BATCH, H), _in(H, INPUT), _in(H, H))

RECORDS: list[OpRecord] = [
    OpRecord("lstm_cell", ops.lstm_cell, (*LSTM_INPUTS, _in(8 * H), _in(3 * H)), FLOATS),
    OpRecord("lstm_cell_no_bias", ops.lstm_cell, LSTM_INPUTS, FLOATS),
    OpRecord(
        "lstm_cell_peepholes_only",
        lambda x, h, c, w, r, p: ops.lstm_cell(x, h, c, w, r, p=p),
        (*LSTM_INPUTS, _in(3 * H)),
        FLOATS,
    ),
    OpRecord(
        "lstm_cell_activations_clip",
        lambda *v: ops.lstm_cell(
            *v,
            activations=("hard_sigmoid", "softsign", "scaled_tanh"),
            activation_alpha=(0.3, 0.0, 1.5),
            activation_beta=(0.4, 0.0, 0.7),
            clip=0.9,
        ),
        (*LSTM_INPUTS, _in(8 * H)),
        FLOATS,
    ),
    OpRecord("gru_cell", ops.gru_cell, (*GRU_INPUTS, _in(6 * H)), FLOATS),
    OpRecord(
        "gru_cell_linear_before_reset",
        lambda *v: ops.gru_cell(*v, linear_before_reset=True),
        (*GRU_INPUTS, _in(6 * H)),
        FLOATS,
    ),
    OpRecord(
        "gru_cell_no_bias_activations",
        lambda *v: ops.gru_cell(*v, activations=("sigmoid", "elu"), activation_alpha=(0, 0.5)),
        GRU_INPUTS,
        FLOATS,
    ),
    OpRecord("rnn_cell", ops.rnn_cell, (*RNN_INPUTS, _in(2 * H)), FLOATS),
    OpRecord(
        "rnn_cell_affine_clip",
        lambda *v: ops.rnn_cell(*v, activations="affine", activation_alpha=(0.5,), clip=0.8),
        RNN_INPUTS,
        FLOATS,
    ),
    *(
        OpRecord(
            f"rnn_cell_{name}",
            lambda *v, n=name: ops.rnn_cell(*v, activations=n),
            (*RNN_INPUTS, _in(2 * H)),
            FLOATS,
        )
        for name in ("sigmoid", "relu", "leaky_relu", "thresholded_relu", "softplus")
    ),
]
