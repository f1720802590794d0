"""The convolutional torso of the pixel models: convolutions, then one fully connected layer, over frames.

    conv = conv_layers(NATURE_CONVS)                         # the LayerFuncs, kept by the model as attributes
    hidden = layers.fc(512, act="relu")
    features = torso(plain, conv, hidden, scale=1 / 255)     # uint8 [B, C, H, W] -> [B, 512]

The models keep the layers themselves (so their weight names are their own: ``conv.0.w``,
``hidden.w``) and read them through a :data:`~parl.layers.compiled.Bind`, so one torso serves a
Q-network (:class:`~parl.models.atari_q_model.AtariQModel`) and an actor-critic
(:class:`~parl.models.pixel_actor_critic.AtariActorCritic`) alike, on the plain and the fast path.
"""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import paddle

from parl import layers
from parl.layers.compiled import Bind, chain
from parl.layers.layer_func import LayerFunc

#: One convolution: (filters, filter size, stride), ReLU after it.
ConvSpec = Tuple[int, int, int]

#: Mnih et al. (2015): 32 8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1.
NATURE_CONVS: Tuple[ConvSpec, ...] = ((32, 8, 4), (64, 4, 2), (64, 3, 1))

#: Young and Tian (2019), MinAtar's DQN: 16 3x3 stride 1.
MINATAR_CONVS: Tuple[ConvSpec, ...] = ((16, 3, 1),)


def conv_layers(convs: Sequence[ConvSpec]) -> List[LayerFunc]:
    """One ReLU :func:`~parl.layers.conv2d` per ``(filters, size, stride)``, no padding."""
    if not convs:
        raise ValueError(f"a convolutional torso needs at least one convolution, got {convs!r}")
    return [layers.conv2d(filters, size, stride=stride, act="relu") for filters, size, stride in convs]


def conv_output_side(side: int, convs: Sequence[ConvSpec]) -> int:
    """The side of the square feature maps ``convs`` leave of a ``side`` x ``side`` frame (0: none left)."""
    for _, size, stride in convs:
        side = (side - size) // stride + 1 if side >= size else 0
    return max(side, 0)


def torso(
    bind: Bind, conv: Sequence[LayerFunc], hidden: LayerFunc, scale: float
) -> Callable[[paddle.Tensor], paddle.Tensor]:
    """``frames -> hidden(flatten(conv(float32(frames) * scale)))``, the layers read through ``bind``.

    Frames of any dtype are accepted (uint8 from the replay buffer, float32 from an evaluation); the
    cast and the scale are the network's first operation.
    """
    convs, fc = chain(bind, conv), bind(hidden)

    def features(frames: paddle.Tensor) -> paddle.Tensor:
        # paddle.scale by a Python float: ``tensor * float`` takes paddle's slower broadcasting multiply.
        h = convs(paddle.scale(paddle.cast(frames, "float32"), scale))
        return fc(paddle.flatten(h, start_axis=1))

    return features
