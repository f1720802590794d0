"""The Atari environment of examples/configs/dqn_atari.yaml: an ALE game as DQN sees it.

    parl train examples/configs/dqn_atari.yaml                   # DQN on Pong, full scale (docs/atari.md)
    parl train examples/configs/dqn_atari.yaml -o train.max_env_steps=2000 ...   # the short run of docs/atari.md

The config names :func:`make_atari_env` as its environment factory; the
agent (``parl.utils.EpsilonGreedyAgent``), the network
(``parl.models.AtariQModel``), DQN and the replay helper are parl's own, and
``parl train`` runs them, with its metrics and checkpoints under ``log_dir``.
"""

from __future__ import annotations

from typing import Optional

import ale_py
import gymnasium as gym
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, ResizeObservation, TimeLimit

from parl.utils.action_repeat import ActionRepeat

gym.register_envs(ale_py)


def make_atari_env(
    env_id: str = "ALE/Pong-v5",
    *,
    action_repeat: int = 4,
    noop_max: int = 30,
    frames: int = 4,
    screen_size: int = 84,
    repeat_action_probability: float = 0.25,
    max_episode_steps: Optional[int] = None,
    render_mode: Optional[str] = None,
) -> gym.Env:
    """An ALE game as DQN sees it, from the emulator up:

    - gymnasium's AtariPreprocessing without its own frame skip: one grayscale frame per time step at
      the screen's size, up to ``noop_max`` no-op frames at the start of an episode, no episode end
      on life loss;
    - parl's :class:`~parl.utils.action_repeat.ActionRepeat`: each action for ``action_repeat`` frames
      (the config's ``env.action_repeat``), rewards summed, the pixel-wise maximum of the last two
      frames observed;
    - that frame resized to ``screen_size`` square (OpenCV, area interpolation), and the last
      ``frames`` of them stacked into one uint8 observation of shape [frames, size, size].

    So the time step is one frame and the action step ``action_repeat`` frames: the observations
    are those of AtariPreprocessing with ``frame_skip=action_repeat``. The defaults are those of
    Mnih et al. (2015) on ALE v5 (sticky actions with probability 0.25, Machado et al., 2018);
    ``max_episode_steps`` cuts episodes to that many action steps (None: ALE v5's own cap of
    108,000 frames); ``render_mode`` is the ALE env's (``"rgb_array"`` for ``parl eval --video``).
    """
    env = gym.make(env_id, frameskip=1, repeat_action_probability=repeat_action_probability, render_mode=render_mode)
    height, width = env.observation_space.shape[:2]
    env = AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=1,
        screen_size=(width, height),  # no resize yet: the maximum is taken at the screen's resolution
        terminal_on_life_loss=False,
        grayscale_obs=True,
    )
    env = ActionRepeat(env, action_repeat, observation="max_of_last_two")
    env = ResizeObservation(env, (screen_size, screen_size))
    env = FrameStackObservation(env, frames)
    if max_episode_steps is not None:
        env = TimeLimit(env, max_episode_steps=max_episode_steps)
    return env
