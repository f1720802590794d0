"""Layer normalization and batch normalization."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import paddle
import paddle.nn.functional as F
from paddle import _C_ops

from parl.layers.layer_func import LayerFunc, ParamSpec, is_training

_ONES = paddle.nn.initializer.Constant(1.0)
_ZEROS = paddle.nn.initializer.Constant(0.0)


def _check_epsilon(epsilon: float) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not epsilon > 0:
        raise ValueError(f"epsilon must be a positive number, got {epsilon!r}")
    return float(epsilon)


class LayerNorm(LayerFunc):
    """Normalizes the last axis to zero mean and unit variance, then ``* w + b``."""

    same_in_both_modes = True

    def __init__(self, epsilon: float = 1e-5, name: Optional[str] = None) -> None:
        self.epsilon = _check_epsilon(epsilon)
        super().__init__("layer_norm", name)

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        size, dtype = [int(first_input.shape[-1])], str(first_input.dtype).split(".")[-1]
        return {"w": ParamSpec(size, dtype, _ONES), "b": ParamSpec(size, dtype, _ZEROS)}

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.params["w"], self.params["b"], self.epsilon)


class BatchNorm(LayerFunc):
    """Normalizes over every axis but 1 ([N, C] or [N, C, H, W]), then ``* w + b``.

    In training mode it uses the batch statistics and moves the running ones
    ``running = momentum * running + (1 - momentum) * batch`` (biased
    variance); in eval mode (``training_mode(False)``) it uses the running
    statistics and changes nothing.
    """

    def __init__(self, momentum: float = 0.9, epsilon: float = 1e-5, name: Optional[str] = None) -> None:
        if isinstance(momentum, bool) or not isinstance(momentum, (int, float)) or not 0 <= momentum < 1:
            raise ValueError(f"batch_norm momentum must be in [0, 1), got {momentum!r}")
        self.momentum = float(momentum)
        self.epsilon = _check_epsilon(epsilon)
        super().__init__("batch_norm", name)

    def non_trainable_suffixes(self) -> Sequence[str]:
        return ("mean", "var")

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        if first_input.ndim < 2:
            raise ValueError(f"batch_norm {self.name} expects [N, C, ...] input, got shape {first_input.shape}")
        size, dtype = [int(first_input.shape[1])], str(first_input.dtype).split(".")[-1]
        return {
            "w": ParamSpec(size, dtype, _ONES),
            "b": ParamSpec(size, dtype, _ZEROS),
            "mean": ParamSpec(size, dtype, _ZEROS),
            "var": ParamSpec(size, dtype, _ONES),
        }

    def _install(self, created: Dict[str, paddle.Tensor]) -> None:
        for suffix in self.non_trainable_suffixes():
            if suffix in created:
                created[suffix].stop_gradient = True
        super()._install(created)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        shape: List[int] = [1, -1] + [1] * (x.ndim - 2)
        p = self.params
        if is_training():
            axes = [0] + list(range(2, x.ndim))
            mean = paddle.mean(x, axis=axes)
            centered = _C_ops.subtract(x, mean.reshape(shape))
            var = paddle.mean(_C_ops.multiply(centered, centered), axis=axes)
            with paddle.no_grad():
                m = self.momentum
                paddle.assign(m * p["mean"] + (1.0 - m) * mean.detach(), output=p["mean"])
                paddle.assign(m * p["var"] + (1.0 - m) * var.detach(), output=p["var"])
        else:
            centered = _C_ops.subtract(x, p["mean"].reshape(shape))
            var = p["var"]
        scale = _C_ops.multiply(paddle.rsqrt(var + self.epsilon), p["w"]).reshape(shape)
        return _C_ops.add(_C_ops.multiply(centered, scale), p["b"].reshape(shape))


#: ``layers.layer_norm(epsilon=1e-5, name=None)``: a layer-normalization LayerFunc over the last axis (size
#: inferred on first call).
layer_norm = LayerNorm
#: ``layers.batch_norm(momentum=0.9, epsilon=1e-5, name=None)``: a batch-normalization LayerFunc over axis 1
#: with running statistics "mean"/"var".
batch_norm = BatchNorm
