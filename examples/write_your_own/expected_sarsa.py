"""Expected SARSA (van Seijen, van Hasselt, Whiteson and Wiering, 2009) over a Q-network.

The algorithm of docs/algorithms/write_your_own.md. Each transition's target is the
expected value of the next state under the policy the algorithm acts with, an
epsilon-greedy policy over the Q-values:

    target = r + gamma^k * (1 - terminated) * sum_a pi(a | s') Q(s', a)
    pi(a | s) = (1 - epsilon) * [a == argmax Q(s, .)] + epsilon / num_actions
"""

from typing import Callable, Dict, Tuple

import paddle
import paddle.nn.functional as F

import parl

Tensors = Dict[str, paddle.Tensor]


class ExpectedSarsa(parl.Algorithm):
    """Expected SARSA over a model with ``value(inputs) -> Q`` of shape [batch, num_actions].

    Args:
        gamma: discount, in [0, 1].
        epsilon: chance of a uniformly random action when acting (not deterministically), in [0, 1].
        learning_rate: Adam step size.
    """

    def __init__(
        self,
        model_func: Callable[[], parl.Model],
        *,
        gamma: float = 0.99,
        epsilon: float = 0.1,
        learning_rate: float = 1e-3,
    ) -> None:
        super().__init__(model_func, learning_rate=learning_rate)  # builds self.model, checks learning_rate
        for name, value in (("gamma", gamma), ("epsilon", epsilon)):
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
        self.gamma, self.epsilon = float(gamma), float(epsilon)

    def policy(self, q: paddle.Tensor) -> paddle.Tensor:
        """The epsilon-greedy action probabilities [batch, num_actions] of Q-values ``q``."""
        num_actions = q.shape[-1]
        greedy = F.one_hot(paddle.argmax(q, axis=-1), num_actions)
        return (1.0 - self.epsilon) * greedy + self.epsilon / num_actions

    def predict(self, inputs: Tensors, states: Tensors, *, deterministic: bool = False) -> Tuple[Tensors, Tensors]:
        q = self.model.value(inputs)
        if deterministic:
            action = paddle.argmax(q, axis=-1, keepdim=True)
        else:
            action = paddle.multinomial(self.policy(q), num_samples=1)
        return {"action": action}, {}  # by action spec name; no recurrent state

    def learn(self, batch: parl.Transition) -> Tensors:
        q = self.model.value(batch.inputs)
        q_taken = paddle.take_along_axis(q, batch.actions["action"], axis=1)
        with paddle.no_grad():
            next_q = self.model.value(batch.next_inputs)
            expected = (self.policy(next_q) * next_q).sum(axis=-1, keepdim=True)
            not_over = 1.0 - batch.next_episode_end  # 0 only where the task terminated
            target = batch.rewards["reward"] + batch.discount(self.gamma) * not_over * expected
        td_error = target - q_taken
        return {
            "loss": batch.weighted_mean(td_error * td_error),  # what the task's optimizer minimizes
            "q_mean": q_taken.mean().detach(),
            "td_error": td_error.detach(),  # per row: prioritized replay's new priorities
        }
