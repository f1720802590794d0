"""Videos of evaluation episodes: ``parl eval CONFIG --checkpoint DIR --video VIDEOS``.

    check_video_support()                                  # MissingExtraError without moviepy
    env = recording_env(config, "videos", episode=0)       # records its first episode to videos/episode-0*.mp4

Each evaluation episode plays in an environment made with ``render_mode="rgb_array"`` and wrapped in
gymnasium's ``RecordVideo``, which writes one MP4 per episode (through moviepy, the optional extra
``parl[video]``) when the environment is closed. Frames are taken once per step of the agent: with
``env.action_repeat`` K > 1, once per action step.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from typing import Any

from parl.experiment.config.robot_config import RobotConfig

#: The extra of parl that installs what recording needs.
EXTRA = "video"
#: The render mode recording asks the environment for.
RENDER_MODE = "rgb_array"


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message is one line naming the extra to install."""


def check_video_support() -> None:
    """
    Raises:
        MissingExtraError: moviepy, which gymnasium's RecordVideo writes with, is not installed.
    """
    if importlib.util.find_spec("moviepy") is None:
        raise MissingExtraError(f"--video needs moviepy, which is not installed: pip install 'parl[{EXTRA}]'")


def recording_env(config: RobotConfig, directory: str, episode: int) -> Any:
    """A new environment of ``config`` that records its first episode to ``directory`` as
    ``episode-<episode>-episode-0.mp4`` (gymnasium's naming: the prefix, then its own episode count).

    Raises:
        ConfigError: the environment's factory takes no ``render_mode``.
    """
    from gymnasium.wrappers import RecordVideo

    # Frames are drawn off screen: SDL (pygame, which gymnasium's classic-control envs draw with) needs no
    # display for them, and without one it would print a line about the missing session.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    env = config.env.make(render_mode=RENDER_MODE)
    with warnings.catch_warnings():
        if episode > 0:  # the directory holds this evaluation's earlier episodes: nothing to warn about
            warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
        return RecordVideo(
            env,
            directory,
            episode_trigger=lambda index: index == 0,
            name_prefix=f"episode-{episode}",
            disable_logger=True,
        )
