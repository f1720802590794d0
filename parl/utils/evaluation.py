"""Greedy evaluation of a ComputationTask on fresh environments, outside any training."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

import numpy as np

from parl.framework.computation_task import ComputationTask
from parl.framework.validation import check_int
from parl.utils.gym_agent import env_action_converter, obs_inputs


def evaluate(
    task: ComputationTask,
    make_env: Callable[[], Any],
    episodes: int,
    seed: int,
    to_inputs: Callable[[Any], Dict[str, np.ndarray]] = obs_inputs,
    to_env_action: Optional[Callable[[Dict[str, np.ndarray]], Any]] = None,
    max_steps: Optional[int] = None,
) -> List[float]:
    """Returns of ``episodes`` episodes played with ``task.predict(..., deterministic=True)``:
    the greedy or mean action of the policy.

    Episode ``i`` resets its environment with seed ``seed + i``. Recurrent
    states start at zero and are carried through each episode. Actions are
    converted by :func:`~parl.utils.gym_agent.env_action_converter` unless
    ``to_env_action`` is given.
    """
    check_int("episodes", episodes, 1)
    env = make_env()
    if to_env_action is None:
        to_env_action = env_action_converter(env.action_space)
    returns = []
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            states = task.initial_states(1)
            total, steps, done = 0.0, 0, False
            while not done and (max_steps is None or steps < max_steps):
                inputs = {k: v[None] for k, v in to_inputs(obs).items()}
                actions, states = task.predict(inputs, states, deterministic=True)
                obs, reward, terminated, truncated, _ = env.step(to_env_action({k: v[0] for k, v in actions.items()}))
                total += float(reward)
                steps += 1
                done = terminated or truncated
            returns.append(total)
    finally:
        env.close()
    return returns
