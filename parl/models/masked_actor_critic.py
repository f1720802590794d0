"""MaskedMLPActorCritic: discrete actions from a Dict observation whose ``action_mask`` marks the legal ones.

    model = MaskedMLPActorCritic(obs_shape=[3, 3, 2], num_actions=9)   # PettingZoo tic-tac-toe
    dist, value, _ = model.step({"observation": boards, "action_mask": masks}, {})

The inputs are what :func:`parl.multiagent.observation_inputs` makes of a Dict observation: one float32
input per key, ``observation`` (``obs_shape``, flattened into the MLP) and ``action_mask`` (``[num_actions]``,
1 for a legal action, 0 for an illegal one). The policy's logit of every masked action is lowered by
:data:`~parl.models.encoders.MASKED_LOGIT_OFFSET`, so its probability is 0 in float32: sampling (PPO,
A2C) and the greedy action never pick it, and its log-probability and entropy terms stay finite (no ``-inf``, no NaN).
A row with no legal action (an observation after the game ended) gets the unmasked policy's order.
"""

from __future__ import annotations

from typing import Literal, Optional, Sequence, Tuple, overload

import paddle

from parl import layers
from parl.core.specs import SpecList
from parl.layers.compiled import Bind, chain
from parl.layers.distributions import Categorical
from parl.models.actor_critic import (
    ActorCriticModel,
    Distribution,
    FeaturesFn,
    StepFn,
    TensorDict,
    TensorMap,
    ValuedStepFn,
)
from parl.models.encoders import MASKED_LOGIT_OFFSET as MASKED_LOGIT_OFFSET  # kept importable from here
from parl.models.encoders import MaskedObservation
from parl.validation import check_int


class MaskedMLPActorCritic(ActorCriticModel):
    """Feedforward actor and critic over the flattened ``observation``, the actor's logits masked by
    ``action_mask`` (see the module docstring).

    Args:
        obs_shape: shape of the ``observation`` input (e.g. ``[3, 3, 2]``).
        num_actions: discrete actions; the length of ``action_mask``.
        hidden_sizes: tanh layers of the actor and, separately, of the critic.
        observation_key: the input name of the observation.
        mask_key: the input name of the action mask.

    Raises:
        ValueError: an empty ``obs_shape`` or a size below 1, ``num_actions`` below 2, or one name for both inputs.
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        num_actions: int,
        hidden_sizes: Sequence[int] = (64, 64),
        observation_key: str = "observation",
        mask_key: str = "action_mask",
    ) -> None:
        super().__init__(None, num_actions, None)
        self.inputs = MaskedObservation(obs_shape, num_actions, observation_key, mask_key)
        self.obs_shape = self.inputs.obs_shape
        self.observation_key = observation_key
        self.mask_key = mask_key
        self.actor_hidden = [layers.fc(check_int("hidden_sizes", h, 1), act="tanh") for h in hidden_sizes]
        self.critic_hidden = [layers.fc(h, act="tanh") for h in hidden_sizes]

    def get_input_specs(self) -> SpecList:
        return self.inputs.get_input_specs()

    def _features(self, bind: Bind, value: bool) -> FeaturesFn:
        actor = chain(bind, self.actor_hidden)
        critic = chain(bind, self.critic_hidden) if value else None
        flat = self.inputs.features(bind)

        def features(inputs: TensorMap, states: TensorMap) -> Tuple[paddle.Tensor, Optional[paddle.Tensor], TensorDict]:
            obs = flat(inputs)
            return actor(obs), (None if critic is None else critic(obs)), {}

        return features

    @overload
    def _step(self, bind: Bind, acting: Literal[False]) -> ValuedStepFn: ...

    @overload
    def _step(self, bind: Bind, acting: bool) -> StepFn: ...

    def _step(self, bind: Bind, acting: bool) -> StepFn:
        features, logits = self._features(bind, not acting), bind(self.logits)
        critic = None if acting else bind(self.critic)
        mask = self.inputs.masked

        def step(inputs: TensorMap, states: TensorMap) -> Tuple[Distribution, Optional[paddle.Tensor], TensorDict]:
            policy_features, value_features, next_states = features(inputs, states)
            masked = mask(logits(policy_features), inputs)
            value = None if critic is None else critic(value_features)
            return Categorical(masked), value, next_states

        return step
