"""Training the examples' robot configs, for the tests that do."""

from __future__ import annotations

import pathlib
from typing import Dict

from parl.experiment.config.robot_config import load_config
from parl.experiment.train.trainer import Trainer

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
CONFIGS = EXAMPLES / "configs"


def train_example_config(
    name: str, log_dir: pathlib.Path, *, seed: int, budget: int, target: float, overrides: tuple = ()
) -> Dict[str, object]:
    """Train ``examples/configs/<name>.yaml`` with ``seed``, an env step ``budget`` and a ``target`` return,
    logging under ``log_dir``, without progress bar; then ``overrides``. Returns the Trainer's result."""
    config = load_config(
        str(CONFIGS / f"{name}.yaml"),
        [
            f"seed={seed}",
            f"train.max_env_steps={budget}",
            f"train.target_return={target}",
            f"log_dir={log_dir / f'{name}-s{seed}'}",
            *overrides,
        ],
    )
    return Trainer(config, progress=False).run()
