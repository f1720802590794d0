"""What PolicyGradient, A2C and PPO share: acting from an ActorCriticModel and advantages over segments.

class MyPG(ActorCriticBase):
    def learn(self, batch):
        dist, value = self.model.sequence(batch.inputs, batch.states, batch.sequence_lengths)
        adv, returns = self.advantages(value, batch, lam=1.0)
        ...
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import numpy as np
import paddle

from parl.algorithms.returns import gae
from parl.algorithms.value_norm import ValueNormalizer
from parl.algorithms.vtrace import vtrace
from parl.core.algorithm import Algorithm, Predictor, TensorDict
from parl.core.batch import Transition
from parl.core.behaviour import BEHAVIOUR_LOG_PROB
from parl.core.model import Model
from parl.layers.compiled import stands_in_for
from parl.models.actor_critic import ActorCriticModel, StepFn
from parl.validation import check_range


class ActorCriticBase(Algorithm):
    """Base of the on-policy actor-critic algorithms over an :class:`ActorCriticModel`.

    ``predict`` samples from the policy (its mode when deterministic) and
    carries recurrent states; :meth:`advantages` bootstraps each segment's last
    row from ``V(next_inputs)`` unless the episode terminated there.
    """

    model: ActorCriticModel  # checked in __init__
    #: Set by an algorithm whose critic learns standardized targets (PPO's ``value_normalization``):
    #: returns are computed from its de-standardized outputs.
    value_normalizer: Optional[ValueNormalizer] = None

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float,
        learning_rate: float,
        grad_clip: Optional[float],
    ) -> None:
        super().__init__(model_func, learning_rate=learning_rate, grad_clip=grad_clip)
        if not isinstance(self.model, ActorCriticModel):
            raise ValueError(
                f"{type(self).__name__} needs a parl.models.ActorCriticModel, got {type(self.model).__name__}"
            )
        self.gamma = check_range("gamma", gamma, 0.0, 1.0)

    def predict(
        self, inputs: TensorDict, states: TensorDict, *, deterministic: bool = False
    ) -> Tuple[TensorDict, TensorDict]:
        return _from_policy(self.model.step, self.records_behaviour)(inputs, states, deterministic)

    @stands_in_for(["predict"])
    def compile_predict(self) -> Optional[Predictor]:
        """The same actions over the model's ``compile_policy()`` (no value head); None where that is None."""
        policy = self.model.compile_policy()
        return None if policy is None else _from_policy(policy, self.records_behaviour)

    def advantages(
        self, values: paddle.Tensor, batch: Transition[paddle.Tensor], lam: float
    ) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """GAE(``lam``) advantages and value targets (advantage + value) of ``batch``'s segments, both
        ``[B, 1]`` and without gradient; ``values`` are the model's ``V(inputs)`` of its rows.

        ``lam = 1`` gives A2C's n-step returns: rewards to the segment's end plus
        the discounted bootstrap value there.
        """
        assert batch.sequence_lengths is not None  # set in every batch learn is given (Transition.to_tensors)
        rewards, row_values, next_values, ends = self._segment_arrays(values, batch)
        adv = gae(rewards, row_values, next_values, ends, batch.sequence_lengths, self.gamma, lam).reshape(-1, 1)
        return paddle.to_tensor(adv), paddle.to_tensor(adv + row_values.reshape(-1, 1))

    def vtrace_targets(
        self,
        target_log_probs: paddle.Tensor,
        values: paddle.Tensor,
        batch: Transition[paddle.Tensor],
        rho_bar: float,
        c_bar: float,
    ) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """V-trace advantages and value targets ``v_s`` (:func:`~parl.algorithms.vtrace.vtrace`) of
        ``batch``'s segments, both ``[B, 1]`` and without gradient: ``target_log_probs`` are the
        learned policy's ``log pi(a|s)`` of its actions and ``values`` its ``V(inputs)``; the
        behaviour's come with the batch (:data:`~parl.core.behaviour.BEHAVIOUR_LOG_PROB`).

        Raises:
            ValueError: the batch holds no behaviour log-probabilities (its algorithm does not set
                ``records_behaviour``).
        """
        assert batch.sequence_lengths is not None  # set in every batch learn is given (Transition.to_tensors)
        behaviour = batch.actions.get(BEHAVIOUR_LOG_PROB)
        if behaviour is None:
            raise ValueError(
                f"{type(self).__name__}: the batch's actions hold no {BEHAVIOUR_LOG_PROB!r} "
                f"(they hold {sorted(batch.actions)}); the algorithm must set records_behaviour"
            )
        targets = vtrace(
            behaviour.numpy(),
            target_log_probs.detach().numpy(),
            *self._segment_arrays(values, batch),
            batch.sequence_lengths,
            self.gamma,
            rho_bar=rho_bar,
            c_bar=c_bar,
        )
        return paddle.to_tensor(targets.advantages.reshape(-1, 1)), paddle.to_tensor(targets.values.reshape(-1, 1))

    def _segment_arrays(
        self, values: paddle.Tensor, batch: Transition[paddle.Tensor]
    ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rewards, ``V(inputs)``, ``V(next_inputs)`` and episode ends of every row, as numpy,
        without gradient: what returns over segments are computed from. With a
        :attr:`value_normalizer` the critic's outputs are turned back into returns here."""
        with paddle.no_grad():
            _, next_values, _ = self.model.step(batch.next_inputs, batch.next_states)
        rewards, ends = batch.rewards["reward"].numpy(), batch.next_episode_end.numpy()
        row_values, next_row_values = values.detach().numpy(), next_values.numpy()
        if self.value_normalizer is not None:
            row_values = self.value_normalizer.denormalize(row_values)
            next_row_values = self.value_normalizer.denormalize(next_row_values)
        return rewards, row_values, next_row_values, ends


def _from_policy(step: StepFn, record_behaviour: bool) -> Predictor:
    """The actions of ``step``'s policy: its mode when deterministic, else a sample, with the next states
    (``predict`` over ``model.step``, the compiled predictor over ``model.compile_policy()``);
    ``record_behaviour``: also the action's log-probability as :data:`~parl.core.behaviour.BEHAVIOUR_LOG_PROB`."""

    def act(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
        dist, _, next_states = step(inputs, states)
        return {"action": dist.mode() if deterministic else dist.sample()}, next_states

    if not record_behaviour:
        return act

    def act_and_record(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
        dist, _, next_states = step(inputs, states)
        action = dist.mode() if deterministic else dist.sample()
        return {"action": action, BEHAVIOUR_LOG_PROB: dist.log_prob(action)}, next_states

    return act_and_record
