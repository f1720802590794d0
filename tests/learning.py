"""Training the examples' robot configs, and loading example scripts as modules, for the tests that do."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType
from typing import Dict

from parl.experiment.config import load_config
from parl.experiment.trainer import Trainer

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


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as a module (with ``examples/`` importable, as when run as a script)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module
