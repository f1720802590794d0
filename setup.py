"""Installs parl, a reinforcement-learning framework on PaddlePaddle for building robots."""

import re
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

README = Path(__file__).with_name("README.md")


def read_version() -> str:
    """``parl.__version__``, read from parl/__init__.py as text: importing parl would import paddle."""
    text = Path(__file__).with_name("parl").joinpath("__init__.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__ = "([^"]+)"$', text, flags=re.M)
    if match is None:
        raise RuntimeError('parl/__init__.py has no line __version__ = "..."')
    return match.group(1)


class BuildExt(build_ext):
    """Adds numpy's headers, imported only when an extension is built (numpy is a build requirement
    in pyproject.toml)."""

    def finalize_options(self) -> None:
        super().finalize_options()
        import numpy

        self.include_dirs.append(numpy.get_include())


# The cooperative scheduler's hot path in C. Optional: without a C compiler parl installs without it
# and runs the same code in Python (docs/performance.md gives the difference).
COOPERATIVE = Extension(
    "parl.runtime.cooperative._cooperative",
    ["parl/runtime/cooperative/_cooperative.c"],
    define_macros=[("NPY_TARGET_VERSION", "NPY_1_25_API_VERSION")],
    optional=True,
)

setup(
    name="parl",
    version=read_version(),
    description="Reinforcement learning on PaddlePaddle: agents, batching computation tasks, algorithms",
    long_description=README.read_text(encoding="utf-8") if README.exists() else "",
    long_description_content_type="text/markdown",
    packages=find_packages(include=["parl", "parl.*"]),
    py_modules=["parl_cli"],  # the command's entry point, run before ``import parl``
    ext_modules=[COOPERATIVE],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.9",
    install_requires=[
        "paddlepaddle>=3.0",
        "numpy>=1.24",
        "gymnasium>=1.0",
        "pyyaml>=6.0",
        "tensorboardX>=2.6",
        "matplotlib>=3.7",
        "safetensors>=0.4",  # checkpoints and exported policies: arrays that cannot run code on load
        "greenlet>=3.0",  # Manager(placement="cooperative"): agents as greenlets (parl/runtime/cooperative/runner.py)
        "tqdm>=4.60",  # the progress bar of parl train (parl/experiment/train/progress.py)
        "pydantic>=2.10",  # robot configs: one schema, checked with the key path of every error (parl/experiment/config/robot_config.py)
        "scipy>=1.15",  # figures over seeds: trimmed means and bootstrap intervals (parl/experiment/runs/statistics.py)
        "cloudpickle>=3.0",  # a task's settings (closures) sent to its learner processes (parl/runtime/task_learners.py)
        "msgpack>=1.0",  # framed data on the worker pipes and the RLX protocol, never pickle (parl/wire.py, parl/rlx)
    ],
    entry_points={"console_scripts": ["parl=parl_cli:main"]},
    extras_require={
        # ALE emulator with its bundled ROMs, and OpenCV for gymnasium's AtariPreprocessing (resizing).
        "atari": ["ale-py>=0.10", "opencv-python-headless>=4.10"],
        # MuJoCo's physics for gymnasium's locomotion tasks (HalfCheetah-v5, Hopper-v5: docs/mujoco.md); the
        # `mujoco` package is what gymnasium's own `mujoco` extra installs.
        "mujoco": ["mujoco>=3.0"],
        # MinAtar (Young and Tian, 2019): Breakout and other Atari-like games on 10x10 grids of binary channels,
        # small enough to learn from pixels on a CPU (examples/minatar_env.py, docs/atari.md).
        "minatar": ["minatar>=1.0.15"],
        # Box2D for gymnasium's LunarLander (examples/configs/ppo_lunarlander.yaml); gymnasium's box2d
        # environments import pygame-ce (for rendering) when they load.
        "box2d": ["box2d>=2.3.10", "pygame-ce>=2.1.3"],
        # Multi-agent environments (parl.multiagent, docs/multiagent.md): PettingZoo's APIs and its classic games,
        # and mpe2, the maintained multi-agent particle environments (simple_spread_v3).
        "multiagent": ["pettingzoo>=1.25", "mpe2>=1.0"],
        # moviepy, which gymnasium's RecordVideo writes MP4 files with: parl eval --video (parl/experiment/video.py).
        # 1.0.3 is the newest that installs beside matplotlib's Pillow (moviepy 2 requires Pillow < 12).
        "video": ["moviepy>=1.0.3"],
        # Placement "ray" (parl/runtime/ray/) and `parl tune` (parl/experiment/tune.py): Ray with Ray Tune
        # (which brings pandas and pyarrow); imported only when a robot or a sweep uses it.
        "ray": ["ray[tune]>=2.60"],
        # pytest-timeout: a test that hangs fails with the stacks of its threads instead of stalling the suite.
        "test": [
            "pytest>=7",
            "pytest-timeout>=2.2",
            # pytest-xdist: `make test` runs the suite in two processes (Ray's tests in one of them).
            "pytest-xdist>=3.5",
            "ale-py>=0.10",
            "opencv-python-headless>=4.10",
            "mujoco>=3.0",
            "minatar>=1.0.15",
            "box2d>=2.3.10",
            "pygame-ce>=2.1.3",
            "moviepy>=1.0.3",
            "pettingzoo>=1.25",
            "mpe2>=1.0",
            "ray[tune]>=2.60",
            # `make lint`: ruff (lint and format) and mypy (types of parl/, configured in pyproject.toml).
            "ruff>=0.6",
            "mypy>=1.10",
        ],
    },
)
