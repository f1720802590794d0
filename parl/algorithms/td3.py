"""TD3 (Fujimoto et al., 2018): DDPG with clipped double Q, target policy smoothing and delayed actor updates.

With twin critics ``Q_1, Q_2``, the target copies ``Q'``, ``pi'`` and
``eps ~ N(0, target_noise^2)``:

    a'       = clip(pi'(s') + clip(eps, -noise_clip, noise_clip), -1, 1)     (target policy smoothing)
    y        = r + gamma^k * (1 - next_episode_end) * min(Q'_1(s', a'), Q'_2(s', a'))
    L_critic = (Q_1(s, a) - y)^2 + (Q_2(s, a) - y)^2
    L_actor  = -Q_1(s, pi(s))      only on every ``policy_delay``-th update, after which the targets sync

Actions live in [-1, 1], so the noise scales are in those units.
"""

from __future__ import annotations

from typing import Callable, Optional

import paddle

from parl.algorithms.ddpg import DDPG
from parl.core.model import Model
from parl.models.continuous import Observation
from parl.validation import check_int, check_positive, check_range


class TD3(DDPG):
    """Twin delayed DDPG over a :class:`~parl.models.continuous.DeterministicActorCritic` (give it 2 critics).

    Args:
        gamma: discount, in [0, 1].
        tau: Polyak rate of the targets per sync (0.005, as the paper).
        learning_rate: Adam step size of actor and critic. 3e-4: the authors' published code
            (the paper used 1e-3).
        policy_delay: critic updates per actor update; the targets sync on the same updates (paper: 2).
        target_noise: standard deviation of the target smoothing noise (paper: 0.2); 0 turns it off.
        noise_clip: bound on that noise (paper: 0.5).
        grad_clip: global gradient-norm bound over all parameters, or None.
    """

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        tau: float = 0.005,
        learning_rate: float = 3e-4,
        policy_delay: int = 2,
        target_noise: float = 0.2,
        noise_clip: float = 0.5,
        grad_clip: Optional[float] = None,
    ) -> None:
        self.policy_delay = check_int("policy_delay", policy_delay, 1)
        super().__init__(
            model_func,
            gamma=gamma,
            tau=tau,
            learning_rate=learning_rate,
            target_update_interval=self.policy_delay,
            grad_clip=grad_clip,
        )
        self.target_noise = check_range("target_noise", target_noise, 0.0, float("inf"))
        self.noise_clip = check_positive("noise_clip", noise_clip)

    def next_actions(self, next_obs: Observation) -> paddle.Tensor:
        action = self.target_model.actor.forward(next_obs)
        if self.target_noise == 0.0:
            return action
        noise = paddle.clip(paddle.randn(action.shape) * self.target_noise, -self.noise_clip, self.noise_clip)
        return paddle.clip(action + noise, -1.0, 1.0)

    def updates_actor(self) -> bool:
        """True on updates ``policy_delay``, ``2 * policy_delay``, ... (counting from 1)."""
        return (self.completed_updates + 1) % self.policy_delay == 0
