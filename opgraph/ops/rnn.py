"""Recurrent cells (one time step) defined by decomposition: LSTM, GRU and simple RNN cells.

Weights use ONNX's layouts for one direction: ``w`` is ``[gates · hidden, input]``, ``r`` is
``[gates · hidden, hidden]`` and the optional bias ``b`` is ``[2 · gates · hidden]`` (``Wb`` then
``Rb``, summed; PyTorch's ``bias_ih`` and ``bias_hh`` concatenated). Gate order: LSTM ``i, o, f,
c``; GRU ``z, r, h``. Inputs are ``x: [batch, input]`` and states ``[batch, hidden]``, all of one
floating-point type.

``activations`` names the cell's functions in ONNX order (LSTM ``f, g, h``; GRU ``f, g``; RNN
``f``), with optional per-function ``activation_alpha``/``activation_beta`` (default: ONNX's
default for that function); ``clip`` bounds every activation's input to ``[-clip, clip]``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import opgraph.ops.activation as act
from opgraph.core import element_type as et
from opgraph.core.dim import Dim
from opgraph.core.errors import OpTypeError
from opgraph.core.node import Output
from opgraph.core.op import Op, opclass, require, set_attr
from opgraph.core.tensor_type import TensorType
from opgraph.ops.broadcasting import scalar_like
from opgraph.ops.common import (
    as_bool,
    as_enum,
    as_float,
    require_element_type,
    require_same_element_type,
)
from opgraph.ops.elementwise import add, greater, multiply, relu, select, sigmoid, subtract, tanh
from opgraph.ops.linalg import dot
from opgraph.ops.movement import broadcast, slice, transpose, zeros  # noqa: A004

__all__ = [
    "RnnActivation",
    "RecurrentCell",
    "LSTMCell",
    "lstm_cell",
    "GRUCell",
    "gru_cell",
    "RNNCell",
    "rnn_cell",
]


class RnnActivation(enum.Enum):
    """The functions a recurrent cell may use (ONNX's list, in snake_case)."""

    SIGMOID = "sigmoid"
    TANH = "tanh"
    RELU = "relu"
    HARD_SIGMOID = "hard_sigmoid"  # max(0, min(1, alpha·x + beta)); alpha 0.2, beta 0.5
    LEAKY_RELU = "leaky_relu"  # alpha 0.01
    THRESHOLDED_RELU = "thresholded_relu"  # x if x > alpha else 0; alpha 1
    SCALED_TANH = "scaled_tanh"  # alpha·tanh(beta·x); alpha 1, beta 1
    AFFINE = "affine"  # alpha·x + beta; alpha 1, beta 0
    ELU = "elu"  # alpha 1
    SOFTSIGN = "softsign"
    SOFTPLUS = "softplus"


#: (alpha, beta) defaults; functions without parameters store 0.0.
_DEFAULTS: dict[RnnActivation, tuple[float, float]] = {
    RnnActivation.HARD_SIGMOID: (0.2, 0.5),
    RnnActivation.LEAKY_RELU: (0.01, 0.0),
    RnnActivation.THRESHOLDED_RELU: (1.0, 0.0),
    RnnActivation.SCALED_TANH: (1.0, 1.0),
    RnnActivation.AFFINE: (1.0, 0.0),
    RnnActivation.ELU: (1.0, 0.0),
}
_USES_BETA = {RnnActivation.HARD_SIGMOID, RnnActivation.SCALED_TANH, RnnActivation.AFFINE}

_FUNCTIONS: dict[RnnActivation, Callable[[Output, float, float], Output]] = {
    RnnActivation.SIGMOID: lambda x, a, b: sigmoid(x),
    RnnActivation.TANH: lambda x, a, b: tanh(x),
    RnnActivation.RELU: lambda x, a, b: relu(x),
    RnnActivation.HARD_SIGMOID: lambda x, a, b: act.hard_sigmoid(x, a, b),
    RnnActivation.LEAKY_RELU: lambda x, a, b: act.leaky_relu(x, a),
    RnnActivation.THRESHOLDED_RELU: lambda x, a, b: select(
        greater(x, scalar_like(a, x)), x, scalar_like(0, x)
    ),
    RnnActivation.SCALED_TANH: lambda x, a, b: multiply(
        scalar_like(a, x), tanh(multiply(scalar_like(b, x), x))
    ),
    RnnActivation.AFFINE: lambda x, a, b: add(multiply(scalar_like(a, x), x), scalar_like(b, x)),
    RnnActivation.ELU: lambda x, a, b: act.elu(x, a),
    RnnActivation.SOFTSIGN: lambda x, a, b: act.softsign(x),
    RnnActivation.SOFTPLUS: lambda x, a, b: act.softplus(x),
}


def _parameters(
    functions: tuple[RnnActivation, ...], given: Any, what: str, index: int
) -> tuple[float, ...]:
    """Per-function alpha (index 0) or beta (1): given values, or the defaults; 0.0 where the
    function takes no such parameter (so equal cells compare equal)."""
    if given is None:
        return tuple(_DEFAULTS.get(f, (0.0, 0.0))[index] for f in functions)
    values = tuple(as_float(v, f"{what}[{i}]") for i, v in enumerate(given))
    if len(values) != len(functions):
        raise OpTypeError(
            f"{what} has {len(values)} values for {len(functions)} activations; give one per "
            "activation"
        )
    used = [f in _DEFAULTS and (index == 0 or f in _USES_BETA) for f in functions]
    return tuple(v if u else 0.0 for v, u in zip(values, used, strict=True))


class RecurrentCell(Op):
    """Family base: activations, their parameters and ``clip``; shape checks."""

    contracting = True  # each output element reads many input elements

    __slots__ = ()
    gates: ClassVar[int]
    defaults: ClassVar[tuple[RnnActivation, ...]]
    activations: tuple[RnnActivation, ...] | None
    activation_alpha: tuple[float, ...] | None
    activation_beta: tuple[float, ...] | None
    clip: float | None

    def __post_init__(self) -> None:
        given = self.activations if self.activations is not None else self.defaults
        if isinstance(given, str | RnnActivation):
            given = (given,)
        functions = tuple(as_enum(RnnActivation, f, "activation") for f in given)
        if len(functions) != len(self.defaults):
            raise OpTypeError(
                f"activations {tuple(f.value for f in functions)} has {len(functions)} "
                f"functions, expected {len(self.defaults)}"
            )
        set_attr(self, "activations", functions)
        set_attr(
            self,
            "activation_alpha",
            _parameters(functions, self.activation_alpha, "activation_alpha", 0),
        )
        set_attr(
            self,
            "activation_beta",
            _parameters(functions, self.activation_beta, "activation_beta", 1),
        )
        if self.clip is not None:
            clip = as_float(self.clip, "clip")
            if not clip > 0:
                raise OpTypeError(f"clip must be > 0, got {clip!r}")
            set_attr(self, "clip", clip)

    def apply(self, index: int, x: Output) -> Output:
        """Activation ``index`` of ``x`` (after clipping)."""
        assert self.activations and self.activation_alpha and self.activation_beta
        if self.clip is not None:
            x = act.clamp(x, -self.clip, self.clip)
        function = self.activations[index]
        alpha, beta = self.activation_alpha[index], self.activation_beta[index]
        return _FUNCTIONS[function](x, alpha, beta)

    def check(self, inputs: Sequence[TensorType], states: int) -> None:
        """Types of ``(x, states..., w, r[, b[, p]])``: one float type, shapes as documented."""
        require_same_element_type(inputs)
        x = inputs[0]
        require_element_type(x, et.FLOATS, "x")
        require(x.rank == 2, f"x must be [batch, input_size], got {x}")
        batch, size = x.shape
        h = inputs[1]
        require(
            h.rank == 2 and h.shape[0] == batch, f"h must be [batch={batch}, hidden_size], got {h}"
        )
        hidden = h.shape[1]
        for i in range(2, 1 + states):
            require(inputs[i].shape == h.shape, f"c must be like h {h}, got {inputs[i]}")
        g = self.gates
        expected = {
            "w": ((g * hidden, size), f"[{g} * hidden_size, input_size]"),
            "r": ((g * hidden, hidden), f"[{g} * hidden_size, hidden_size]"),
            "b": ((2 * g * hidden,), f"[{2 * g} * hidden_size]"),
            "p": ((3 * hidden,), "[3 * hidden_size]"),
        }
        for name, t in zip(("w", "r", "b", "p"), inputs[1 + states :], strict=False):
            shape, formula = expected[name]
            require(
                t.shape == shape,
                f"{name} shape {list(t.shape)} does not match {formula} = {list(shape)}",
            )


def _projection(x: Output, w: Output, rows: tuple[Dim, Dim] | None = None) -> Output:
    """``x · wᵀ`` (only ``w``'s rows ``[start, stop)`` when given)."""
    if rows is not None:
        w = slice(w, (rows[0], 0), (rows[1], w.shape[1]))
    return dot(x, transpose(w))


def _bias(b: Output | None, start: Dim, stop: Dim, like: Output) -> Output:
    """``b[start:stop]`` broadcast over the batch, added to ``like``."""
    if b is None:
        return like
    return add(like, broadcast(slice(b, (start,), (stop,)), like.shape, (0,)))


def _columns(z: Output, k: int, hidden: Dim) -> Output:
    """Gate ``k``: columns ``[k · hidden, (k + 1) · hidden)``."""
    return slice(z, (0, k * hidden), (z.shape[0], (k + 1) * hidden))


def _count(inputs: Sequence[TensorType], least: int, most: int, names: str) -> None:
    require(
        least <= len(inputs) <= most,
        f"expected {least} to {most} inputs ({names}), got {len(inputs)}",
    )


# ------------------------------------------------------------------------------ lstm_cell
@opclass
class LSTMCell(RecurrentCell):
    """One LSTM step (ONNX ``LSTM`` gate layout ``i, o, f, c``): inputs
    ``(x, h, c, w, r[, b[, p]])``, outputs ``(h', c')``.

    With ``p = [Pi, Po, Pf]`` the peephole weights (``[3 · hidden]``)::

        z = x·wᵀ + h·rᵀ + Wb + Rb          (split into zi, zo, zf, zc)
        i = f(zi + Pi⊙c)    f_ = f(zf + Pf⊙c)    c' = f_⊙c + i⊙g(zc)
        o = f(zo + Po⊙c')   h' = o⊙h(c')

    Attributes:
        activations: ``(f, g, h)``; default ``("sigmoid", "tanh", "tanh")``.
        activation_alpha, activation_beta: one per activation (defaults ONNX's).
        clip: bound on every activation's input, or None.
    """

    activations: tuple[RnnActivation, ...] | None = None
    activation_alpha: tuple[float, ...] | None = None
    activation_beta: tuple[float, ...] | None = None
    clip: float | None = None
    multi_output = True
    gates = 4
    defaults = (RnnActivation.SIGMOID, RnnActivation.TANH, RnnActivation.TANH)

    def canonicalize(self, *inputs: TensorType) -> LSTMCell:
        _count(inputs, 5, 7, "x, h, c, w, r[, b[, p]]")
        self.check(inputs, states=2)
        return self

    def decompose(self, *inputs: Output) -> tuple[Output, Output]:
        x, h, c, w, r = inputs[:5]
        b = inputs[5] if len(inputs) > 5 else None
        p = inputs[6] if len(inputs) > 6 else None
        hidden = h.shape[1]
        z = add(_projection(x, w), _projection(h, r))
        z = _bias(b, 0, 4 * hidden, _bias(b, 4 * hidden, 8 * hidden, z))
        zi, zo, zf, zc = (_columns(z, k, hidden) for k in range(4))

        def peephole(value: Output, k: int, state: Output) -> Output:
            if p is None:
                return value
            weights = broadcast(slice(p, (k * hidden,), ((k + 1) * hidden,)), value.shape, (0,))
            return add(value, multiply(weights, state))

        i = self.apply(0, peephole(zi, 0, c))
        forget = self.apply(0, peephole(zf, 2, c))
        c_next = add(multiply(forget, c), multiply(i, self.apply(1, zc)))
        o = self.apply(0, peephole(zo, 1, c_next))
        return multiply(o, self.apply(2, c_next)), c_next


def lstm_cell(
    x: Output,
    h: Output,
    c: Output,
    w: Output,
    r: Output,
    b: Output | None = None,
    p: Output | None = None,
    *,
    activations: Any = None,
    activation_alpha: Any = None,
    activation_beta: Any = None,
    clip: float | None = None,
) -> tuple[Output, Output]:
    """One LSTM time step with ONNX weight layouts.

    Args:
        x: ``[batch, input_size]``.
        h, c: the hidden and cell states, ``[batch, hidden_size]``.
        w: ``[4 · hidden_size, input_size]``, gates ``i, o, f, c``.
        r: ``[4 · hidden_size, hidden_size]``.
        b: optional ``[8 · hidden_size]``: ``Wb`` then ``Rb``.
        p: optional peepholes ``[3 · hidden_size]``: ``Pi, Po, Pf`` (needs no ``b``).
        activations: ``(f, g, h)`` names; default ``("sigmoid", "tanh", "tanh")``.
        activation_alpha, activation_beta: one value per activation, or None for defaults.
        clip: bound on every activation's input, or None.

    Returns:
        ``(h', c')``, both ``[batch, hidden_size]``.
    """
    if p is not None and b is None:
        b = zeros(w.element_type, (2 * w.shape[0],))
    inputs = [v for v in (x, h, c, w, r, b, p) if v is not None]
    op = LSTMCell(activations, activation_alpha, activation_beta, clip)
    result: tuple[Output, Output] = op(*inputs)
    return result


# ------------------------------------------------------------------------------- gru_cell
@opclass
class GRUCell(RecurrentCell):
    """One GRU step (ONNX ``GRU`` gate layout ``z, r, h``): inputs ``(x, h, w, r[, b])``,
    output ``h'``.

    The equations::

        z = f(x·Wzᵀ + h·Rzᵀ + Wbz + Rbz)     r_ = f(x·Wrᵀ + h·Rrᵀ + Wbr + Rbr)
        ĥ = g(x·Whᵀ + (r_⊙h)·Rhᵀ + Rbh + Wbh)          linear_before_reset False
        ĥ = g(x·Whᵀ + r_⊙(h·Rhᵀ + Rbh) + Wbh)          linear_before_reset True
        h' = (1 - z)⊙ĥ + z⊙h

    Attributes:
        activations: ``(f, g)``; default ``("sigmoid", "tanh")``.
        activation_alpha, activation_beta: one per activation (defaults ONNX's).
        clip: bound on every activation's input, or None.
        linear_before_reset: apply the reset gate after ``h·Rhᵀ + Rbh`` (PyTorch's GRU).
    """

    activations: tuple[RnnActivation, ...] | None = None
    activation_alpha: tuple[float, ...] | None = None
    activation_beta: tuple[float, ...] | None = None
    clip: float | None = None
    linear_before_reset: bool = False
    gates = 3
    defaults = (RnnActivation.SIGMOID, RnnActivation.TANH)

    def __post_init__(self) -> None:
        RecurrentCell.__post_init__(self)
        set_attr(
            self, "linear_before_reset", as_bool(self.linear_before_reset, "linear_before_reset")
        )

    def canonicalize(self, *inputs: TensorType) -> GRUCell:
        _count(inputs, 4, 5, "x, h, w, r[, b]")
        self.check(inputs, states=1)
        return self

    def decompose(self, *inputs: Output) -> Output:
        x, h, w, r = inputs[:4]
        b = inputs[4] if len(inputs) > 4 else None
        n = h.shape[1]
        gx = _bias(b, 0, 3 * n, _projection(x, w))
        gh = _bias(b, 3 * n, 5 * n, _projection(h, r, (0, 2 * n)))
        z = self.apply(0, add(_columns(gx, 0, n), _columns(gh, 0, n)))
        reset = self.apply(0, add(_columns(gx, 1, n), _columns(gh, 1, n)))
        if self.linear_before_reset:
            recurrent = multiply(reset, _bias(b, 5 * n, 6 * n, _projection(h, r, (2 * n, 3 * n))))
        else:
            recurrent = _bias(b, 5 * n, 6 * n, _projection(multiply(reset, h), r, (2 * n, 3 * n)))
        candidate = self.apply(1, add(_columns(gx, 2, n), recurrent))
        keep = subtract(scalar_like(1, z), z)
        return add(multiply(keep, candidate), multiply(z, h))


def gru_cell(
    x: Output,
    h: Output,
    w: Output,
    r: Output,
    b: Output | None = None,
    *,
    activations: Any = None,
    activation_alpha: Any = None,
    activation_beta: Any = None,
    clip: float | None = None,
    linear_before_reset: bool = False,
) -> Output:
    """One GRU time step with ONNX weight layouts.

    Args:
        x: ``[batch, input_size]``.
        h: the hidden state, ``[batch, hidden_size]``.
        w: ``[3 · hidden_size, input_size]``, gates ``z, r, h``.
        r: ``[3 · hidden_size, hidden_size]``.
        b: optional ``[6 · hidden_size]``: ``Wb`` then ``Rb``.
        activations: ``(f, g)`` names; default ``("sigmoid", "tanh")``.
        activation_alpha, activation_beta: one value per activation, or None for defaults.
        clip: bound on every activation's input, or None.
        linear_before_reset: see :class:`GRUCell`.

    Returns:
        ``h'``, ``[batch, hidden_size]``.
    """
    inputs = [v for v in (x, h, w, r, b) if v is not None]
    op = GRUCell(activations, activation_alpha, activation_beta, clip, linear_before_reset)
    return op(*inputs)  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------- rnn_cell
@opclass
class RNNCell(RecurrentCell):
    """One simple RNN step (ONNX ``RNN``); inputs ``(x, h, w, r[, b])``:
    ``h' = f(x·wᵀ + h·rᵀ + Wb + Rb)``.

    Attributes:
        activations: ``(f,)``; default ``("tanh",)``.
        activation_alpha, activation_beta: one per activation (defaults ONNX's).
        clip: bound on the activation's input, or None.
    """

    activations: tuple[RnnActivation, ...] | None = None
    activation_alpha: tuple[float, ...] | None = None
    activation_beta: tuple[float, ...] | None = None
    clip: float | None = None
    gates = 1
    defaults = (RnnActivation.TANH,)

    def canonicalize(self, *inputs: TensorType) -> RNNCell:
        _count(inputs, 4, 5, "x, h, w, r[, b]")
        self.check(inputs, states=1)
        return self

    def decompose(self, *inputs: Output) -> Output:
        x, h, w, r = inputs[:4]
        b = inputs[4] if len(inputs) > 4 else None
        n = h.shape[1]
        z = add(_projection(x, w), _projection(h, r))
        return self.apply(0, _bias(b, 0, n, _bias(b, n, 2 * n, z)))


def rnn_cell(
    x: Output,
    h: Output,
    w: Output,
    r: Output,
    b: Output | None = None,
    *,
    activations: Any = None,
    activation_alpha: Any = None,
    activation_beta: Any = None,
    clip: float | None = None,
) -> Output:
    """One simple RNN time step with ONNX weight layouts.

    Args:
        x: ``[batch, input_size]``.
        h: the hidden state, ``[batch, hidden_size]``.
        w: ``[hidden_size, input_size]``.
        r: ``[hidden_size, hidden_size]``.
        b: optional ``[2 · hidden_size]``: ``Wb`` then ``Rb``.
        activations: ``(f,)`` (or one name); default ``("tanh",)``.
        activation_alpha, activation_beta: one value per activation, or None for defaults.
        clip: bound on the activation's input, or None.

    Returns:
        ``h'``, ``[batch, hidden_size]``.
    """
    inputs = [v for v in (x, h, w, r, b) if v is not None]
    return RNNCell(activations, activation_alpha, activation_beta, clip)(*inputs)  # type: ignore[no-any-return]
