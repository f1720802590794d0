"""Reward prediction: an auxiliary task that learns what each action leads to at the next step.

The model scores every discrete action ``a`` from the input ``s``: the reward
``r(s, a)`` and the logit of ``p(end | s, a)``, the probability that the
episode terminates after the step. On each batch of the agent's own steps

    loss = reward_coef * mean((r(s_t, a_t) - r_t)^2) + end_coef * mean(BCE(logit(s_t, a_t), end_{t+1}))

where ``end_{t+1}`` is 1 only where the episode terminated (a time-limit
truncation is not predictable from the input, so it counts as no end). It is
the reward-prediction task of UNREAL (Jaderberg et al., 2016, "Reinforcement
Learning with Unsupervised Auxiliary Tasks"), as a regression of the reward
plus a termination classifier instead of UNREAL's three reward classes, and
learned from the agent's recent steps rather than a rebalanced replay buffer.

The task is useful through what it shares: give its model the trunk of an RL
task's model (``parl.Manager(..., shared=...)``) and its gradient shapes the
RL task's features. Each task's optimizer updates the shared parameters with
its own state; with Adam or RMSProp a step's size is set by the learning rate,
not by the loss scale, so ``learning_rate`` sets how hard this task pulls on
the shared trunk, while ``reward_coef`` and ``end_coef`` only weigh its two
terms against each other.

The model answers one call:

    reward, end_logit = model.outcomes(inputs)       # both [B, num_actions]
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import paddle
import paddle.nn.functional as F

from parl.core.algorithm import Algorithm, TensorDict
from parl.core.batch import Transition
from parl.core.model import Model
from parl.validation import check_range


class RewardPrediction(Algorithm):
    """Regression of each step's reward and classification of its termination, per action taken.

    Args:
        learning_rate: Adam step size; how hard this task pulls on parameters it shares. 1e-3: Adam's default
            (Kingma & Ba, 2015).
        reward_coef: weight of the reward's squared error.
        end_coef: weight of the termination's binary cross-entropy.
        grad_clip: global gradient-norm bound, or None.

    ``predict`` gives, for every action, the predicted ``reward`` and ``end_probability``
    (``[B, num_actions]`` each); it samples nothing, so ``deterministic`` changes nothing.

    Costs: ``loss``, ``reward_loss`` (mean squared error), ``end_loss`` (binary cross-entropy),
    ``end_rate`` (fraction of the batch's steps that terminated).
    """

    #: The model of ``model_func``: any Model with ``outcomes(inputs) -> (reward, end_logit)`` (checked in __init__).
    model: Any

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        learning_rate: float = 1e-3,
        reward_coef: float = 1.0,
        end_coef: float = 1.0,
        grad_clip: Optional[float] = None,
    ) -> None:
        super().__init__(model_func, learning_rate=learning_rate, grad_clip=grad_clip)
        if not callable(getattr(self.model, "outcomes", None)):
            raise ValueError(
                f"RewardPrediction needs a model with outcomes(inputs) -> (reward, end_logit), "
                f"got {type(self.model).__name__}"
            )
        self.reward_coef = check_range("reward_coef", reward_coef, 0.0, float("inf"))
        self.end_coef = check_range("end_coef", end_coef, 0.0, float("inf"))

    def predict(
        self, inputs: TensorDict, states: TensorDict, *, deterministic: bool = False
    ) -> Tuple[TensorDict, TensorDict]:
        reward, end_logit = self.model.outcomes(inputs)
        return {"reward": reward, "end_probability": F.sigmoid(end_logit)}, {}

    def learn(self, batch: Transition[paddle.Tensor]) -> Dict[str, paddle.Tensor]:
        reward, end_logit = self.model.outcomes(batch.inputs)
        taken = batch.actions["action"].reshape([-1, 1])
        predicted_reward = paddle.take_along_axis(reward, taken, axis=1)
        predicted_end = paddle.take_along_axis(end_logit, taken, axis=1)
        ended = batch.next_episode_end.reshape([-1, 1]).astype(predicted_end.dtype)
        reward_loss = ((predicted_reward - batch.rewards["reward"].reshape([-1, 1])) ** 2).mean()
        end_loss = F.binary_cross_entropy_with_logits(predicted_end, ended)
        loss = self.reward_coef * reward_loss + self.end_coef * end_loss
        return {
            "loss": loss,
            "reward_loss": reward_loss.detach(),
            "end_loss": end_loss.detach(),
            "end_rate": ended.mean(),
        }
