"""A2C: the synchronous form of A3C (Mnih et al., 2016).

Each agent plays ``sample_interval`` steps (its :class:`~parl.OnPolicyHelper`
sends them as one time-ordered segment, sooner when the episode ends); the
wrapper joins the segments of several agents into one batch and takes one
optimizer step on

    loss = -mean(log pi(a_t | s_t) * A_t) + value_coef * mean((R_t - V(s_t))^2) - entropy_coef * mean(H(pi(. | s_t)))
    R_t  = r_t + gamma * r_{t+1} + ... + gamma^(k-1) * r_{t+k-1} + gamma^k * V(s_{t+k})
    A_t  = R_t - V(s_t)

where ``s_{t+k}`` is the input after the segment's last step (no bootstrap
after a termination, a bootstrap after a truncation). With ``gae_lambda < 1``
``A_t`` is GAE(lambda) (Schulman et al., 2016) and ``R_t = A_t + V(s_t)``.

The loss is :class:`~parl.algorithms.policy_gradient.PolicyGradient`'s; A2C
differs in its segments (``sample_interval`` steps, not whole episodes), its
optional lambda, and its optimizer: RMSProp by default, as in the paper, with
the gradient norm clipped at 0.5 (OpenAI Baselines' A2C). The model's head
decides the action space: softmax for discrete actions, a diagonal Gaussian
for continuous ones; a recurrent model
(:class:`~parl.models.LSTMActorCritic`) is unrolled over each segment from the
state stored with its first step.
"""

from __future__ import annotations

from typing import Callable, List, Optional

import paddle

from parl.algorithms.policy_gradient import PolicyGradient
from parl.core.model import Model
from parl.layers.optimizer import Adam, Optimizer, RMSProp
from parl.validation import check_choice, check_positive, check_range


class A2C(PolicyGradient):
    """Advantage actor-critic over segments of ``sample_interval`` steps; one optimizer step per batch.

    Args:
        gamma: discount, in [0, 1].
        learning_rate: optimizer step size. 7e-4: the A2C default of OpenAI Baselines and SB3.
        gae_lambda: GAE lambda; 1.0 gives the paper's n-step returns.
        value_coef: weight of the value loss. 0.5: Baselines and SB3.
        entropy_coef: weight of the entropy bonus. 0.01: the paper and Baselines.
        grad_clip: global gradient-norm bound, or None. 0.5: Baselines and SB3.
        normalize_advantages: scale the batch's advantages to zero mean and unit standard deviation
            (off in the paper).
        optimizer: "rmsprop" (the paper's) or "adam".
        rmsprop_alpha: RMSProp's decay of the mean squared gradient. 0.99: Baselines and SB3.
        rmsprop_epsilon: RMSProp's epsilon (inside the square root). 1e-5: Baselines and SB3.

    Costs: ``loss``, ``policy_loss``, ``value_loss``, ``entropy`` (batch means).
    """

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        learning_rate: float = 7e-4,
        gae_lambda: float = 1.0,
        value_coef: float = 0.5,
        entropy_coef: float = 0.01,
        grad_clip: Optional[float] = 0.5,
        normalize_advantages: bool = False,
        optimizer: str = "rmsprop",
        rmsprop_alpha: float = 0.99,
        rmsprop_epsilon: float = 1e-5,
    ) -> None:
        super().__init__(
            model_func,
            gamma=gamma,
            learning_rate=learning_rate,
            value_coef=value_coef,
            entropy_coef=entropy_coef,
            grad_clip=grad_clip,
            normalize_advantages=normalize_advantages,
        )
        self.lam = check_range("gae_lambda", gae_lambda, 0.0, 1.0)
        self.optimizer = check_choice("optimizer", optimizer, ("rmsprop", "adam"))
        self.rmsprop_alpha = check_range("rmsprop_alpha", rmsprop_alpha, 0.0, 1.0)
        self.rmsprop_epsilon = check_positive("rmsprop_epsilon", rmsprop_epsilon)

    def make_optimizer(self, parameters: List[paddle.Tensor]) -> Optimizer:
        """:class:`~parl.layers.optimizer.RMSProp` or :class:`~parl.layers.optimizer.Adam`, with the
        gradient-norm clipping of ``grad_clip``."""
        if self.optimizer == "adam":
            return Adam(parameters, learning_rate=self.learning_rate, grad_clip=self.grad_clip)
        return RMSProp(
            parameters,
            learning_rate=self.learning_rate,
            alpha=self.rmsprop_alpha,
            epsilon=self.rmsprop_epsilon,
            grad_clip=self.grad_clip,
        )
