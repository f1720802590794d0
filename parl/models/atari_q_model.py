"""Q-values over discrete actions from stacks of frames: the Atari network of Mnih et al. (2015) and
MinAtar's smaller one (Young and Tian, 2019), both over :mod:`parl.models.conv_torso`."""

from __future__ import annotations

from typing import Dict, Sequence

import paddle

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.layers.compiled import plain
from parl.models.conv_torso import MINATAR_CONVS, NATURE_CONVS, ConvSpec, conv_layers, conv_output_side, torso
from parl.validation import check_int

#: Smallest frame side the three convolutions accept (each leaves at least its next filter's size).
MIN_SCREEN_SIZE = 36


class PixelQModel(Model):
    """``value({"obs": uint8 [B, frames, S, S]}) -> [B, num_actions]``: a convolutional torso
    (:func:`~parl.models.conv_torso.torso`), then one linear Q-value per action. The base of
    :class:`AtariQModel` and :class:`MinAtarQModel`, which fix its layers.

    Args:
        num_actions: size of the discrete action space.
        frames: channels of an observation (stacked frames, or object kinds).
        screen_size: side of the square frames; the convolutions must leave at least one cell.
        convs: the torso's convolutions, ``(filters, size, stride)`` each.
        hidden_size: width of the torso's fully connected layer.
        scale: what the frames are multiplied by, as the network's first operation.
    """

    def __init__(
        self,
        num_actions: int,
        frames: int,
        screen_size: int,
        *,
        convs: Sequence[ConvSpec],
        hidden_size: int,
        scale: float,
    ) -> None:
        super().__init__()
        self.num_actions = check_int("num_actions", num_actions, 1)
        self.frames = check_int("frames", frames, 1)
        self.screen_size = check_int("screen_size", screen_size, 1)
        if conv_output_side(self.screen_size, convs) < 1:
            raise ValueError(
                f"screen_size {screen_size} is too small for {type(self).__name__}'s convolutions {tuple(convs)}"
            )
        self.scale = float(scale)
        self.conv = conv_layers(convs)
        self.hidden = layers.fc(check_int("hidden_size", hidden_size, 1), act="relu")
        self.q = layers.fc(num_actions)

    def get_input_specs(self) -> SpecList:
        return [("obs", dict(shape=[self.frames, self.screen_size, self.screen_size], dtype="uint8"))]

    def get_action_specs(self) -> SpecList:
        return [("action", dict(shape=[1], dtype="int64", range=[0, self.num_actions]))]

    def value(self, inputs: Dict[str, paddle.Tensor]) -> paddle.Tensor:
        # Any dtype is accepted (evaluation may pass float32 pixel values); the scale is the same.
        return self.q(torso(plain, self.conv, self.hidden, self.scale)(inputs["obs"]))


class AtariQModel(PixelQModel):
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
        check_int("screen_size", screen_size, MIN_SCREEN_SIZE)
        super().__init__(num_actions, frames, screen_size, convs=NATURE_CONVS, hidden_size=512, scale=1.0 / 255.0)


class MinAtarQModel(PixelQModel):
    """``value({"obs": uint8 [B, channels, S, S]}) -> [B, num_actions]`` for MinAtar's 10x10 games.

    The network of Young and Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
    Reinforcement Learning Experiments" (2019): conv 16 3x3 stride 1, fc 128, both ReLU, then one
    Q-value per action. Each channel is one kind of object, 0 or 1 in every cell, so the inputs are
    not scaled.

    Args:
        num_actions: size of the discrete action space.
        frames: channels of an observation (MinAtar's object kinds: 4 in Breakout).
        screen_size: side of the square grid, at least 3 (MinAtar's: 10).
        hidden_size: width of the fully connected layer.
    """

    def __init__(self, num_actions: int, frames: int, screen_size: int = 10, hidden_size: int = 128) -> None:
        super().__init__(num_actions, frames, screen_size, convs=MINATAR_CONVS, hidden_size=hidden_size, scale=1.0)
