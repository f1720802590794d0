"""The command line of the example scripts: each trains the robot of its YAML config with the Trainer.

    # examples/ppo_cartpole.py: its robot is examples/configs/ppo_cartpole.yaml
    if __name__ == "__main__":
        launch(example_config(__file__), description=__doc__)

``python examples/ppo_cartpole.py --seed 3 --agents 16 --placement cooperative -o tasks.RL.algorithm.gamma=0.98``
loads the config with its options turned into overrides (:func:`launch_overrides`),
trains it as ``parl train`` does (:class:`~parl.experiment.train.trainer.Trainer`: progress
bar, metrics, checkpoints and ``result.json`` in the log dir), prints the result
with its final evaluation on fresh seeds, and returns the result.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from parl.experiment.config.robot_config import ConfigError, load_config
from parl.experiment.train.trainer import Trainer, summary_lines
from parl.runtime import registry

PathLike = Union[str, "os.PathLike[str]"]

#: Options of :func:`launch_parser` and the config key each one overrides.
OVERRIDDEN_KEYS = {
    "seed": "seed",
    "agents": "agents",
    "placement": "placement",
    "max_steps": "train.max_env_steps",
    "target": "train.target_return",
    "log_dir": "log_dir",
}


def example_config(script: PathLike) -> Path:
    """The config of the example script ``script``: ``configs/<its name>.yaml`` beside it."""
    path = Path(script).resolve()
    return path.parent / "configs" / f"{path.stem}.yaml"


def launch_parser(description: str, config: PathLike) -> argparse.ArgumentParser:
    """Options of an example script: ``--config --seed --agents --placement --max-steps --target
    --log-dir --quiet -o KEY.PATH=VALUE``; every one left out keeps the config's value."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.fspath(config), help="the robot config (default: %(default)s)")
    parser.add_argument("--seed", type=int, help="the robot's seed (seed)")
    parser.add_argument("--agents", type=int, help="number of agents (agents)")
    parser.add_argument(
        "--placement", choices=registry.names(), help="where the agents run: parl.Manager's placement (placement)"
    )
    parser.add_argument("--max-steps", type=int, help="env step budget for training (train.max_env_steps)")
    parser.add_argument("--target", type=float, help="evaluation mean return that ends training (train.target_return)")
    parser.add_argument("--log-dir", help="where metrics, checkpoints and result.json go (log_dir)")
    parser.add_argument(
        "-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE", help="change one config value"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    return parser


def launch_overrides(args: argparse.Namespace) -> List[str]:
    """The config overrides of parsed options: the named options first, then each ``-o``."""
    named = [
        f"{key}={getattr(args, option)}" for option, key in OVERRIDDEN_KEYS.items() if getattr(args, option) is not None
    ]
    return named + list(args.override)


def launch(config: PathLike, argv: Optional[Sequence[str]] = None, *, description: str = "") -> Dict[str, object]:
    """Train the robot of ``config`` with the options ``argv`` (None: ``sys.argv[1:]``) and return
    :meth:`Trainer.run`'s result; unless ``--quiet``, draw the progress bar and print the result.

    A config or override that does not load exits with status 2 and its one-line message.
    """
    parser = launch_parser(description, config)
    args = parser.parse_args(argv)
    try:
        robot = load_config(args.config, launch_overrides(args))
    except ConfigError as exc:
        parser.error(str(exc))
    result = Trainer(robot, progress=not args.quiet).run()
    if not args.quiet:
        print("\n".join(summary_lines(result, robot.log_dir)), flush=True)
    return result
