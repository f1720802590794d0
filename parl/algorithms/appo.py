"""APPO: PPO's clipped surrogate over segments acted with older weights, with V-trace advantages
(asynchronous PPO, as in RLlib and Sample Factory; V-trace from Espeholt et al., 2018).

Each agent plays ``sample_interval`` steps recording the behaviour policy's log-probability
``log mu(a|s)`` of every action (``records_behaviour``). Before a batch's first optimizer step,
without gradient, V-trace (:func:`~parl.algorithms.vtrace.vtrace`) gives the value targets
``v_t`` and advantages ``A_t`` under the current policy; each of the ``epochs * minibatches``
steps then takes :class:`~parl.algorithms.ppo.PPO`'s loss with the ratio against the behaviour:

    ratio       = exp(log pi(a|s) - log mu(a|s))
    policy_loss = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
    value_loss  = mean((V(s) - v)^2)
    loss        = policy_loss + value_coef * value_loss - entropy_coef * entropy

On-policy (``mu`` the policy before the batch) this is PPO with ``gae_lambda = 1``. Everything
else (minibatches, advantage normalization, schedules, value clipping) is PPO's.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import paddle

from parl.algorithms.ppo import PPO
from parl.algorithms.vtrace import check_clips
from parl.core.batch import Transition
from parl.core.behaviour import BEHAVIOUR_LOG_PROB
from parl.core.model import Model


class APPO(PPO):
    """PPO with V-trace advantages and value targets, its ratio against the behaviour policy.

    Args:
        rho_bar: clip of V-trace's importance weights (the paper's 1).
        c_bar: clip of V-trace's trace-cutting weights (the paper's 1).

    The others are :class:`~parl.algorithms.ppo.PPO`'s, with its defaults (``gae_lambda`` aside:
    V-trace takes its place).
    """

    records_behaviour = True

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        learning_rate: float = 3e-4,
        clip_range: float = 0.2,
        value_clip: Optional[float] = None,
        value_coef: float = 0.5,
        entropy_coef: float = 0.0,
        epochs: int = 10,
        num_minibatches: Optional[int] = None,
        minibatch_size: Optional[int] = None,
        advantage_normalization: str = "minibatch",
        grad_clip: Optional[float] = 0.5,
        learning_rate_schedule: str = "constant",
        clip_range_schedule: str = "constant",
        schedule_steps: Optional[int] = None,
        value_normalization: bool = False,
        rho_bar: float = 1.0,
        c_bar: float = 1.0,
    ) -> None:
        super().__init__(
            model_func,
            gamma=gamma,
            gae_lambda=1.0,
            learning_rate=learning_rate,
            clip_range=clip_range,
            value_clip=value_clip,
            value_coef=value_coef,
            entropy_coef=entropy_coef,
            epochs=epochs,
            num_minibatches=num_minibatches,
            minibatch_size=minibatch_size,
            advantage_normalization=advantage_normalization,
            grad_clip=grad_clip,
            learning_rate_schedule=learning_rate_schedule,
            clip_range_schedule=clip_range_schedule,
            schedule_steps=schedule_steps,
            value_normalization=value_normalization,
        )
        self.rho_bar, self.c_bar = check_clips(rho_bar, c_bar)

    def batch_targets(
        self, batch: Transition[paddle.Tensor]
    ) -> Tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor, paddle.Tensor]:
        """The behaviour's log-probabilities (the ratio's denominator), the values, and V-trace's
        advantages and value targets under the policy before this batch's steps."""
        assert batch.sequence_lengths is not None  # set in every batch learn is given (Transition.to_tensors)
        with paddle.no_grad():
            dist, values = self.model.sequence(batch.inputs, batch.states, batch.sequence_lengths)
            target_log_probs = dist.log_prob(batch.actions["action"])
        advantages, returns = self.vtrace_targets(target_log_probs, values, batch, self.rho_bar, self.c_bar)
        return batch.actions[BEHAVIOUR_LOG_PROB], values, advantages, returns
