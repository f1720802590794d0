"""2-D convolution layer on NCHW input."""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple, Union

import paddle
import paddle.nn.functional as F

from parl.layers.layer_func import LayerFunc, ParamSpec, activation, check_count

IntOrPair = Union[int, Sequence[int]]


def _pair(name: str, value: IntOrPair, minimum: int) -> Tuple[int, int]:
    """``value`` as a pair of ints, each at least ``minimum``."""
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
        raise ValueError(f"conv2d {name} must be an int or a pair of ints, got {value!r}")
    if min(pair) < minimum:
        raise ValueError(f"conv2d {name} must be >= {minimum}, got {value!r}")
    return pair  # type: ignore[return-value]


class Conv2D(LayerFunc):
    """``act(conv2d(x, w) + b)`` for ``x`` of shape [N, C, H, W]; C is inferred."""

    same_in_both_modes = True

    def __init__(
        self,
        num_filters: int,
        filter_size: IntOrPair,
        stride: IntOrPair = 1,
        padding: IntOrPair = 0,
        act: Optional[str] = None,
        bias: bool = True,
        name: Optional[str] = None,
    ) -> None:
        self.num_filters = check_count("conv2d", "num_filters", num_filters)
        self.filter_size = _pair("filter_size", filter_size, 1)
        self.stride = _pair("stride", stride, 1)
        self.padding = _pair("padding", padding, 0)
        self.act_name = act
        self._act = activation(act)
        self.use_bias = bias
        super().__init__("conv2d", name)

    def param_specs(self, first_input: paddle.Tensor) -> Dict[str, ParamSpec]:
        if first_input.ndim != 4:
            raise ValueError(f"conv2d {self.name} expects NCHW input, got shape {first_input.shape}")
        dtype = str(first_input.dtype).split(".")[-1]
        shape = [self.num_filters, int(first_input.shape[1]), *self.filter_size]
        specs = {"w": ParamSpec(shape, dtype, paddle.nn.initializer.XavierUniform())}
        if self.use_bias:
            specs["b"] = ParamSpec([self.num_filters], dtype, paddle.nn.initializer.Constant(0.0))
        return specs

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        out = F.conv2d(x, self.params["w"], stride=self.stride, padding=self.padding)
        bias = self.params.get("b")
        if bias is not None:
            # Added at full shape: paddle's CPU add broadcasting [C] over N, H and W (what F.conv2d does
            # with a bias) costs about 8x this expand-then-add, forward and backward together.
            out = out + bias.reshape([1, -1, 1, 1]).expand(out.shape)
        return self._act(out) if self._act is not None else out


#: ``layers.conv2d(num_filters, filter_size, stride=1, padding=0, act=None, bias=True, name=None)``: a 2-D
#: convolution LayerFunc with ``num_filters`` output channels on NCHW input.
conv2d = Conv2D
