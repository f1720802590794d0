"""GymAgent: the episode loop every gymnasium example shares.

    class NoisyAgent(GymAgent):
        def act(self, inputs, states):               # exploration is the agent's choice
            actions, next_states = super().act(inputs, states)
            ...
            return actions, next_states

The agent feeds each observation as an input dict (:meth:`GymAgent.observation_inputs`: ``{"obs": obs}``
for a Box, one input per key of a Dict, ``obs_0``, ``obs_1``, ... for a Tuple) to the helper of task ``"RL"``, carries
recurrent states through the episode (zero at its start), converts actions
for the environment with :func:`env_action_converter`, stores every
transition and asks the helper to learn after each step. In an environment
that repeats actions (:class:`~parl.utils.action_repeat.ActionRepeat`) a step
of the agent is one action step: it counts the time steps it took. An environment that
took another action than the one it was given says so in its step's info,
``info["action_taken"]`` (as ``env.step`` takes actions), and that action is
stored instead: an RLX client logging its own actions (docs/rlx.md).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

from parl.utils.env_steps import EnvStepsAgent
from parl.utils.observations import ObservationMapper, chosen_mapper, obs_inputs

ArrayDict = Dict[str, np.ndarray]
#: The ``info`` key by which an environment that repeats actions
#: (:class:`~parl.utils.action_repeat.ActionRepeat`) says how many time steps an action step took.
TIME_STEPS = "parl.time_steps"


def env_action_converter(space: Any, name: str = "action") -> Callable[[ArrayDict], Any]:
    """Maps a model's action dict (one sample) to what ``env.step`` takes.

    Discrete spaces get ``int(action[0])``. Box spaces get the action clipped to
    [-1, 1] and scaled linearly to [low, high]: continuous policies act in
    [-1, 1] whatever the environment's bounds.

    Raises:
        ValueError: the space is neither Discrete nor a bounded Box.
    """
    kind = type(space).__name__
    if kind == "Discrete":
        return lambda actions: int(actions[name][0])
    if kind == "Box":
        low, high = np.asarray(space.low, dtype=np.float32), np.asarray(space.high, dtype=np.float32)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError(f"Box action space must be bounded, got low={low}, high={high}")
        half, mid = (high - low) / 2.0, (high + low) / 2.0
        return lambda actions: mid + half * np.clip(actions[name], -1.0, 1.0)
    raise ValueError(f"no action conversion for a {kind} space; give one explicitly")


def model_action_converter(space: Any, name: str = "action") -> Callable[[Any], ArrayDict]:
    """The inverse of :func:`env_action_converter`: an action as ``env.step`` takes it, as the
    model's action dict (one sample). Box actions are scaled back to [-1, 1].

    Raises:
        ValueError: as :func:`env_action_converter`.
    """
    kind = type(space).__name__
    if kind == "Discrete":
        return lambda action: {name: np.array([int(action)], dtype=np.int64)}
    if kind == "Box":
        env_action_converter(space, name)  # refuses an unbounded Box as it does
        low, high = np.asarray(space.low, dtype=np.float32), np.asarray(space.high, dtype=np.float32)
        half, mid = (high - low) / 2.0, (high + low) / 2.0
        inverse = np.divide(1.0, half, out=np.zeros_like(half), where=half > 0)
        return lambda action: {name: np.clip((np.asarray(action, np.float32) - mid) * inverse, -1.0, 1.0)}
    raise ValueError(f"no action conversion for a {kind} space; give one explicitly")


class GymAgent(EnvStepsAgent):
    """Plays gymnasium episodes through the helper of ``task``.

    ``total_steps`` counts the env steps (time steps) of the whole run (restored on resume with
    :meth:`restore_counters`); step-based schedules such as an exploration epsilon read it. With
    action repeat an action step counts as the time steps it took (``info[TIME_STEPS]``), and an
    episode's statistics hold ``action_steps`` beside ``steps``.

    Args:
        env: a gymnasium environment.
        task: the name of the task whose helper acts and learns.
        seed: seeds the first reset and the action space.
        num_games: episodes to play (None: until stopped).
        observation_inputs: maps an observation to the input dict, as a function or its dotted path
            ``package.module.function`` (None: :func:`~parl.utils.observations.observation_mapper` of the
            observation space); a subclass may override :meth:`observation_inputs` instead.
    """

    def __init__(
        self,
        env: Any,
        *,
        task: str = "RL",
        seed: int = 0,
        num_games: Any = None,
        observation_inputs: Union[str, ObservationMapper, None] = None,
    ) -> None:
        super().__init__(env, seed=seed, num_games=num_games)
        self.task = task
        self._to_inputs = chosen_mapper(getattr(env, "observation_space", None), observation_inputs, "GymAgent")
        self.to_env_action = env_action_converter(env.action_space)
        self.to_model_action = model_action_converter(env.action_space)
        env.action_space.seed(seed)

    def observation_inputs(self, obs: Any) -> ArrayDict:
        """The input dict of the observation ``obs`` (of a reset or a step); override to feed derived inputs.

        Raises:
            ValueError: by default, an observation that does not fit a Dict or Tuple space, naming the key.
        """
        return self._to_inputs(obs)

    def act(self, inputs: ArrayDict, states: ArrayDict) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states for one step; override to explore."""
        return self.helpers[self.task].predict(inputs, states)

    def after_step(self, costs: Optional[Dict[str, Any]]) -> None:
        """Called after every env step with what ``helper.learn()`` returned (None: no update);
        override to log."""

    def record(
        self,
        inputs: ArrayDict,
        actions: ArrayDict,
        reward: float,
        next_inputs: ArrayDict,
        terminated: bool,
        truncated: bool,
        states: ArrayDict,
        next_states: ArrayDict,
    ) -> Optional[Dict[str, Any]]:
        """Store one transition with the helper of ``task`` and let it learn; returns what
        ``helper.learn()`` returned. Override to hand the step to other tasks' helpers too."""
        helper = self.helpers[self.task]
        helper.store_data(inputs, actions, reward, next_inputs, terminated, truncated, states, next_states)
        return helper.learn()

    def run_one_episode(self) -> Dict[str, float]:
        helper = self.helpers[self.task]
        # The mapping itself where no subclass overrides the method: one call fewer per step.
        overridden = type(self).observation_inputs is not GymAgent.observation_inputs
        to_inputs = self.observation_inputs if overridden else self._to_inputs
        obs, _ = self.reset_env()
        inputs = to_inputs(obs)
        states = helper.initial_states()
        total, steps, action_steps, repeated, done = 0.0, 0, 0, False, False
        while not done:
            actions, next_states = self.act(inputs, states)
            obs, reward, terminated, truncated, info = self.env.step(self.to_env_action(actions))
            time_steps = 1
            if info:  # most environments' infos are empty: one test a step then
                if "action_taken" in info:
                    actions = {**actions, **self.to_model_action(info["action_taken"])}
                if TIME_STEPS in info:
                    time_steps, repeated = int(info[TIME_STEPS]), True
            next_inputs = to_inputs(obs)
            try:
                costs = self.record(inputs, actions, reward, next_inputs, terminated, truncated, states, next_states)
            finally:
                # Counted once ``record`` has handed the step's segment over: a step budget reached by
                # this count finds that segment queued, and the drain before the stop learns it. Counted
                # also when a stop ends ``record`` parked on a training request: the step was taken.
                self.total_steps += time_steps
            inputs, states = next_inputs, next_states
            total += float(reward)
            steps += time_steps
            action_steps += 1
            done = terminated or truncated
            self.after_step(costs)
        if repeated:
            return {"reward": total, "steps": steps, "action_steps": action_steps}
        return {"reward": total, "steps": steps}


__all__ = ["GymAgent", "TIME_STEPS", "env_action_converter", "model_action_converter", "obs_inputs"]
