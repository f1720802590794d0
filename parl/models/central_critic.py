"""CentralCriticActorCritic: an actor on the agent's own observation, a critic on the global state (MAPPO).

    model = CentralCriticActorCritic(obs_dim=18, state_dim=54, num_actions=5)
    dist, value, _ = model.step({"obs": obs, "state": state}, {})   # policy from obs, value from state

The critic of centralized training with decentralized execution (Yu et al. 2022, "The Surprising
Effectiveness of PPO in Cooperative Multi-Agent Games"): during training the value head reads what no
single agent sees, the environment's global state; the policy reads only the agent's observation, so
acting needs nothing but it (the ``state`` input is still sent with every request, and the compiled
policy never reads it). A multi-agent agent fills ``state`` with ``env.state()``
(:class:`~parl.multiagent.PettingZooAgent` with ``global_state="state"``); in a robot config
``state_dim`` comes from the environment's ``state_space``.

Any algorithm of the actor-critic family runs it unchanged: the model routes the inputs.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import paddle

from parl import layers
from parl.core.specs import SpecList
from parl.layers.compiled import Bind, chain
from parl.models.actor_critic import ActorCriticModel, FeaturesFn, TensorDict, TensorMap
from parl.validation import check_int

#: The input that carries the global state to the critic.
STATE_INPUT = "state"


class CentralCriticActorCritic(ActorCriticModel):
    """Feedforward actor on input ``obs`` and critic on input ``state``, each with its own ``hidden_sizes``
    tanh layers.

    Args:
        obs_dim: length of the float32 ``obs`` input (the agent's own observation).
        state_dim: length of the float32 ``state`` input (the environment's global state).
        num_actions: discrete actions (give this or ``action_dim``).
        action_dim: dimensions of a continuous action.
        hidden_sizes: the widths of the actor's and of the critic's hidden layers (MAPPO: 64, 64).

    Raises:
        ValueError: a size that is not a positive integer (named), or not exactly one of ``num_actions``
            and ``action_dim``.
    """

    def __init__(
        self,
        obs_dim: int,
        state_dim: int,
        num_actions: Optional[int] = None,
        action_dim: Optional[int] = None,
        hidden_sizes: Sequence[int] = (64, 64),
    ) -> None:
        super().__init__(obs_dim, num_actions, action_dim)
        self.state_dim = check_int("state_dim", state_dim, 1)
        widths = [check_int("hidden_sizes", h, 1) for h in hidden_sizes]
        self.actor_hidden = [layers.fc(h, act="tanh") for h in widths]
        self.critic_hidden = [layers.fc(h, act="tanh") for h in widths]

    def get_input_specs(self) -> SpecList:
        return [*super().get_input_specs(), (STATE_INPUT, dict(shape=[self.state_dim], dtype="float32"))]

    def _features(self, bind: Bind, value: bool) -> FeaturesFn:
        actor = chain(bind, self.actor_hidden)
        critic = chain(bind, self.critic_hidden) if value else None

        def features(inputs: TensorMap, states: TensorMap) -> Tuple[paddle.Tensor, Optional[paddle.Tensor], TensorDict]:
            return actor(inputs["obs"]), (None if critic is None else critic(inputs[STATE_INPUT])), {}

        return features
