"""REINFORCE with a learned baseline (Williams, 1992; Sutton & Barto, 2018, section 13.4).

The policy follows the gradient of ``log pi(a_t | s_t) * (G_t - V(s_t))``, where
``G_t`` is the discounted return to the end of the segment and ``V`` the model's
value head, trained towards ``G_t`` as the baseline:

    loss = -mean(log pi(a_t | s_t) * A_t) + value_coef * mean((G_t - V(s_t))^2) - entropy_coef * mean(H(pi(. | s_t)))
    A_t  = G_t - V(s_t)          (optionally normalized to zero mean, unit std over the batch)

Monte-Carlo returns come from whole-episode segments: give the agents an
:class:`~parl.OnPolicyHelper` whose ``sample_interval`` is longer than any
episode, so it sends each episode as one segment. ``G_t`` is then computed
with GAE at ``lam = 1`` (:meth:`ActorCriticBase.advantages`): the discounted
rewards to the episode's end, plus the discounted value of the last input when
a time limit truncated the episode (never after a termination). Shorter
segments turn the same loss into A2C's n-step form (:class:`~parl.algorithms.a2c.A2C`).

The model is an :class:`~parl.models.ActorCriticModel`; ``model.sequence``
evaluates the batch, so recurrent models unroll each segment from its stored
first state.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import paddle

from parl.algorithms.actor_critic_base import ActorCriticBase
from parl.core.batch import Transition
from parl.core.model import Model
from parl.models.actor_critic import Distribution
from parl.validation import check_range

#: Added to the advantages' standard deviation when normalizing (a batch of equal advantages stays finite).
NORMALIZE_EPSILON = 1e-8


class PolicyGradient(ActorCriticBase):
    """REINFORCE with the value head as a learned baseline; one optimizer step per batch.

    Args:
        gamma: discount, in [0, 1].
        learning_rate: Adam step size. 3e-3: measured on CartPole-v1 (examples/pg_cartpole.py).
        value_coef: weight of the baseline's squared error in the loss.
        entropy_coef: weight of the entropy bonus (0: none, as in REINFORCE).
        grad_clip: global gradient-norm bound, or None.
        normalize_advantages: scale the batch's advantages to zero mean and unit standard deviation.

    Costs: ``loss``, ``policy_loss``, ``value_loss``, ``entropy`` (batch means).
    """

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        learning_rate: float = 3e-3,
        value_coef: float = 0.5,
        entropy_coef: float = 0.0,
        grad_clip: Optional[float] = None,
        normalize_advantages: bool = True,
    ) -> None:
        super().__init__(model_func, gamma=gamma, learning_rate=learning_rate, grad_clip=grad_clip)
        self.value_coef = check_range("value_coef", value_coef, 0.0, float("inf"))
        self.entropy_coef = check_range("entropy_coef", entropy_coef, 0.0, float("inf"))
        self.normalize_advantages = bool(normalize_advantages)
        #: The GAE lambda of the advantages: 1 gives the returns of whole segments.
        self.lam = 1.0

    def targets(
        self, dist: Distribution, value: paddle.Tensor, batch: Transition[paddle.Tensor]
    ) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """The advantages and value targets the loss uses (``[B, 1]``, no gradient), from the batch's
        policy ``dist`` and values: GAE(:attr:`lam`) here."""
        return self.advantages(value, batch, lam=self.lam)

    def learn(self, batch: Transition[paddle.Tensor]) -> Dict[str, paddle.Tensor]:
        assert batch.sequence_lengths is not None  # set in every batch learn is given (Transition.to_tensors)
        dist, value = self.model.sequence(batch.inputs, batch.states, batch.sequence_lengths)
        adv, returns = self.targets(dist, value, batch)
        if self.normalize_advantages and adv.shape[0] > 1:
            centered = adv - adv.mean()
            adv = centered / (paddle.sqrt((centered * centered).mean()) + NORMALIZE_EPSILON)
        policy_loss = -(dist.log_prob(batch.actions["action"]) * adv).mean()
        value_loss = ((returns - value) ** 2).mean()
        entropy = dist.entropy().mean()
        loss = policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy
        return {
            "loss": loss,
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": entropy.detach(),
        }
