"""MaskedMLPQModel: Q-values over discrete actions from a Dict observation whose ``action_mask`` marks the legal ones.

    model = MaskedMLPQModel(obs_shape=[3, 3, 2], num_actions=9)   # PettingZoo tic-tac-toe, with DQN
    q = model.value({"observation": boards, "action_mask": masks})

The inputs are those of :class:`~parl.models.MaskedMLPActorCritic`: ``observation`` (``obs_shape``,
flattened into the MLP) and ``action_mask`` (``[num_actions]``, 1 legal, 0 illegal). The Q-value of every
masked action is lowered by :data:`~parl.models.encoders.MASKED_LOGIT_OFFSET`, so DQN's greedy
action and its Double-DQN next action are legal ones, and the target's next value is a legal action's
(a terminal row, all masked, is multiplied by zero and stays finite).
"""

from __future__ import annotations

from typing import Sequence

from parl.layers.compiled import Bind
from parl.models.encoders import MaskedObservation
from parl.models.mlp_q_model import QModel, ValueFn


class MaskedMLPQModel(QModel):
    """ReLU ``hidden_sizes`` layers over the flattened ``observation``, then Q-values of every action,
    each masked action's lowered by 1e9 (see the module docstring); dueling with ``dueling=True``.

    Args:
        obs_shape: shape of the ``observation`` input (e.g. ``[3, 3, 2]``).
        num_actions: discrete actions; the length of ``action_mask``.
        hidden_sizes: the ReLU layers.
        dueling: a dueling head (Wang et al., 2016).
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
        dueling: bool = False,
        observation_key: str = "observation",
        mask_key: str = "action_mask",
    ) -> None:
        encoder = MaskedObservation(obs_shape, num_actions, observation_key, mask_key)
        super().__init__(encoder, num_actions, hidden_sizes, dueling)
        self.mask = encoder.masked
        self.obs_shape = encoder.obs_shape
        self.mask_key = mask_key

    def _value(self, bind: Bind) -> ValueFn:
        q, mask = super()._value(bind), self.mask
        return lambda inputs: mask(q(inputs), inputs)
