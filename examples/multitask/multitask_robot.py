"""The pieces of the multi-task robot: an A2C task "RL" and a reward-prediction task "Aux" on one trunk.

    manager = parl.Manager({"RL": rl_settings, "Aux": make_aux_settings()}, shared=shared_parts("actor"))
    manager.add_agent(MultitaskAgent(env, seed=0), {"RL": rl_helper, "Aux": make_aux_helper()})

The RL task's model is :class:`parl.models.MLPActorCritic`; the auxiliary
task's :class:`RewardModel` has a trunk of the same layers, which the Manager
replaces by the RL model's actor (or critic) layers, and a head of its own. Both
tasks normalize inputs with the RL task's running statistics (the shared
``normalizer``), so the trunk sees one input scale. The agent acts through
"RL" only and hands every step to both helpers.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import paddle

import parl
from parl import layers
from parl.algorithms.reward_prediction import RewardPrediction
from parl.core.specs import SpecList
from parl.utils import GymAgent
from parl.validation import check_choice, check_int

#: Which layers of MLPActorCritic the auxiliary task shares: its actor's or its critic's hidden layers.
TRUNKS = {"actor": "model.actor_hidden", "critic": "model.critic_hidden"}


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


def shared_parts(trunk: str = "actor") -> Dict[str, Dict[str, str]]:
    """``Manager(shared=...)`` here: the RL model's ``trunk`` ("actor" or "critic") layers and input statistics."""
    check_choice("trunk", trunk, tuple(TRUNKS))
    return {
        "trunk": {"RL": TRUNKS[trunk], "Aux": "model.trunk"},
        "input_statistics": {"RL": "normalizer", "Aux": "normalizer"},
    }


def make_aux_settings(
    obs_dim: int = 4,
    num_actions: int = 2,
    hidden_sizes: Sequence[int] = (64, 64),
    learning_rate: float = 1e-2,
    end_coef: float = 1.0,
) -> parl.TaskSettings:
    """The auxiliary task: RewardPrediction on a RewardModel, inputs normalized (by the shared statistics).

    ``learning_rate`` 1e-2: with Adam's default 1e-3 the termination head was still at chance when
    the RL task reached its target (docs/multitask.md).
    """
    return parl.TaskSettings(
        parl.create_algorithm_func(
            RewardModel,
            dict(obs_dim=obs_dim, num_actions=num_actions, hidden_sizes=tuple(hidden_sizes)),
            RewardPrediction,
            dict(learning_rate=learning_rate, end_coef=end_coef),
        ),
        max_batchsize=64,
        normalize_inputs=True,
    )


def make_aux_helper(sample_interval: int = 64) -> parl.OnPolicyHelper:
    """The auxiliary task learns from each agent's last ``sample_interval`` steps, like the RL task."""
    return parl.OnPolicyHelper(sample_interval=sample_interval)


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
