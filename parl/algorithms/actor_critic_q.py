"""What DDPG, TD3 and SAC share: Q critics with target copies, the bootstrapped target, the critic loss.

class MyActorCritic(ActorCriticQ):
    def learn(self, batch):
        obs, next_obs = self.model.observation(batch.inputs), self.model.observation(batch.next_inputs)
        action = batch.actions["action"]
        with paddle.no_grad():
            next_action = self.target_model.actor.forward(next_obs)
            next_q = self.target_model.critic.value(next_obs, next_action)       # [M, B, 1]
            target = self.q_target(next_q.min(axis=0), batch)
        critic_loss, td_error = self.critic_loss(self.model.critic.value(obs, action), target, batch)
        q_pi = self.model.critic.value(obs, self.model.actor.forward(obs), frozen=True)
        actor_loss = batch.weighted_mean(-q_pi[0])
        return {"loss": critic_loss + actor_loss, "td_error": td_error, ...}

All parts of the model are trained by one optimizer on the summed losses.
Each loss reaches only its own part: critic targets are computed without
gradient, and actor losses read the critic with ``frozen=True`` (detached
critic weights, gradient only to the action), so the critic's gradient is
exactly that of the critic loss.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Tuple, Type, cast

import numpy as np
import paddle

from parl.algorithms.target import TargetSync
from parl.core.algorithm import Algorithm
from parl.core.batch import Transition
from parl.core.model import Model
from parl.models.continuous import ContinuousActorCritic
from parl.moved_names import DEPRECATED_IN, deprecated
from parl.validation import check_range

#: The arguments ActorCriticQ took before they were class attributes, and what replaced them (docs/api.md).
OLD_ARGUMENTS = "ActorCriticQ(model_class=..., target_actor=...)"
NEW_ATTRIBUTES = "the class attributes ActorCriticQ.model_class and ActorCriticQ.target_actor"


class ActorCriticQ(Algorithm):
    """Base of off-policy actor-critic algorithms over a :class:`ContinuousActorCritic` model.

    Holds ``target_model``, a second model built by ``model_func``, whose
    ``critic`` (and ``actor`` when :attr:`target_actor`) start as copies of the
    online ones and follow them by Polyak averaging every
    ``target_update_interval`` optimizer updates.

    Args:
        gamma: discount, in [0, 1].
        tau: fraction of the online weights blended into the targets per sync.
        target_update_interval: optimizer updates between target syncs.
        model_class, target_actor: deprecated (they were arguments before they were class attributes):
            given, they set the attributes for this object, with a DeprecationWarning.
    """

    #: The model type the subclass needs.
    model_class: Type[ContinuousActorCritic] = ContinuousActorCritic
    #: Whether the actor has a target copy (DDPG, TD3) or not (SAC).
    target_actor: bool = True

    model: ContinuousActorCritic  # checked in __init__
    target_model: ContinuousActorCritic

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float,
        tau: float,
        target_update_interval: int,
        learning_rate: float,
        grad_clip: Optional[float],
        model_class: Optional[Type[ContinuousActorCritic]] = None,
        target_actor: Optional[bool] = None,
    ) -> None:
        if model_class is not None or target_actor is not None:
            deprecated(OLD_ARGUMENTS, NEW_ATTRIBUTES, DEPRECATED_IN, stacklevel=3)  # at the subclass's call
            self.model_class = self.model_class if model_class is None else model_class
            self.target_actor = self.target_actor if target_actor is None else bool(target_actor)
        super().__init__(model_func, learning_rate=learning_rate, grad_clip=grad_clip)
        if not isinstance(self.model, self.model_class):
            raise ValueError(
                f"{type(self).__name__} needs a parl.models.continuous.{self.model_class.__name__}, "
                f"got {type(self.model).__name__}"
            )
        self.gamma = check_range("gamma", gamma, 0.0, 1.0)
        self.target_model = cast(ContinuousActorCritic, model_func())  # of the class checked above
        pairs: List[Tuple[Model, Model]] = [(self.model.critic, self.target_model.critic)]
        if self.target_actor:
            pairs.append((self.model.actor, self.target_model.actor))
        self.targets = TargetSync(pairs, tau=tau, interval=target_update_interval)
        for online, target in pairs:  # models are built when made; a checkpoint's targets are set afterwards
            online.sync_weights_to(target)
        #: Optimizer updates completed (kept by :meth:`after_update`).
        self.completed_updates = 0

    def q_target(self, next_value: paddle.Tensor, batch: Transition[paddle.Tensor]) -> paddle.Tensor:
        """``r + gamma^k * (1 - next_episode_end) * next_value`` of ``batch``'s rows, ``[B, 1]``.

        ``k`` is the env steps each transition spans (``batch.discount``);
        ``next_episode_end`` is 1 only on termination, so truncated episodes bootstrap.
        """
        return batch.rewards["reward"] + batch.discount(self.gamma) * (1.0 - batch.next_episode_end) * next_value

    def critic_loss(
        self, q: paddle.Tensor, target: paddle.Tensor, batch: Transition[paddle.Tensor]
    ) -> Tuple[paddle.Tensor, paddle.Tensor]:
        """The critics' summed squared errors against ``target`` (importance-weighted mean over rows),
        and each row's TD error ``target - mean_m Q_m`` ``[B, 1]`` (no gradient).

        Args:
            q: ``[members, B, 1]`` online critic values of the batch's actions.
            target: ``[B, 1]``, without gradient.
        """
        error = target - q
        loss = batch.weighted_mean((error * error).sum(axis=0))
        return loss, error.mean(axis=0).detach()

    def after_update(self, update_step: int) -> None:
        self.completed_updates = update_step
        self.targets.after_update(update_step)

    def state(self) -> Dict[str, object]:
        """``completed_updates``: the counter TD3's policy delay reads."""
        return {"completed_updates": self.completed_updates}

    def set_state(self, state: Mapping[str, object]) -> None:
        """Restore :meth:`state` output.

        Raises:
            ValueError: an unknown entry, or ``completed_updates`` not a non-negative int.
        """
        unknown = sorted(set(state) - {"completed_updates"})
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown state entries {unknown}; it keeps ['completed_updates']")
        value = state.get("completed_updates", 0)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{type(self).__name__}: completed_updates must be an int >= 0, got {value!r}")
        self.completed_updates = int(value)
