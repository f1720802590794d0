"""DQN (Mnih et al., 2015) with Double-DQN targets (van Hasselt et al., 2016).

The model implements ``value(inputs) -> Q`` of shape ``[batch, num_actions]``
(a plain or a dueling head, DQN does not care) and declares one int64 action
spec of shape ``[1]``. The target network is a second model built by
``model_func``, so it lines up with the online model by structure.

    target = r + gamma^k * (1 - next_episode_end) * Q_target(s', argmax_a Q_online(s', a))

where ``k`` is the number of env steps the transition spans (1, or up to n
with n-step replay). With prioritized replay each row's loss is weighted by
its importance weight, and ``td_error`` (one per row) becomes its new priority.

Exploration (epsilon-greedy) is the agent's choice, so ``predict`` is greedy.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import paddle
import paddle.nn.functional as F

from parl.algorithms.target import TargetSync
from parl.core.algorithm import Algorithm, Predictor, TensorDict
from parl.core.batch import Transition
from parl.core.model import Model
from parl.layers.compiled import stands_in_for
from parl.validation import check_choice, check_range


class DQN(Algorithm):
    """Deep Q-learning with a target network; Double-DQN targets by default.

    Args:
        gamma: discount, in [0, 1].
        learning_rate: Adam step size. 1e-3: measured on CartPole-v1.
        target_update_interval: optimizer updates between target syncs.
        tau: fraction of the online weights blended into the target at each
            sync; 1.0 is the paper's hard copy.
        double_q: pick next actions with the online network (Double DQN).
        loss: "huber" (the paper's clipped error) or "mse".
        grad_clip: global gradient-norm bound, or None.
    """

    #: The models of ``model_func``: any Model with ``value(inputs) -> Q [B, num_actions]``.
    model: Any
    target_model: Any

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        learning_rate: float = 1e-3,
        target_update_interval: int = 100,
        tau: float = 1.0,
        double_q: bool = True,
        loss: str = "huber",
        grad_clip: Optional[float] = None,
    ) -> None:
        super().__init__(model_func, learning_rate=learning_rate, grad_clip=grad_clip)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0)
        self.double_q = bool(double_q)
        self.loss = check_choice("loss", loss, ("huber", "mse"))
        self.target_model = model_func()
        self.targets = TargetSync([(self.model, self.target_model)], tau=tau, interval=target_update_interval)

    def predict(
        self, inputs: TensorDict, states: TensorDict, *, deterministic: bool = False
    ) -> Tuple[TensorDict, TensorDict]:
        return _greedy(self.model.value)(inputs, states, deterministic)

    def build_layers(self, inputs: TensorDict, states: TensorDict) -> None:
        """The online model's layers by a prediction, then the target's as its copy (as the first update would)."""
        super().build_layers(inputs, states)
        self.targets.initialize()

    @stands_in_for(["predict"])
    def compile_predict(self) -> Optional[Predictor]:
        """The greedy action over the model's ``compile_value()``; None for a model without one (or
        whose ``compile_value`` returns None)."""
        compile_value = getattr(self.model, "compile_value", None)
        value = compile_value() if compile_value is not None else None
        return None if value is None else _greedy(value)

    def learn(self, batch: Transition[paddle.Tensor]) -> Dict[str, paddle.Tensor]:
        inputs, next_inputs, action = batch.inputs, batch.next_inputs, batch.actions["action"]
        q = self.model.value(inputs)
        if self.double_q:
            # The next actions need no gradient: a pass of its own spares the backward pass the rows of
            # next_inputs (a joined pass over both halves doubles the backward cost of a conv network).
            with paddle.no_grad():
                next_action = paddle.argmax(self.model.value(next_inputs), axis=-1, keepdim=True)
        q_taken = paddle.take_along_axis(q, action, axis=1)
        self.targets.initialize()  # the online layers are built by now
        with paddle.no_grad():
            next_q_target = self.target_model.value(next_inputs)
            if not self.double_q:
                next_action = paddle.argmax(next_q_target, axis=-1, keepdim=True)
            next_value = paddle.take_along_axis(next_q_target, next_action, axis=1)
            target = batch.rewards["reward"] + batch.discount(self.gamma) * (1.0 - batch.next_episode_end) * next_value
        if self.loss == "huber":
            per_row = F.smooth_l1_loss(q_taken, target, reduction="none")
        else:
            per_row = F.mse_loss(q_taken, target, reduction="none")
        loss = batch.weighted_mean(per_row)
        return {"loss": loss, "q_mean": q_taken.mean().detach(), "td_error": (target - q_taken).detach()}

    def after_update(self, update_step: int) -> None:
        self.targets.after_update(update_step)


def _greedy(value: Callable[[TensorDict], paddle.Tensor]) -> Predictor:
    """DQN's action: the argmax of ``value``'s Q-values (``predict`` over ``model.value``, the compiled
    predictor over ``model.compile_value()``)."""

    def act(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
        return {"action": paddle.argmax(value(inputs), axis=-1, keepdim=True)}, {}

    return act
