"""A small grid whose observation is a Dict of an image and a vector: the environment of
examples/configs/dqn_dict_obs.yaml and ppo_dict_obs.yaml.

    parl train examples/configs/dqn_dict_obs.yaml        # DQN with parl.models.MultiInputQModel (docs/observations.md)

Importing this module registers ``DictGrid-v0`` with gymnasium, so a config names it
``env.id: dict_grid_env:DictGrid-v0`` (gymnasium imports the module named before the colon).

The agent starts on a random cell of a ``size`` x ``size`` grid with two goals in opposite corners.
It sees the grid as a uint8 image of shape [size, size, 1] (channels last: 255 where it stands, 128 on
both goals, 0 elsewhere) and a float32 vector ``goal`` of shape [2], one-hot, saying which of the two
corners pays. Reaching it gives +1, reaching the other -1 (both end the episode); every other step
costs 0.02, and an episode is cut after ``max_steps``. The image alone cannot tell the goals apart and
the vector alone does not say where the agent is: both inputs are needed to act well (a policy that
ignores the vector returns about 0 at best). With ``continuous=True`` the action is a Box of shape
[2] (a move along the larger of its two components: row, column), for SAC and TD3; with
``channels_first=True`` the image is [1, size, size].
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

#: The id this module registers.
ENV_ID = "DictGrid-v0"
#: The moves of the four actions: up, down, left, right.
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))
AGENT, GOAL = 255, 128
STEP_COST = 0.02


class DictGridEnv(gym.Env):
    """Reach the goal corner the vector names; the observation is ``{"image": uint8, "goal": float32}``.

    Args:
        size: the grid's side, at least 3.
        max_steps: steps after which an episode is truncated.
        continuous: actions are a Box of shape [2] in [-1, 1] instead of Discrete(4).
        channels_first: the image is [1, size, size] instead of [size, size, 1].
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(
        self, size: int = 5, max_steps: int = 20, continuous: bool = False, channels_first: bool = False
    ) -> None:
        if not isinstance(size, int) or size < 3:
            raise ValueError(f"size must be an integer >= 3, got {size!r}")
        if not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")
        self.size, self.max_steps, self.continuous = size, max_steps, bool(continuous)
        self.image_shape = (1, size, size) if channels_first else (size, size, 1)
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, self.image_shape, dtype=np.uint8),
                "goal": gym.spaces.Box(0.0, 1.0, (2,), dtype=np.float32),
            }
        )
        self.action_space: gym.Space = (
            gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32) if self.continuous else gym.spaces.Discrete(len(MOVES))
        )
        self.corners = ((0, 0), (size - 1, size - 1))
        self.position = (0, 0)
        self.target = 0
        self.steps = 0

    def _observation(self) -> Dict[str, np.ndarray]:
        grid = np.zeros((self.size, self.size), dtype=np.uint8)
        for row, col in self.corners:
            grid[row, col] = GOAL
        grid[self.position] = AGENT
        image = grid.reshape(self.image_shape)
        goal = np.zeros(2, dtype=np.float32)
        goal[self.target] = 1.0
        return {"image": image, "goal": goal}

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[dict] = None
    ) -> Tuple[Dict[str, np.ndarray], dict]:
        super().reset(seed=seed)
        self.target = int(self.np_random.integers(2))
        while True:
            self.position = tuple(int(v) for v in self.np_random.integers(self.size, size=2))
            if self.position not in self.corners:
                break
        self.steps = 0
        return self._observation(), {}

    def _move(self, action: Any) -> Tuple[int, int]:
        if not self.continuous:
            return MOVES[int(action)]
        row, col = (float(v) for v in np.asarray(action, dtype=np.float32))
        if abs(row) >= abs(col):
            return (1, 0) if row > 0 else (-1, 0)
        return (0, 1) if col > 0 else (0, -1)

    def step(self, action: Any) -> Tuple[Dict[str, np.ndarray], float, bool, bool, dict]:
        move = self._move(action)
        row = min(max(self.position[0] + move[0], 0), self.size - 1)
        col = min(max(self.position[1] + move[1], 0), self.size - 1)
        self.position = (row, col)
        self.steps += 1
        if self.position in self.corners:
            reward = 1.0 if self.position == self.corners[self.target] else -1.0
            return self._observation(), reward, True, False, {}
        return self._observation(), -STEP_COST, False, self.steps >= self.max_steps, {}


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=DictGridEnv)
