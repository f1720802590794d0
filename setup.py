"""Installs parl, a reinforcement-learning framework on PaddlePaddle for building robots."""

from pathlib import Path

from setuptools import find_packages, setup

README = Path(__file__).with_name("README.md")

setup(
    name="parl",
    version="0.1.0",
    description="Reinforcement learning on PaddlePaddle: agents, batching computation tasks, algorithms",
    long_description=README.read_text(encoding="utf-8") if README.exists() else "",
    long_description_content_type="text/markdown",
    packages=find_packages(include=["parl", "parl.*"]),
    python_requires=">=3.9",
    install_requires=[
        "paddlepaddle>=3.0",
        "numpy>=1.24",
        "gymnasium>=1.0",
        "pyyaml>=6.0",
        "tensorboardX>=2.6",
        "matplotlib>=3.7",
        "greenlet>=3.0",  # Manager(placement="cooperative"): agents as greenlets (parl/framework/cooperative.py)
    ],
    entry_points={"console_scripts": ["parl=parl.experiment.cli:main"]},
    extras_require={
        # ALE emulator with its bundled ROMs, and OpenCV for gymnasium's AtariPreprocessing (resizing).
        "atari": ["ale-py>=0.10", "opencv-python-headless>=4.10"],
        "test": ["pytest>=7", "ale-py>=0.10", "opencv-python-headless>=4.10"],
    },
)
