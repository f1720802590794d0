"""ActionRepeat: one action step of K time steps (the design's action step vs time step).

    env = ActionRepeat(gymnasium.make("CartPole-v1"), 4)
    obs, reward, terminated, truncated, info = env.step(action)   # 4 env steps, or fewer at the end
    info[TIME_STEPS]                                               # how many: 4

A robot config asks for it with ``env.action_repeat: K`` (docs/configs.md).
Each step of the wrapper sends the same action to the environment K times,
stopping early when the episode ends; the reward is the sum of the K rewards,
``terminated`` and ``truncated`` are those of the last time step, the
observation is the last one (or, with ``observation="max_of_last_two"``, the
element-wise maximum of the last two: DQN's remedy for Atari sprites that
flicker between frames, Mnih et al., 2015), and ``info`` is the last time
step's, with :data:`TIME_STEPS` added. :class:`~parl.utils.GymAgent` counts
``total_steps`` (the run's env steps) in time steps by it, and reports both
counts for each episode (``steps`` and ``action_steps``).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, SupportsFloat, Tuple

import gymnasium
import numpy as np

from parl.utils.gym_agent import TIME_STEPS
from parl.validation import check_choice, check_int

__all__ = ["OBSERVATIONS", "TIME_STEPS", "ActionRepeat"]
#: What an action step observes: the last observation, or the element-wise maximum of the last two.
OBSERVATIONS = ("last", "max_of_last_two")


class ActionRepeat(gymnasium.Wrapper):
    """Repeats each action ``repeat`` times (see the module docstring).

    Args:
        env: a gymnasium environment.
        repeat: time steps per action step, K >= 1.
        observation: ``"last"`` or ``"max_of_last_two"`` (array observations only).

    Raises:
        ValueError: ``repeat`` is not an integer >= 1, or ``observation`` is not one of :data:`OBSERVATIONS`.
    """

    def __init__(self, env: gymnasium.Env, repeat: int, *, observation: str = "last") -> None:
        super().__init__(env)
        self.repeat = check_int("repeat", repeat, 1)
        self.observation = check_choice("observation", observation, OBSERVATIONS)

    def step(self, action: Any) -> Tuple[Any, SupportsFloat, bool, bool, Dict[str, Any]]:
        """One action step: up to ``repeat`` env steps with ``action``; ``info[TIME_STEPS]`` says how many."""
        total = 0.0
        previous: Optional[np.ndarray] = None
        obs: Any = None
        terminated = truncated = False
        info: Dict[str, Any] = {}
        taken = 0
        pool = self.observation == "max_of_last_two"
        while taken < self.repeat and not (terminated or truncated):
            previous = np.array(obs, copy=True) if pool and obs is not None else None  # the env may reuse its buffer
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            taken += 1
        if previous is not None:
            obs = np.maximum(previous, obs)
        return obs, total, terminated, truncated, {**info, TIME_STEPS: taken}
