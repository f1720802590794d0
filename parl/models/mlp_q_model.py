"""MLPQModel: Q-values over discrete actions from a flat observation, plain or dueling."""

from __future__ import annotations

from typing import Dict, Sequence

import paddle

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.validation import check_int


class MLPQModel(Model):
    """``value({"obs": [B, obs_dim]}) -> [B, num_actions]``.

    With ``dueling=True`` the head is ``V(s) + A(s, a) - mean_a A(s, a)``
    (Wang et al., 2016).
    """

    def __init__(
        self, obs_dim: int, num_actions: int, hidden_sizes: Sequence[int] = (64, 64), dueling: bool = False
    ) -> None:
        super().__init__()
        self.obs_dim = check_int("obs_dim", obs_dim, 1)
        self.num_actions = check_int("num_actions", num_actions, 1)
        self.hidden = [layers.fc(check_int("hidden_sizes", h, 1), act="relu") for h in hidden_sizes]
        self.dueling = bool(dueling)
        if self.dueling:
            self.advantage = layers.fc(num_actions)
            self.state_value = layers.fc(1)
        else:
            self.q = layers.fc(num_actions)

    def get_input_specs(self) -> SpecList:
        return [("obs", dict(shape=[self.obs_dim], dtype="float32"))]

    def get_action_specs(self) -> SpecList:
        return [("action", dict(shape=[1], dtype="int64"))]

    def value(self, inputs: Dict[str, paddle.Tensor]) -> paddle.Tensor:
        h = inputs["obs"]
        for layer in self.hidden:
            h = layer(h)
        if not self.dueling:
            return self.q(h)
        advantage = self.advantage(h)
        return self.state_value(h) + advantage - advantage.mean(axis=-1, keepdim=True)
