"""AtariQModel: Q-values over discrete actions from a stack of 84x84 grayscale frames (Mnih et al., 2015)."""

from __future__ import annotations

from typing import Dict

import paddle

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.validation import check_int

#: Smallest frame side the three convolutions accept (each leaves at least its next filter's size).
MIN_SCREEN_SIZE = 36


class AtariQModel(Model):
    """``value({"obs": uint8 [B, frames, H, W]}) -> [B, num_actions]``.

    The network of "Human-level control through deep reinforcement learning"
    (Mnih et al., 2015): conv 32 8x8 stride 4, conv 64 4x4 stride 2, conv 64
    3x3 stride 1, fc 512, all ReLU, then a linear layer with one Q-value per
    action. Frames arrive as uint8 (a quarter of the memory of float32 in the
    replay buffer and on every request) and are scaled to [0, 1] here, as the
    first operation of the network.

    Args:
        num_actions: size of the discrete action space.
        frames: stacked frames per observation (channels).
        screen_size: side of the square frames, at least :data:`MIN_SCREEN_SIZE`.
    """

    def __init__(self, num_actions: int, frames: int = 4, screen_size: int = 84) -> None:
        super().__init__()
        self.num_actions = check_int("num_actions", num_actions, 1)
        self.frames = check_int("frames", frames, 1)
        self.screen_size = check_int("screen_size", screen_size, MIN_SCREEN_SIZE)
        self.conv = [
            layers.conv2d(32, 8, stride=4, act="relu"),
            layers.conv2d(64, 4, stride=2, act="relu"),
            layers.conv2d(64, 3, stride=1, act="relu"),
        ]
        self.hidden = layers.fc(512, act="relu")
        self.q = layers.fc(num_actions)

    def get_input_specs(self) -> SpecList:
        return [("obs", dict(shape=[self.frames, self.screen_size, self.screen_size], dtype="uint8"))]

    def get_action_specs(self) -> SpecList:
        return [("action", dict(shape=[1], dtype="int64", range=[0, self.num_actions]))]

    def value(self, inputs: Dict[str, paddle.Tensor]) -> paddle.Tensor:
        # Any dtype is accepted (evaluation may pass float32 pixel values); the scale is the same.
        # paddle.scale by a Python float: ``tensor * float`` takes paddle's slower broadcasting multiply.
        h = paddle.scale(paddle.cast(inputs["obs"], "float32"), 1.0 / 255.0)
        for conv in self.conv:
            h = conv(h)
        return self.q(self.hidden(paddle.flatten(h, start_axis=1)))
