"""LSTM and GRU cells, called one time step at a time: ``out, state = cell(x, state)``.

Gate conventions follow PyTorch. Weights are fused across gates: ``w_x`` is
[in, G * hidden], ``w_h`` is [hidden, G * hidden] with G = 4 (LSTM gates
i, f, g, o) or 3 (GRU gates r, z, n).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np
import paddle
from paddle import _C_ops

from parl.layers.layer_func import LayerFunc, ParamSpec, check_count

State = Any  # (h, c) for LSTM, h for GRU


class _RecurrentCell(LayerFunc):
    """Shared machinery of the one-step cells; subclasses set :attr:`prefix` and :attr:`num_gates` and
    define ``zero_state``, ``_check_state``, ``_input_proj`` (x @ w_x + bias, any leading axes) and
    ``_cell`` (one step from the projected input)."""

    #: The prefix of the cell's layer names (``lstm_0``) and of its error messages.
    prefix = ""
    #: Gates fused in ``w_x`` and ``w_h``.
    num_gates = 1

    def __init__(self, hidden_size: int, name: Optional[str] = None) -> None:
        self.hidden_size = check_count(self.prefix, "hidden_size", hidden_size)
        super().__init__(self.prefix, name)

    def _check_state(self, state: Optional[State], batch: int) -> State:
        raise NotImplementedError(f"{type(self).__name__} must define _check_state")

    def _input_proj(self, x: paddle.Tensor) -> paddle.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define _input_proj")

    def _cell(self, xw: paddle.Tensor, state: State) -> Tuple[paddle.Tensor, State]:
        raise NotImplementedError(f"{type(self).__name__} must define _cell")

    def _weight_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        dtype = str(first_input.dtype).split(".")[-1]
        width = self.num_gates * self.hidden_size
        in_size = int(first_input.shape[-1])
        return {
            "w_x": ParamSpec([in_size, width], dtype, paddle.nn.initializer.XavierUniform()),
            "w_h": ParamSpec([self.hidden_size, width], dtype, paddle.nn.initializer.Orthogonal()),
        }

    def __call__(  # type: ignore[override]
        self, x: paddle.Tensor, state: Optional[State] = None
    ) -> Tuple[paddle.Tensor, State]:
        if not self.built:
            self._build_from_input(x)
        return self.forward(x, state)

    def forward(  # type: ignore[override]
        self, x: paddle.Tensor, state: Optional[State] = None
    ) -> Tuple[paddle.Tensor, State]:
        """One step: x [batch, in] and state -> (new h [batch, hidden], new state)."""
        return self._cell(self._input_proj(x), self._check_state(state, int(x.shape[0])))

    def unroll(self, xs: paddle.Tensor, state: Optional[State] = None) -> Tuple[paddle.Tensor, State]:
        """Run over xs [batch, time, in]: (outputs [batch, time, hidden], final state)."""
        if xs.ndim != 3:
            raise ValueError(f"{self.name}.unroll expects [batch, time, in], got shape {xs.shape}")
        if not self.built:
            self._build_from_input(xs)
        state = self._check_state(state, int(xs.shape[0]))
        projected = self._input_proj(xs)  # one matmul for every time step
        outputs = []
        for t in range(int(xs.shape[1])):
            out, state = self._cell(projected[:, t], state)
            outputs.append(out)
        return paddle.stack(outputs, axis=1), state

    def _check_h(self, h: Any, batch: int) -> paddle.Tensor:
        if not isinstance(h, paddle.Tensor) or list(h.shape) != [batch, self.hidden_size]:
            got = list(h.shape) if isinstance(h, paddle.Tensor) else type(h).__name__
            raise ValueError(f"{self.name}: state must be [{batch}, {self.hidden_size}], got {got}")
        return h


class LSTM(_RecurrentCell):
    """LSTM cell: ``c' = f*c + i*g``, ``h' = o*tanh(c')``; state is (h, c); forget bias starts at 1."""

    same_in_both_modes = True
    prefix = "lstm"
    num_gates = 4

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        specs = self._weight_specs(first_input)
        bias = np.zeros(4 * self.hidden_size, dtype=specs["w_x"].dtype)
        bias[self.hidden_size : 2 * self.hidden_size] = 1.0
        specs["b"] = ParamSpec(list(bias.shape), bias.dtype.name, paddle.nn.initializer.Assign(bias))
        return specs

    def zero_state(self, batch_size: int) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """All-zero (h, c) for ``batch_size`` sequences."""
        return (paddle.zeros([batch_size, self.hidden_size]), paddle.zeros([batch_size, self.hidden_size]))

    def _check_state(self, state: Optional[State], batch: int) -> State:
        if state is None:
            return self.zero_state(batch)
        if not isinstance(state, (tuple, list)) or len(state) != 2:
            raise ValueError(f"{self.name}: state must be a tuple (h, c), got {type(state).__name__}")
        return self._check_h(state[0], batch), self._check_h(state[1], batch)

    def _input_proj(self, x: paddle.Tensor) -> paddle.Tensor:
        return _C_ops.add(_C_ops.matmul(x, self.params["w_x"], False, False), self.params["b"])

    def _cell(self, xw: paddle.Tensor, state: State) -> Tuple[paddle.Tensor, State]:
        h, c = state
        gates = _C_ops.add(xw, _C_ops.matmul(h, self.params["w_h"], False, False))
        i, f, g, o = paddle.split(gates, 4, axis=-1)
        c = _C_ops.add(_C_ops.multiply(_C_ops.sigmoid(f), c), _C_ops.multiply(_C_ops.sigmoid(i), _C_ops.tanh(g)))
        h = _C_ops.multiply(_C_ops.sigmoid(o), _C_ops.tanh(c))
        return h, (h, c)


class GRU(_RecurrentCell):
    """GRU cell: ``n = tanh(x_n + r*(h@w_hn + b_hn))``, ``h' = (1-z)*n + z*h``; state is h."""

    same_in_both_modes = True
    prefix = "gru"
    num_gates = 3

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        specs = self._weight_specs(first_input)
        zeros = paddle.nn.initializer.Constant(0.0)
        for suffix in ("b_x", "b_h"):
            specs[suffix] = ParamSpec([3 * self.hidden_size], specs["w_x"].dtype, zeros)
        return specs

    def zero_state(self, batch_size: int) -> paddle.Tensor:
        """All-zero h for ``batch_size`` sequences."""
        return paddle.zeros([batch_size, self.hidden_size])

    def _check_state(self, state: Optional[State], batch: int) -> State:
        return self.zero_state(batch) if state is None else self._check_h(state, batch)

    def _input_proj(self, x: paddle.Tensor) -> paddle.Tensor:
        return _C_ops.add(_C_ops.matmul(x, self.params["w_x"], False, False), self.params["b_x"])

    def _cell(self, xw: paddle.Tensor, state: State) -> Tuple[paddle.Tensor, State]:
        hw = _C_ops.add(_C_ops.matmul(state, self.params["w_h"], False, False), self.params["b_h"])
        x_r, x_z, x_n = paddle.split(xw, 3, axis=-1)
        h_r, h_z, h_n = paddle.split(hw, 3, axis=-1)
        r = _C_ops.sigmoid(_C_ops.add(x_r, h_r))
        z = _C_ops.sigmoid(_C_ops.add(x_z, h_z))
        n = _C_ops.tanh(_C_ops.add(x_n, _C_ops.multiply(r, h_n)))
        h = _C_ops.add(n, _C_ops.multiply(z, _C_ops.subtract(state, n)))  # (1-z)*n + z*h
        return h, h


#: ``layers.lstm(hidden_size)``: a one-step LSTM cell LayerFunc, ``h, (h, c) = cell(x, (h, c))``.
lstm = LSTM
#: ``layers.gru(hidden_size)``: a one-step GRU cell LayerFunc, ``h, h = cell(x, h)``.
gru = GRU
