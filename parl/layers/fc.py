"""Fully connected layer."""

from __future__ import annotations

from typing import Dict, Optional

import paddle
from paddle import _C_ops

from parl.layers.layer_func import LayerFunc, ParamSpec, activation


class FC(LayerFunc):
    """``act(x @ w + b)`` over the last axis of ``x``."""

    def __init__(
        self,
        size: int,
        act: Optional[str] = None,
        bias: bool = True,
        name: Optional[str] = None,
        weight_init: Optional[paddle.nn.initializer.Initializer] = None,
    ) -> None:
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"fc size must be a positive integer, got {size!r}")
        super().__init__("fc", name)
        self.size = size
        self.act_name = act
        self._act = activation(act)
        self.use_bias = bias
        self.weight_init = weight_init

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        in_size = int(first_input.shape[-1])
        init = self.weight_init or paddle.nn.initializer.XavierUniform()
        specs = {"w": ParamSpec([in_size, self.size], str(first_input.dtype).split(".")[-1], init)}
        if self.use_bias:
            specs["b"] = ParamSpec([self.size], specs["w"].dtype, paddle.nn.initializer.Constant(0.0))
        return specs

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        out = _C_ops.matmul(x, self.params["w"], False, False)
        if self.use_bias:
            out = _C_ops.add(out, self.params["b"])
        return self._act(out) if self._act is not None else out


def fc(
    size: int,
    act: Optional[str] = None,
    bias: bool = True,
    name: Optional[str] = None,
    weight_init: Optional[paddle.nn.initializer.Initializer] = None,
) -> FC:
    """A fully connected LayerFunc with ``size`` outputs and activation ``act``."""
    return FC(size, act=act, bias=bias, name=name, weight_init=weight_init)
