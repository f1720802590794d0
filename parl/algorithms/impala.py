"""IMPALA (Espeholt et al., 2018): actor-critic learning from segments acted with older weights,
corrected by V-trace.

Each agent plays ``sample_interval`` steps with the weights its task had then, recording the
behaviour policy's log-probability of every action (``records_behaviour``; the helper's segment
carries them in ``batch.actions``). The learner takes one optimizer step per batch on

    loss = -mean(log pi(a_t | s_t) * A_t) + value_coef * mean((v_t - V(s_t))^2) - entropy_coef * mean(H(pi(. | s_t)))

where ``v_t`` and ``A_t = rho_t * (r_t + gamma * v_{t+1} - V(s_t))`` are V-trace's
(:func:`~parl.algorithms.vtrace.vtrace`), with the importance weights ``pi / mu`` clipped at
``rho_bar`` and ``c_bar``. A segment's last row bootstraps from ``V(next_inputs)`` after a
truncation and not after a termination. On-policy (``mu = pi``) this is A2C with n-step returns.

Departures from the paper: the loss is A2C's (mean over rows, not sum; value loss without the
factor 1/2, ``value_coef`` 0.5 standing for the paper's baseline cost 0.5 of a halved square), and
the optimizer is RMSProp or Adam as :class:`~parl.algorithms.a2c.A2C` offers.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import paddle

from parl.algorithms.a2c import A2C
from parl.algorithms.vtrace import check_clips
from parl.core.batch import Transition
from parl.core.model import Model
from parl.models.actor_critic import Distribution


class IMPALA(A2C):
    """Actor-critic with V-trace targets and advantages; one optimizer step per batch.

    Args:
        gamma: discount, in [0, 1].
        learning_rate: optimizer step size. 6e-4: the paper's Atari setting (table G.1).
        value_coef: weight of the value loss. 0.5: the paper's baseline cost.
        entropy_coef: weight of the entropy bonus. 0.01: the paper's Atari setting.
        rho_bar: clip of the importance weights in the TD errors and the advantages. 1: the paper's.
        c_bar: clip of the trace-cutting weights. 1: the paper's.
        grad_clip: global gradient-norm bound, or None. 40: the paper's.
        normalize_advantages: scale the batch's advantages to zero mean and unit standard deviation
            (off in the paper).
        optimizer: "rmsprop" (the paper's) or "adam".
        rmsprop_alpha: RMSProp's decay. 0.99: the paper's.
        rmsprop_epsilon: RMSProp's epsilon. 0.01: the paper's.

    Costs: ``loss``, ``policy_loss``, ``value_loss``, ``entropy`` (batch means).
    """

    records_behaviour = True

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        learning_rate: float = 6e-4,
        value_coef: float = 0.5,
        entropy_coef: float = 0.01,
        rho_bar: float = 1.0,
        c_bar: float = 1.0,
        grad_clip: Optional[float] = 40.0,
        normalize_advantages: bool = False,
        optimizer: str = "rmsprop",
        rmsprop_alpha: float = 0.99,
        rmsprop_epsilon: float = 0.01,
    ) -> None:
        super().__init__(
            model_func,
            gamma=gamma,
            learning_rate=learning_rate,
            value_coef=value_coef,
            entropy_coef=entropy_coef,
            grad_clip=grad_clip,
            normalize_advantages=normalize_advantages,
            optimizer=optimizer,
            rmsprop_alpha=rmsprop_alpha,
            rmsprop_epsilon=rmsprop_epsilon,
        )
        self.rho_bar, self.c_bar = check_clips(rho_bar, c_bar)

    def targets(
        self, dist: Distribution, value: paddle.Tensor, batch: Transition[paddle.Tensor]
    ) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """V-trace's advantages and value targets ``v_t`` (no gradient)."""
        target_log_probs = dist.log_prob(batch.actions["action"])
        return self.vtrace_targets(target_log_probs, value, batch, self.rho_bar, self.c_bar)
