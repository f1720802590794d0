"""Small robot configs for tests and fault runs of ``parl train``: A2C on CartPole, built fresh each call.

    config = cartpole_a2c_config(agents=1, max_env_steps=3000)
    path = write_config(tmp_path / "robot.yaml", config, {"seed": 3}, log_dir=tmp_path / "run")
    main(["train", str(path), "--quiet"])

The robot neither evaluates nor checkpoints during its run unless a caller sets ``evaluation`` or
``checkpoint``; its run ends at ``max_env_steps`` (or at the first fault a test injects).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping, Sequence

import yaml


def cartpole_a2c_config(
    *,
    agents: int = 2,
    hidden_sizes: Sequence[int] = (8,),
    learning_rate: float = 1e-3,
    sample_interval: int = 8,
    max_env_steps: int = 200_000,
) -> Dict[str, object]:
    """A ``parl train`` config: ``agents`` GymAgents on CartPole-v1 learning with A2C (gamma 0.99) through
    an MLP actor-critic of ``hidden_sizes``, from on-policy segments of ``sample_interval`` steps; seed 0,
    evaluations of one episode, and neither evaluations nor checkpoints before the run ends."""
    return {
        "seed": 0,
        "agents": agents,
        "env": {"id": "CartPole-v1"},
        "agent": {"class": "parl.utils.GymAgent"},
        "tasks": {
            "RL": {
                "model": {
                    "class": "parl.models.MLPActorCritic",
                    "obs_dim": 4,
                    "num_actions": 2,
                    "hidden_sizes": list(hidden_sizes),
                },
                "algorithm": {"class": "parl.algorithms.A2C", "gamma": 0.99, "learning_rate": learning_rate},
                "helper": {"class": "parl.OnPolicyHelper", "sample_interval": sample_interval},
            }
        },
        "train": {"max_env_steps": max_env_steps},
        "evaluation": {"every_steps": None, "episodes": 1},
        "checkpoint": {"every_steps": None, "every_minutes": None},
    }


def write_config(path: Path, config: Mapping[str, object], changes: Mapping[str, object], *, log_dir: Path) -> Path:
    """Writes ``config`` as YAML to ``path`` with each top-level key of ``changes`` in place of its own and
    ``log_dir`` set (unless ``changes`` sets it); returns ``path``. ``config`` itself is left as it is."""
    data = {**config, "log_dir": str(log_dir), **changes}
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path
