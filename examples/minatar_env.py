"""MinAtar's games (Young and Tian, 2019) as gymnasium environments: the environment of
examples/configs/dqn_minatar.yaml.

    parl train examples/configs/dqn_minatar.yaml        # DQN on MinAtar Breakout from its 10x10 frames (docs/atari.md)

MinAtar (``pip install -c constraints.txt -e ".[minatar]"``) plays Atari-like games on a 10x10
grid with one binary channel per kind of object (Breakout: paddle, ball, trail, bricks); its
``minatar.Environment`` has an interface of its own, which :class:`MinAtarEnv` turns into
gymnasium's: observations are uint8 arrays of shape [channels, 10, 10] holding 0 and 1 (channels
first, as ``parl.models.MinAtarQModel`` and ``parl.layers.conv2d`` read them), and the actions are
the game's minimal action set (Breakout: no-op, left, right).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import TimeLimit
from minatar import Environment

#: The games MinAtar ships.
GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


class MinAtarEnv(gym.Env):
    """One MinAtar game, with gymnasium's ``reset`` and ``step``.

    Args:
        game: one of :data:`GAMES`.
        sticky_action_prob: probability that the previous action is repeated instead (MinAtar's
            default, 0.1, makes every episode stochastic).
        difficulty_ramping: the game speeds up as it goes (MinAtar's default).
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, game: str = "breakout", sticky_action_prob: float = 0.1, difficulty_ramping: bool = True):
        if game not in GAMES:
            raise ValueError(f"game must be one of {GAMES}, got {game!r}")
        if not 0.0 <= sticky_action_prob <= 1.0:
            raise ValueError(f"sticky_action_prob must be in [0, 1], got {sticky_action_prob!r}")
        self.game = Environment(game, sticky_action_prob=sticky_action_prob, difficulty_ramping=difficulty_ramping)
        self._actions = list(self.game.minimal_action_set())
        rows, cols, channels = self.game.state_shape()
        self.observation_space = gym.spaces.Box(0, 1, shape=(channels, rows, cols), dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(len(self._actions))

    def _observation(self) -> np.ndarray:
        return np.ascontiguousarray(self.game.state().transpose(2, 0, 1), dtype=np.uint8)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            # The game's own generator (ball start, sticky actions), seeded from gymnasium's, which takes
            # any seed; numpy's RandomState takes none above 2**32 - 1.
            self.game.seed(int(self.np_random.integers(2**32)))
        self.game.reset()
        return self._observation(), {}

    def step(self, action: int) -> Tuple[np.ndarray, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in [0, {self.action_space.n}), got {action!r}")
        reward, terminated = self.game.act(self._actions[int(action)])
        return self._observation(), float(reward), bool(terminated), False, {}


def make_minatar_env(
    game: str = "breakout",
    *,
    sticky_action_prob: float = 0.1,
    difficulty_ramping: bool = True,
    max_episode_steps: Optional[int] = None,
) -> gym.Env:
    """A :class:`MinAtarEnv`, its episodes cut at ``max_episode_steps`` (None: only the game ends them)."""
    env: gym.Env = MinAtarEnv(game, sticky_action_prob=sticky_action_prob, difficulty_ramping=difficulty_ramping)
    if max_episode_steps is not None:
        env = TimeLimit(env, max_episode_steps=max_episode_steps)
    return env
