"""The classes the multi-task robot of cartpole.yaml names: an A2C task "RL" and a reward-prediction
task "Aux" on one trunk.

    config = load_config("examples/multitask/cartpole.yaml")
    result = Trainer(config).run()

The RL task's model is :class:`parl.models.MLPActorCritic`; the auxiliary
task's :class:`RewardModel` has a trunk of the same layers, which the Manager
replaces by the RL model's actor (or critic) layers, and a head of its own
(the config's ``shared`` groups). Both tasks normalize inputs with the RL
task's running statistics (the shared ``normalizer``), so the trunk sees one
input scale. :class:`MultitaskAgent` acts through "RL" only and hands every
step to both helpers.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import paddle

import parl
from parl import layers
from parl.core.specs import SpecList
from parl.utils import GymAgent
from parl.validation import check_int


class RewardModel(parl.Model):
    """Tanh hidden layers (the trunk), then the reward and the termination logit of every discrete action.

    Args:
        obs_dim: length of the float32 ``obs`` input.
        num_actions: discrete actions; the model learns from the ``action`` (int64 ``[1]``) taken.
        hidden_sizes: widths of the trunk's layers; the same as the RL model's to share them.
    """

    def __init__(self, obs_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (64, 64)) -> None:
        super().__init__()
        self.obs_dim = check_int("obs_dim", obs_dim, 1)
        self.num_actions = check_int("num_actions", num_actions, 2)
        self.trunk = [layers.fc(check_int("hidden_sizes", h, 1), act="tanh") for h in hidden_sizes]
        self.outcome = layers.fc(2 * self.num_actions)

    def get_input_specs(self) -> SpecList:
        return [("obs", dict(shape=[self.obs_dim], dtype="float32"))]

    def get_action_specs(self) -> SpecList:
        return [("action", dict(shape=[1], dtype="int64"))]

    def outcomes(self, inputs: Dict[str, paddle.Tensor]) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """Predicted reward and termination logit of every action, each ``[B, num_actions]``."""
        h = inputs["obs"]
        for layer in self.trunk:
            h = layer(h)
        out = self.outcome(h)
        return out[:, : self.num_actions], out[:, self.num_actions :]


class MultitaskAgent(GymAgent):
    """Acts through the helper of ``task`` and hands each step to that helper and, when the agent
    has one, to the helper of ``aux_task``; without it this is :class:`GymAgent`.

    Args:
        env: a gymnasium environment with discrete actions.
        task: the acting task.
        aux_task: the task that learns from the same steps.
        seed: seeds the first reset and the action space.
        num_games: episodes to play (None: until stopped).
    """

    def __init__(
        self, env: Any, *, task: str = "RL", aux_task: str = "Aux", seed: int = 0, num_games: Any = None
    ) -> None:
        super().__init__(env, task=task, seed=seed, num_games=num_games)
        self.aux_task = aux_task

    def record(
        self,
        inputs: Dict[str, np.ndarray],
        actions: Dict[str, np.ndarray],
        reward: float,
        next_inputs: Dict[str, np.ndarray],
        terminated: bool,
        truncated: bool,
        states: Dict[str, np.ndarray],
        next_states: Dict[str, np.ndarray],
    ) -> Optional[Dict[str, Any]]:
        """The acting task's step, then the same step for the auxiliary task (when bound)."""
        costs = super().record(inputs, actions, reward, next_inputs, terminated, truncated, states, next_states)
        aux = self.helpers.get(self.aux_task)
        if aux is not None:
            aux.store_data(inputs, actions, reward, next_inputs, terminated, truncated)
            aux.learn()
        return costs
