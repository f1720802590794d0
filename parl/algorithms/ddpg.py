"""DDPG (Lillicrap et al., 2016): a deterministic actor trained through a Q critic.

With ``M`` critics (1 for DDPG; TD3 uses 2) and the target copies ``Q'``, ``pi'``:

    y        = r + gamma^k * (1 - next_episode_end) * min_m Q'_m(s', pi'(s'))
    L_critic = sum_m (Q_m(s, a) - y)^2                  (mean over rows, importance-weighted)
    L_actor  = -Q_1(s, pi(s))                           (critic frozen: gradient to the actor only)

``k`` is the env steps each transition spans (1, or up to n with n-step
replay). Both losses are minimized by one optimizer step on their sum; the
targets follow by Polyak averaging. ``predict`` returns ``pi(s)``:
exploration noise is the agent's choice.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import paddle

from parl.algorithms.actor_critic_q import ActorCriticQ
from parl.core.algorithm import Predictor, TensorDict
from parl.core.batch import Transition
from parl.core.model import Model
from parl.layers.compiled import stands_in_for
from parl.models.continuous import ActionFn, DeterministicActorCritic, Observation


class DDPG(ActorCriticQ):
    """Deep deterministic policy gradient over a :class:`~parl.models.continuous.DeterministicActorCritic`.

    Args:
        gamma: discount, in [0, 1].
        tau: Polyak rate of the target actor and critic per sync. 0.005: Fujimoto et al. (2018) and
            Stable-Baselines3 (the paper's 0.001 is slower).
        learning_rate: Adam step size of actor and critic alike (the paper uses 1e-4 for the actor
            and 1e-3 for the critic; Stable-Baselines3 uses 1e-3 for both).
        target_update_interval: optimizer updates between target syncs.
        grad_clip: global gradient-norm bound over all parameters, or None.
    """

    model_class = DeterministicActorCritic
    target_actor = True

    model: DeterministicActorCritic  # checked in ActorCriticQ.__init__
    target_model: DeterministicActorCritic

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        tau: float = 0.005,
        learning_rate: float = 1e-3,
        target_update_interval: int = 1,
        grad_clip: Optional[float] = None,
    ) -> None:
        super().__init__(
            model_func,
            gamma=gamma,
            tau=tau,
            target_update_interval=target_update_interval,
            learning_rate=learning_rate,
            grad_clip=grad_clip,
        )

    def predict(
        self, inputs: TensorDict, states: TensorDict, *, deterministic: bool = False
    ) -> Tuple[TensorDict, TensorDict]:
        return _policy_action(self.model.actor.forward, self.model.observation_picker())(inputs, states, deterministic)

    @stands_in_for(["predict"])
    def compile_predict(self) -> Optional[Predictor]:
        """The same actions over the actor's ``compile_forward()``; None where that is None."""
        forward = self.model.actor.compile_forward()
        return None if forward is None else _policy_action(forward, self.model.observation_picker())

    def next_actions(self, next_obs: Observation) -> paddle.Tensor:
        """Actions of the target policy at the next observations (called without gradient)."""
        return self.target_model.actor.forward(next_obs)

    def updates_actor(self) -> bool:
        """Whether this update includes the actor loss (always, for DDPG)."""
        return True

    def learn(self, batch: Transition[paddle.Tensor]) -> Dict[str, paddle.Tensor]:
        obs, next_obs = self.model.observation(batch.inputs), self.model.observation(batch.next_inputs)
        action = batch.actions["action"]
        with paddle.no_grad():
            next_q = self.target_model.critic.value(next_obs, self.next_actions(next_obs))
            target = self.q_target(next_q.min(axis=0), batch)
        q = self.model.critic.value(obs, action)
        critic_loss, td_error = self.critic_loss(q, target, batch)
        costs = {"critic_loss": critic_loss, "q_mean": q.mean().detach(), "td_error": td_error}
        loss = critic_loss
        if self.updates_actor():
            q_pi = self.model.critic.value(obs, self.model.actor.forward(obs), frozen=True)[0]
            actor_loss = -batch.weighted_mean(q_pi)
            costs["actor_loss"] = actor_loss
            loss = loss + actor_loss
        costs["loss"] = loss
        return costs


def _policy_action(forward: ActionFn, observation: Callable[[TensorDict], Observation]) -> Predictor:
    """DDPG's action: the deterministic actor's output, ``pi(s)`` (``predict`` over ``actor.forward``, the
    compiled predictor over ``actor.compile_forward()``)."""

    def act(inputs: TensorDict, states: TensorDict, deterministic: bool) -> Tuple[TensorDict, TensorDict]:
        return {"action": forward(observation(inputs))}, {}

    return act
