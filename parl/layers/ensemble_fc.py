"""Ensemble of fully connected layers evaluated in one batched matrix multiply.

    twin = EnsembleFC(256, members=2, act="relu")
    h = twin(x)               # x [B, in] (shared by the members) or [M, B, in] -> [M, B, 256]
    q = head.frozen(h)        # the same output, but no gradient reaches the layer's own parameters

Twin critics (TD3, SAC) are two networks of the same shape over the same
input; stacking their weights as ``[M, in, out]`` computes both with one
kernel per layer instead of one per network, which halves the number of
operations (and so the Python and dispatch overhead that dominates small
networks) in the forward pass, the backward pass, the optimizer step and the
target update.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import paddle
from paddle import _C_ops

from parl.layers.layer_func import LayerFunc, ParamSpec, activation, check_count


class EnsembleFC(LayerFunc):
    """``act(x @ w[m] + b[m])`` for each member ``m``; outputs ``[members, B, size]``.

    Each member's weights start as an independent Glorot-uniform draw (as
    :class:`~parl.layers.fc.FC`'s do), its biases at zero.

    Args:
        size: outputs per member.
        members: independent copies of the layer.
        act: activation name (see :func:`~parl.layers.layer_func.activation`), or None.
    """

    same_in_both_modes = True

    def __init__(self, size: int, members: int, act: Optional[str] = None, name: Optional[str] = None) -> None:
        self.size = check_count("ensemble_fc", "size", size)
        self.members = check_count("ensemble_fc", "members", members)
        super().__init__("ensemble_fc", name)
        self.act_name = act
        self._act = activation(act)

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        in_size = int(first_input.shape[-1])
        dtype = str(first_input.dtype).split(".")[-1]
        # paddle's XavierUniform reads a 3-D shape as a convolution kernel; take each member's fans.
        limit = math.sqrt(6.0 / (in_size + self.size))
        return {
            "w": ParamSpec([self.members, in_size, self.size], dtype, paddle.nn.initializer.Uniform(-limit, limit)),
            "b": ParamSpec([self.members, 1, self.size], dtype, paddle.nn.initializer.Constant(0.0)),
        }

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self._apply(x, self.params["w"], self.params["b"])

    def frozen(self, x: paddle.Tensor) -> paddle.Tensor:
        """The layer's output with its parameters detached: gradients reach ``x`` but not ``w`` or ``b``."""
        if not self.built:
            self._build_from_input(x)
        return self._apply(x, self.params["w"].detach(), self.params["b"].detach())

    def _apply(self, x: paddle.Tensor, w: paddle.Tensor, b: paddle.Tensor) -> paddle.Tensor:
        if x.ndim == 2:
            x = x.expand([self.members] + list(x.shape))
        elif x.ndim != 3 or int(x.shape[0]) != self.members:
            raise ValueError(f"{self.name}: input must be [B, in] or [{self.members}, B, in], got {list(x.shape)}")
        # b + x @ w in one kernel: a separate add broadcasting b over the middle axis is ~10x slower on CPU.
        out = _C_ops.baddbmm(b, x, w, 1.0, 1.0)
        return self._act(out) if self._act is not None else out


#: ``layers.ensemble_fc(size, members, act=None, name=None)``: ``members`` fully connected layers of
#: ``size`` outputs each, as one :class:`EnsembleFC`.
ensemble_fc = EnsembleFC
