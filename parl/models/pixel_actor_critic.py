"""AtariActorCritic: a policy and a value over discrete actions from stacks of 84x84 frames (PPO, A2C on Atari)."""

from __future__ import annotations

from typing import Tuple

import paddle

from parl import layers
from parl.core.specs import SpecList
from parl.layers.compiled import Bind
from parl.models.actor_critic import ActorCriticModel, FeaturesFn, TensorDict, TensorMap
from parl.models.atari_q_model import MIN_SCREEN_SIZE
from parl.models.conv_torso import NATURE_CONVS, conv_layers, torso
from parl.validation import check_int


class AtariActorCritic(ActorCriticModel):
    """``step({"obs": uint8 [B, frames, H, W]}, {}) -> (Categorical, value [B, 1], {})``.

    The torso of :class:`~parl.models.atari_q_model.AtariQModel` (Mnih et al., 2015: three
    convolutions and fc 512, all ReLU, on pixels scaled to [0, 1]) shared by a linear policy head
    (``num_actions`` logits) and a linear value head, as the Atari actor-critics of A3C (Mnih et al.,
    2016), PPO (Schulman et al., 2017) and Stable-Baselines3's ``CnnPolicy``.

    Args:
        num_actions: size of the discrete action space.
        frames: stacked frames per observation (channels).
        screen_size: side of the square frames, at least :data:`~parl.models.atari_q_model.MIN_SCREEN_SIZE`.
    """

    def __init__(self, num_actions: int, frames: int = 4, screen_size: int = 84) -> None:
        super().__init__(None, num_actions, None)
        self.frames = check_int("frames", frames, 1)
        self.screen_size = check_int("screen_size", screen_size, MIN_SCREEN_SIZE)
        self.conv = conv_layers(NATURE_CONVS)
        self.hidden = layers.fc(512, act="relu")

    def get_input_specs(self) -> SpecList:
        return [("obs", dict(shape=[self.frames, self.screen_size, self.screen_size], dtype="uint8"))]

    def _features(self, bind: Bind, value: bool) -> FeaturesFn:
        features = torso(bind, self.conv, self.hidden, 1.0 / 255.0)

        def shared(inputs: TensorMap, states: TensorMap) -> Tuple[paddle.Tensor, paddle.Tensor, TensorDict]:
            h = features(inputs["obs"])
            return h, h, {}

        return shared
