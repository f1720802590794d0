"""MLPQModel: Q-values over discrete actions from a flat observation, plain or dueling."""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import paddle

from parl import layers
from parl.core.model import Model
from parl.core.specs import SpecList
from parl.layers.compiled import Bind, chain, fast, plain, stands_in_for
from parl.validation import check_int

TensorDict = Dict[str, paddle.Tensor]
#: ``inputs -> Q``, ``[B, num_actions]``.
ValueFn = Callable[[TensorDict], paddle.Tensor]


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
        return [("action", dict(shape=[1], dtype="int64", range=[0, self.num_actions]))]

    def value(self, inputs: TensorDict) -> paddle.Tensor:
        """Q-values of every action, ``[B, num_actions]``."""
        return self._value(plain)(inputs)

    @stands_in_for(["value"])
    def compile_value(self) -> Optional[ValueFn]:
        """:meth:`value` over the layers' fast callables (None on a subclass that overrides ``value``).

        Raises:
            LayersNotBuilt: before the first call of :meth:`value`.
        """
        return self._value(fast)

    def _value(self, bind: Bind) -> ValueFn:
        if not self.dueling:
            return _on_obs(chain(bind, [*self.hidden, self.q]))
        trunk, advantage_head, state_value = chain(bind, self.hidden), bind(self.advantage), bind(self.state_value)

        def dueling(inputs: TensorDict) -> paddle.Tensor:
            h = trunk(inputs["obs"])
            advantage = advantage_head(h)
            return state_value(h) + advantage - advantage.mean(axis=-1, keepdim=True)

        return dueling


def _on_obs(body: Callable[[paddle.Tensor], paddle.Tensor]) -> ValueFn:
    return lambda inputs: body(inputs["obs"])
