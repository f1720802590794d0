"""Fully connected layer."""

from __future__ import annotations

from typing import Callable, Dict, Optional

import paddle
from paddle import _C_ops

from parl.layers.layer_func import LayerFunc, ParamSpec, activation

#: The widest fully connected layer: a 16384 x 16384 float32 weight is 1 GiB.
MAX_SIZE = 1 << 14


class FC(LayerFunc):
    """``act(x @ w + b)`` over the last axis of ``x``."""

    same_in_both_modes = True

    def __init__(
        self,
        size: int,
        act: Optional[str] = None,
        bias: bool = True,
        name: Optional[str] = None,
        weight_init: Optional[paddle.nn.initializer.Initializer] = None,
    ) -> None:
        if not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
            raise ValueError(f"fc size must be an integer in [1, {MAX_SIZE}], got {size!r}")
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

    def fast(self) -> Callable[[paddle.Tensor], paddle.Tensor]:
        """``act(x @ w + b)`` as one ``_C_ops.linear`` call (matmul and bias add in one call, the same
        values as :meth:`forward`: tests/test_fast_predict.py pins the kernels) without the per-call
        Python of :meth:`forward`.

        Raises:
            LayersNotBuilt: the layer has no parameters yet.
        """
        self._check_built()
        w, act = self.params["w"], self._act
        linear, matmul = _C_ops.linear, _C_ops.matmul
        if self.use_bias:
            b = self.params["b"]
            if act is None:
                return lambda x: linear(x, w, b)
            return lambda x: act(linear(x, w, b))
        if act is None:
            return lambda x: matmul(x, w, False, False)
        return lambda x: act(matmul(x, w, False, False))


#: ``layers.fc(size, act=None, bias=True, name=None, weight_init=None)``: a fully connected LayerFunc with
#: ``size`` outputs and activation ``act``.
fc = FC
