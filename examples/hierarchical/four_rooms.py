"""Four rooms: a grid world whose only reward waits in the far room.

    env = make_env(room_size=7, max_steps=200)
    obs, info = env.reset(seed=0)            # obs: (row, col) scaled to [0, 1], then 4 wall bits; info["position"]
    obs, reward, terminated, truncated, info = env.step(3)     # 0 up, 1 down, 2 left, 3 right

The layout of Sutton, Precup and Singh (1999), with square rooms of
``room_size`` x ``room_size`` cells: walls around the grid and through its
middle, and one doorway in each of the four inner walls. An episode starts at
a random cell of the top-left room; reaching the goal, the far corner of the
bottom-right room, gives reward 1 and terminates it; every other step gives 0.
After ``max_steps`` steps the episode is truncated. A move into a wall leaves
the position unchanged. The observation is the position, scaled to [0, 1],
then one bit per move (up, down, left, right) that is 1 where a wall blocks
it: what a robot's bump sensors would tell. Pure numpy: a step costs a few
microseconds.

``landmarks`` (the doorways, then the goal, as observations) are the
subgoals the hierarchical robot chooses among (examples/hierarchical/hierarchical_agent.py).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

#: Row and column change of each action: up, down, left, right.
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))

Cell = Tuple[int, int]


def four_rooms_layout(room_size: int) -> Tuple[np.ndarray, List[Cell]]:
    """Walls (bool ``[size, size]``, ``size = 2 * room_size + 3``) and the four doorways.

    The doorways sit in the middle of each inner wall: top-left/top-right,
    top-right/bottom-right, bottom-left/bottom-right, top-left/bottom-left
    (clockwise from the top).
    """
    size = 2 * room_size + 3
    middle = room_size + 1  # index of the inner walls
    walls = np.zeros((size, size), dtype=bool)
    walls[[0, -1], :] = walls[:, [0, -1]] = True
    walls[middle, :] = walls[:, middle] = True
    near, far = 1 + room_size // 2, middle + 1 + room_size // 2  # centres of the first and second room
    doorways = [(near, middle), (middle, far), (far, middle), (middle, near)]
    for row, col in doorways:
        walls[row, col] = False
    return walls, doorways


class FourRooms(gym.Env):
    """Sutton's four rooms with a sparse reward at the far corner (see the module docstring).

    Args:
        room_size: cells along each side of a room (>= 2). 7 gives a 17 x 17 grid.
        max_steps: steps before an episode is truncated (>= 1).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, *, room_size: int = 7, max_steps: int = 200) -> None:
        if not isinstance(room_size, int) or isinstance(room_size, bool) or room_size < 2:
            raise ValueError(f"room_size must be an integer >= 2, got {room_size!r}")
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ValueError(f"max_steps must be an integer >= 1, got {max_steps!r}")
        self.room_size = room_size
        self.max_steps = max_steps
        self.walls, self.doorways = four_rooms_layout(room_size)
        self.size = self.walls.shape[0]
        self.goal: Cell = (self.size - 2, self.size - 2)
        self.start_cells: List[Cell] = [(r, c) for r in range(1, room_size + 1) for c in range(1, room_size + 1)]
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2 + len(MOVES),), dtype=np.float32)
        self.action_space = spaces.Discrete(len(MOVES))
        self.position: Optional[Cell] = None
        self.steps = 0

    def observation(self, cell: Cell) -> np.ndarray:
        """The observation at ``cell``: its row and column divided by ``size - 1``, then the wall bits."""
        walls = [self.walls[cell[0] + dr, cell[1] + dc] for dr, dc in MOVES]
        return np.array([cell[0] / (self.size - 1), cell[1] / (self.size - 1), *walls], dtype=np.float32)

    @property
    def landmarks(self) -> List[np.ndarray]:
        """Observations of the doorways, then of the goal."""
        return [self.observation(cell) for cell in self.doorways + [self.goal]]

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        self.position = self.start_cells[int(self.np_random.integers(len(self.start_cells)))]
        self.steps = 0
        return self.observation(self.position), {"position": self.position}

    def step(self, action: Any):
        if self.position is None:
            raise RuntimeError("FourRooms.step() called before reset()")
        index = int(action)
        if not 0 <= index < len(MOVES):
            raise ValueError(f"action must be in [0, {len(MOVES) - 1}], got {action!r}")
        row, col = self.position[0] + MOVES[index][0], self.position[1] + MOVES[index][1]
        if not self.walls[row, col]:
            self.position = (row, col)
        self.steps += 1
        terminated = self.position == self.goal
        truncated = not terminated and self.steps >= self.max_steps
        reward = 1.0 if terminated else 0.0
        return self.observation(self.position), reward, terminated, truncated, {"position": self.position}

    def render(self) -> str:
        """The grid as text: ``#`` wall, ``A`` the position, ``G`` the goal, ``.`` free."""
        rows = []
        for r in range(self.size):
            line = []
            for c in range(self.size):
                if (r, c) == self.position:
                    line.append("A")
                elif (r, c) == self.goal:
                    line.append("G")
                else:
                    line.append("#" if self.walls[r, c] else ".")
            rows.append("".join(line))
        return "\n".join(rows)


def make_env(room_size: int = 7, max_steps: int = 200) -> FourRooms:
    """A :class:`FourRooms` environment (the factory named in the robot configs)."""
    return FourRooms(room_size=room_size, max_steps=max_steps)
