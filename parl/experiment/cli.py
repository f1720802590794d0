"""The ``parl`` command line.

    parl train CONFIG [-o key.path=value ...] [--resume] [--quiet]
    parl tune CONFIG --grid key.path=v1,v2 [--grid ...] [--samples N] [-o key.path=value ...]
              [--log-dir DIR] [--max-concurrent K] [--trial-cpus C] [--address ADDR]
    parl eval CONFIG --checkpoint DIR [--episodes N] [--seed S] [-o key.path=value ...]
    parl export RUN_DIR -o DIR [--checkpoint CHECKPOINT]
    parl plot LOGDIR [LOGDIR ...] [-o curves.png]

``python -m parl`` is the same. Config errors, and a log or checkpoint directory
that cannot be written (checked at start), and a ``config.yaml`` that cannot be
written print one line and exit with status 2; agents that fail (``parl train:
all 4 agents failed; first: agent 0, episode 3: SystemExit(0) raised in
run_one_episode``), user code that calls ``sys.exit`` while a config is loaded or
a robot built (``parl train: tasks.RL.model: my_models.Model called sys.exit(0)
while being built``), a checkpoint that is refused (damaged, of the old pickle
format, of other tasks), and a final checkpoint or ``result.json`` that cannot be
written print one line and exit with status 1; a run stopped by SIGINT or SIGTERM
writes its final checkpoint and exits with status 0. A run whose agents did not
all stop, stuck in their environment (an ``env.step`` that never returns), still
writes its final checkpoint, then prints one line naming them (``parl train:
stopped by SIGINT; final checkpoint runs/x/checkpoints/ckpt-5000; agents 2, 5 did
not stop (stuck in their environment for 31 s, 12 s)``) and exits with status 3,
leaving them behind (daemon threads, killed worker processes). A periodic checkpoint or
metrics that cannot be written are reported in one line and training goes on
(metrics switched off). ``parl tune`` without Ray Tune installed says in one line
how to install it (exit status 1); a bad ``--grid`` is a config error (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from parl.experiment.config import RobotConfig
    from parl.serving.computation_task import ComputationTask

EXIT_ERROR = 1
EXIT_USAGE = 2
#: The run ended and its final checkpoint was written, but some agents did not stop.
EXIT_STUCK = 3


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``parl``."""
    parser = argparse.ArgumentParser(prog="parl", description="Train, evaluate and plot robots described in YAML.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{train,tune,eval,export,plot}")

    train = commands.add_parser("train", help="train the robot of a config")
    train.add_argument("config", help="a YAML robot config")
    train.add_argument(
        "-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE", help="change one config value"
    )
    train.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in the log dir")
    train.add_argument("--quiet", action="store_true", help="no progress bar")

    tune = commands.add_parser("tune", help="train a grid of variants of a config on Ray Tune, one row per trial")
    tune.add_argument("config", help="a YAML robot config")
    tune.add_argument(
        "--grid",
        action="append",
        default=[],
        required=True,
        metavar="KEY.PATH=V1,V2",
        help="a config key and its values, each read as -o reads it; trials run every combination",
    )
    tune.add_argument(
        "--samples", type=int, default=1, help="repeat the grid N times, sample i with seed + i (default 1)"
    )
    tune.add_argument(
        "-o",
        "--override",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="change one value of every trial",
    )
    tune.add_argument("--log-dir", help="trials write to LOG_DIR/tune/<trial name> (default: the config's log_dir)")
    tune.add_argument("--max-concurrent", type=int, help="trials running at once (default: as many as CPUs allow)")
    tune.add_argument(
        "--trial-cpus",
        type=float,
        help="CPUs each trial's own process asks for (default 1; placement ray: 0 plus a bundle per worker)",
    )
    tune.add_argument("--address", help="the Ray cluster to run on (default: a local Ray on 127.0.0.1)")

    evaluate = commands.add_parser("eval", help="evaluate a checkpoint with deterministic episodes")
    evaluate.add_argument("config", help="the YAML robot config the checkpoint was trained with")
    evaluate.add_argument(
        "--checkpoint", required=True, help="a checkpoint directory, a checkpoints directory or a run's log dir"
    )
    evaluate.add_argument("--episodes", type=int, default=10)
    evaluate.add_argument("--seed", type=int, default=1_000_000, help="episode i resets its env with seed + i")
    evaluate.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE")

    export = commands.add_parser("export", help="write a run's trained policy to a directory of its own")
    export.add_argument("run", metavar="RUN_DIR", help="a run's log dir (it holds config.yaml and checkpoints/)")
    export.add_argument("-o", "--out", required=True, metavar="DIR", help="the directory to write the policy to")
    export.add_argument("--checkpoint", default=None, help="a checkpoint of the run (default: its latest)")

    plot = commands.add_parser("plot", help="draw learning curves of runs to a PNG")
    plot.add_argument("log_dirs", nargs="+", metavar="LOGDIR")
    plot.add_argument("-o", "--output", default="curves.png", help="the PNG to write (default curves.png)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one ``parl`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    from parl.core.errors import EpisodeResultError
    from parl.experiment.checkpoints import CheckpointWriteError, NotWritableError
    from parl.experiment.class_spec import UserExitError
    from parl.experiment.config import ConfigError
    from parl.experiment.trainer import ResultWriteError

    try:
        if args.command == "train":
            return _train(args)
        if args.command == "tune":
            return _tune(args)
        if args.command == "eval":
            return _eval(args)
        if args.command == "export":
            return _export(args)
        return _plot(args)
    except UserExitError as exc:  # before ConfigError, of which it is one: the code, not the config, failed
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (ConfigError, NotWritableError) as exc:
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (CheckpointWriteError, EpisodeResultError, ResultWriteError) as exc:
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as exc:  # user code exited elsewhere than in what the config builds
        print(f"parl {args.command}: {_exit_site(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except (FileNotFoundError, ValueError, ImportError) as exc:
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _train(args: argparse.Namespace) -> int:
    from parl.experiment.config import load_config
    from parl.experiment.run import train_config
    from parl.experiment.trainer import summary_lines

    config = load_config(args.config, args.override)
    outcome = train_config(config, resume=args.resume, progress=not args.quiet)
    if outcome.result is not None:
        print("\n".join(summary_lines(outcome.result, config.log_dir)))
    if outcome.problem is None:
        return 0
    print(f"parl train: {outcome.problem}", file=sys.stderr)
    return EXIT_STUCK if outcome.stuck else EXIT_ERROR


def _tune(args: argparse.Namespace) -> int:
    from parl.experiment.sweep import plan_sweep, table_lines, write_results
    from parl.experiment.tune import import_tune, run_sweep
    from parl.validation import check_int

    if args.max_concurrent is not None:
        check_int("--max-concurrent", args.max_concurrent, 1)
    import_tune()  # before any config is built: without Ray Tune, one line and nothing else
    plan = plan_sweep(
        args.config,
        args.grid,
        overrides=args.override,
        samples=args.samples,
        log_dir=args.log_dir,
        trial_cpus=args.trial_cpus,
    )
    rows = run_sweep(plan, max_concurrent=args.max_concurrent, address=args.address)
    print("\n".join(table_lines(plan, rows)))
    results = write_results(plan, rows)
    below = os.path.relpath(results)
    print(f"results: {results if below.startswith('..') else below}")
    failed = [row for row in rows if row.error is not None]
    if len(failed) == len(rows):
        print(
            f"parl tune: all {len(rows)} trials failed; first: trial {failed[0].trial.index}: {failed[0].error}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    return 0


def _exit_site(exc: SystemExit) -> str:
    """``<file>:<line> (<function>) called sys.exit(3)``: where the innermost frame of ``exc`` exited."""
    from parl.experiment.class_spec import exit_call

    frames = list(traceback.walk_tb(exc.__traceback__))
    if not frames:
        return f"{exit_call(exc)} was called"
    frame, line = frames[-1]
    return f"{frame.f_code.co_filename}:{line} ({frame.f_code.co_name}) called {exit_call(exc)}"


def load_checkpoint(path: str, tasks: Dict[str, "ComputationTask"]) -> Tuple[str, Dict[str, object]]:
    """Restore ``tasks`` from the checkpoint ``path`` means (itself when it is a checkpoint directory,
    else the latest in ``path`` or ``path/checkpoints``); return its directory and counters. A
    checkpoint directory named itself is loaded or refused;
    in a checkpoints directory or a run's log dir, damaged checkpoints are skipped (one line each
    on stderr) for the newest intact one.

    Raises:
        FileNotFoundError: no checkpoint there.
        CheckpointError: the checkpoint (or every one there) is refused.
    """
    from parl.experiment.checkpoints import ROBOT_FILE, CheckpointManager

    if os.path.isfile(os.path.join(path, ROBOT_FILE)):
        return path, CheckpointManager(os.path.dirname(os.path.abspath(path))).load(path, tasks)
    for directory in (os.path.join(path, "checkpoints"), path):
        if os.path.isdir(directory):
            found = CheckpointManager(directory).load_latest(tasks)
            if found is not None:
                return found
    raise FileNotFoundError(f"no checkpoint in {path}")


def load_trained_tasks(config: "RobotConfig", path: str) -> Tuple[Dict[str, "ComputationTask"], str, Dict[str, object]]:
    """The config's tasks restored from the checkpoint ``path`` means (see :func:`load_checkpoint`),
    that checkpoint's directory and its counters."""
    from parl.experiment.build import task_settings

    tasks = {name: task_settings(config, name).make_task(name) for name in config.tasks}
    checkpoint, counters = load_checkpoint(path, tasks)
    return tasks, checkpoint, counters


def _eval(args: argparse.Namespace) -> int:
    import numpy as np

    from parl.experiment.build import make_agent
    from parl.experiment.config import load_config
    from parl.experiment.evaluation import evaluate_agents
    from parl.validation import check_int

    episodes = check_int("--episodes", args.episodes, 1)
    config = load_config(args.config, args.override)
    tasks, checkpoint, counters = load_trained_tasks(config, args.checkpoint)
    returns: List[float] = evaluate_agents(
        lambda seed: make_agent(config, 0, seed=seed), tasks, episodes=episodes, seed=args.seed
    )
    summary = {
        "checkpoint": checkpoint,
        "env_steps": counters.get("env_steps"),
        "episodes": episodes,
        "mean_return": float(np.mean(returns)),
        "std_return": float(np.std(returns)),
        "min_return": float(np.min(returns)),
        "max_return": float(np.max(returns)),
        "returns": returns,
    }
    print(json.dumps(summary))
    return 0


def _export(args: argparse.Namespace) -> int:
    from parl.experiment.config import load_config
    from parl.experiment.export import export_policy

    config_path = os.path.join(args.run, "config.yaml")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{args.run} is not a run directory: it has no config.yaml")
    config = load_config(config_path)
    tasks, checkpoint, _ = load_trained_tasks(config, args.checkpoint or args.run)
    sections = {
        name: {
            "model": {**task.model.to_dict(), **task.model_sizes},  # with the sizes the env gave
            "algorithm": task.algorithm.to_dict(),
            "transforms": {
                "normalize_inputs": task.transforms.normalize_inputs,
                "input_clip": task.transforms.input_clip,
            },
        }
        for name, task in config.tasks.items()
    }
    export_policy(tasks, sections, args.out, about={"name": config.name, "env": config.env.to_dict()})
    print(json.dumps({"checkpoint": checkpoint, "policy": os.path.abspath(args.out)}))
    return 0


def _plot(args: argparse.Namespace) -> int:
    from parl.experiment.plot import plot_curves

    print(plot_curves(args.log_dirs, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
