"""The ``parl`` command line.

    parl train CONFIG [-o key.path=value ...] [--resume] [--quiet] [--seeds 0-4 [--jobs N]]
    parl tune CONFIG --grid key.path=v1,v2 [--grid ...] [--samples N] [-o key.path=value ...]
              [--log-dir DIR] [--max-concurrent K] [--trial-cpus C] [--address ADDR]
    parl serve CONFIG [--bind HOST:PORT] [--token-file F] [--max-clients N] [-o key.path=value ...] [--no-eval]
    parl eval CONFIG --checkpoint DIR|best [--episodes N] [--seed S] [--video DIR] [-o key.path=value ...]
    parl export RUN_DIR -o DIR [--checkpoint CHECKPOINT|best]
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
(caught from the moment the command begins reading its config: parl/experiment/train/stop_signals.py)
writes its final checkpoint and exits with status 0. A run whose agents did not
all stop, stuck in their environment (an ``env.step`` that never returns), still
writes its final checkpoint, then prints one line naming them (``parl train:
stopped by SIGINT; final checkpoint runs/x/checkpoints/ckpt-5000; agents 2, 5 did
not stop (stuck in their environment for 31 s, 12 s)``) and exits with status 3,
leaving them behind (daemon threads, killed worker processes). A periodic checkpoint or
metrics that cannot be written are reported in one line and training goes on
(metrics switched off). ``parl serve`` (docs/rlx.md) exits as ``parl train`` does,
and with status 2 when its address cannot be listened on.
``parl tune`` without Ray Tune installed says in one line
how to install it (exit status 1); a bad ``--grid``, and a bad number of ``--jobs``, ``--samples``,
``--max-concurrent`` or ``--trial-cpus`` are config errors (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, cast

if TYPE_CHECKING:
    from parl.core.agent import Agent
    from parl.experiment.config.robot_config import RobotConfig
    from parl.experiment.train.trainer import Trainer
    from parl.runtime.manager import Manager
    from parl.serving.computation_task import ComputationTask

EXIT_ERROR = 1
EXIT_USAGE = 2
#: The run ended and its final checkpoint was written, but some agents did not stop.
EXIT_STUCK = 3
#: Ctrl-C outside a run (while the command starts or reads its config), as a shell reports SIGINT.
EXIT_INTERRUPTED = 130
#: ``parl train --seeds`` stopped by a signal exits with this plus the signal's number (130: SIGINT).
EXIT_SIGNAL = 128

#: The options of ``parl serve`` that set config keys: option -> (type, metavar, key, help).
SERVE_OPTIONS = {
    "--bind": (
        str,
        "HOST:PORT",
        "placement.bind",
        "address to listen on (default 127.0.0.1:7070; any other needs a token)",
    ),
    "--token-file": (
        str,
        "FILE",
        "placement.token_file",
        "a file holding the token every client must send, >= 32 bytes",
    ),
    "--max-clients": (int, "N", "agents", "clients served at once: the robot's agents (default: the config's)"),
}


@dataclass(frozen=True)
class Argument:
    """One argument of a subcommand, as ``argparse.ArgumentParser.add_argument(*flags, **options)`` takes it."""

    flags: Tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Command:
    """A ``parl`` subcommand: its name, its help, its arguments and the function that runs it (the parsed
    arguments -> the exit status)."""

    name: str
    help: str
    arguments: Tuple[Argument, ...]
    run: Callable[[argparse.Namespace], int]
    description: Optional[str] = None


def _config(text: str = "a YAML robot config") -> Argument:
    return Argument(("config",), {"help": text})


def _override(text: str = "change one config value") -> Argument:
    return Argument(
        ("-o", "--override"), {"action": "append", "default": [], "metavar": "KEY.PATH=VALUE", "help": text}
    )


_QUIET = Argument(("--quiet",), {"action": "store_true", "help": "no progress bar"})


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``parl``: one subparser per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(prog="parl", description="Train, evaluate and plot robots described in YAML.")
    names = ",".join(command.name for command in COMMANDS)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="{" + names + "}")
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.description)
        for argument in command.arguments:
            sub.add_argument(*argument.flags, **argument.options)
        sub.set_defaults(command_function=command.run)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one ``parl`` command; returns the exit status."""
    args = build_parser().parse_args(argv)
    from parl.core.errors import EpisodeResultError
    from parl.experiment.config.class_spec import UserExitError
    from parl.experiment.config.robot_config import ConfigError
    from parl.experiment.evaluation.video import MissingExtraError
    from parl.experiment.train.checkpoints import CheckpointWriteError, NotWritableError
    from parl.experiment.train.trainer import ResultWriteError
    from parl.runtime.errors import PlacementStartError

    try:
        return args.command_function(args)
    except UserExitError as exc:  # before ConfigError, of which it is one: the code, not the config, failed
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (ConfigError, NotWritableError) as exc:
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PlacementStartError as exc:  # a cluster not joined, an address taken, a worker that did not start
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.usage else EXIT_ERROR
    except (CheckpointWriteError, EpisodeResultError, ResultWriteError, MissingExtraError) as exc:
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as exc:  # user code exited elsewhere than in what the config builds
        print(f"parl {args.command}: {_exit_site(exc)}", file=sys.stderr)
        return EXIT_ERROR
    except (FileNotFoundError, ValueError, ImportError) as exc:
        print(f"parl {args.command}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:  # Ctrl-C outside a run (a run stops on it and is saved, returning)
        print(f"parl {args.command}: interrupted (no run under way; nothing to save)", file=sys.stderr)
        return EXIT_INTERRUPTED


def _train(args: argparse.Namespace) -> int:
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.train.stop_signals import RunSignals
    from parl.experiment.train.trainer import Trainer

    if args.seeds is not None or args.jobs is not None:
        return _train_seeds(args)
    with RunSignals() as signals:  # a signal while the config loads stops the run as soon as it starts
        config = load_config(args.config, args.override)
        return _run(signals.hand_to(Trainer(config, resume=args.resume, progress=not args.quiet)), "train")


def _serve(args: argparse.Namespace) -> int:
    from parl.experiment.cli.serve_process import listening_line
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.train.checkpoints import CheckpointManager
    from parl.experiment.train.stop_signals import RunSignals
    from parl.experiment.train.trainer import Trainer

    with RunSignals() as signals:  # a signal while the config loads stops the run as soon as it starts
        config = load_config(args.config, serve_overrides(args))
        resume = CheckpointManager(os.path.join(config.log_dir, "checkpoints")).latest() is not None

        def announce(manager: "Manager") -> None:
            runner = cast(Any, manager.runner)  # the rlx placement's runner: parl serve runs no other
            host, port = runner.address
            print(listening_line(host, port, config.agents, runner.settings.token is not None), flush=True)

        evaluate = not args.no_eval
        trainer = Trainer(config, resume=resume, progress=not args.quiet, evaluate=evaluate, on_start=announce)
        return _run(signals.hand_to(trainer), "serve")  # an address that cannot be listened on: main says so


def serve_overrides(args: argparse.Namespace) -> List[str]:
    """The config overrides of ``parl serve``'s options: ``placement.name=`` the placement whose
    environments are remote (rlx; its other options stay the config's), the named options (values as
    JSON, which YAML reads back unchanged), then each ``-o``."""
    from parl.runtime import registry

    (remote, *_) = [name for name in registry.names() if registry.entry(name).remote_environments]
    named = []
    for option, (_, _, key, _) in SERVE_OPTIONS.items():
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None:
            named.append(f"{key}={json.dumps(value)}")
    return [f"placement.name={remote}", *named, *args.override]


def _run(trainer: "Trainer", command: str) -> int:
    """Run ``trainer``, print its summary; the exit status of ``parl train`` (and ``parl serve``)."""
    from parl.experiment.train.run import run_trainer
    from parl.experiment.train.run_log import run_log
    from parl.experiment.train.trainer import summary_lines

    with run_log(trainer.config.log_dir):  # tracebacks to <log_dir>/parl.log, one line each here
        outcome = run_trainer(trainer)
    if outcome.result is not None and not outcome.failed:  # a failure's one line names its checkpoint
        print("\n".join(summary_lines(outcome.result, trainer.config.log_dir)))
    if outcome.problem is None:
        return 0
    print(f"parl {command}: {outcome.problem}", file=sys.stderr)
    return EXIT_STUCK if outcome.stuck else EXIT_ERROR


def _tune(args: argparse.Namespace) -> int:
    from parl.experiment.runs.options import check_count
    from parl.experiment.runs.sweep import plan_sweep, table_lines, write_results
    from parl.experiment.runs.tune import import_tune, run_sweep

    if args.max_concurrent is not None:
        check_count("--max-concurrent", args.max_concurrent)
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


def _train_seeds(args: argparse.Namespace) -> int:
    """``parl train CONFIG --seeds S [--jobs N]``: one run per seed (parl/experiment/runs/seed_runs.py), then
    the aggregate (parl/experiment/runs/aggregate.py) written and printed; exit status 1 when a seed's run
    did not end well or wrote no result.json (its figures are left out), 128 + the signal's number
    when SIGINT or SIGTERM stopped the experiment (forwarded to the runs going on; the seeds not
    started are listed)."""
    from parl.experiment.config.robot_config import ConfigError, load_config
    from parl.experiment.runs.aggregate import aggregate_runs, summary_table, write_aggregate
    from parl.experiment.runs.options import check_count
    from parl.experiment.runs.seed_runs import parse_seeds, train_seeds

    if args.seeds is None:
        raise ConfigError(f"--jobs {args.jobs}: only with --seeds")
    jobs = 1 if args.jobs is None else check_count("--jobs", args.jobs)
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if any(override.partition("=")[0].strip() == "seed" for override in args.override):
        raise ConfigError("seed: set by --seeds for each run; drop -o seed=...")
    config = load_config(args.config, args.override)  # checked once, before any run starts
    runs = train_seeds(
        args.config, args.override, seeds, config.log_dir, jobs=jobs, resume=args.resume, quiet=args.quiet
    )
    summary = aggregate_runs(config.log_dir, list(runs.statuses), not_started=runs.not_started)
    path = write_aggregate(config.log_dir, summary)
    print("\n".join([summary_table(summary), f"aggregate: {path}"]))
    if runs.signal is not None:
        name = signal.Signals(runs.signal).name
        print(f"parl train: stopped by {name}; seeds not started: {runs.not_started or 'none'}", file=sys.stderr)
        return EXIT_SIGNAL + runs.signal
    missing = set(summary["missing"])  # a run that ended well but wrote no result failed too
    failed = [seed for seed, status in runs.statuses.items() if status != 0 or seed in missing]
    if failed:
        print(f"parl train: the runs of seeds {failed} did not end well; see their log dirs", file=sys.stderr)
        return EXIT_ERROR
    return 0


def _exit_site(exc: SystemExit) -> str:
    """``<file>:<line> (<function>) called sys.exit(3)``: where the innermost frame of ``exc`` exited."""
    from parl.experiment.config.class_spec import exit_call

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
    from parl.experiment.train.checkpoints import ROBOT_FILE, CheckpointManager

    if os.path.isfile(os.path.join(path, ROBOT_FILE)):
        return path, CheckpointManager(os.path.dirname(os.path.abspath(path))).load(path, tasks)
    for directory in (os.path.join(path, "checkpoints"), path):
        if os.path.isdir(directory):
            found = CheckpointManager(directory).load_latest(tasks)
            if found is not None:
                return found
    raise FileNotFoundError(f"no checkpoint in {path}")


def checkpoint_path(given: str, log_dir: str) -> str:
    """Where ``--checkpoint`` points: ``given``, or for the word ``best`` the best evaluation's
    checkpoints of the run in ``log_dir`` (``<log_dir>/checkpoints/best``).

    Raises:
        FileNotFoundError: ``best`` when that run kept no best checkpoint (no evaluation ran).
    """
    from parl.experiment.train.checkpoints import BEST

    if given != BEST:
        return given
    path = os.path.join(log_dir, "checkpoints", BEST)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--checkpoint best: {log_dir} has no best checkpoint ({path}): no evaluation ran")
    return path


def load_trained_tasks(config: "RobotConfig", path: str) -> Tuple[Dict[str, "ComputationTask"], str, Dict[str, object]]:
    """The config's tasks restored from the checkpoint ``path`` means (see :func:`load_checkpoint`),
    that checkpoint's directory and its counters."""
    from parl.experiment.config.build import task_settings

    tasks = {name: task_settings(config, name).make_task(name) for name in config.tasks}
    checkpoint, counters = load_checkpoint(path, tasks)
    return tasks, checkpoint, counters


def _eval(args: argparse.Namespace) -> int:
    import numpy as np

    from parl.experiment.config.build import make_agent
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.evaluation.agents import evaluate_agents
    from parl.experiment.evaluation.video import check_video_support, recording_env
    from parl.validation import check_int

    episodes = check_int("--episodes", args.episodes, 1)
    if args.video is not None:
        check_video_support()
    config = load_config(args.config, args.override)
    tasks, checkpoint, counters = load_trained_tasks(config, checkpoint_path(args.checkpoint, config.log_dir))

    def agent(seed: int) -> "Agent":
        env = None if args.video is None else recording_env(config, args.video, episode=seed - args.seed)
        return make_agent(config, 0, seed=seed, env=env)

    # A recording environment keeps its episode's frames until it ends: those episodes play one at a time.
    concurrency = config.evaluation.concurrency if args.video is None else 1
    returns: List[float] = evaluate_agents(agent, tasks, episodes=episodes, seed=args.seed, concurrency=concurrency)
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
    if args.video is not None:
        summary["videos"] = sorted(os.path.join(args.video, f) for f in os.listdir(args.video) if f.endswith(".mp4"))
    print(json.dumps(summary))
    return 0


def _export(args: argparse.Namespace) -> int:
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.policy.export import export_policy

    config_path = os.path.join(args.run, "config.yaml")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{args.run} is not a run directory: it has no config.yaml")
    config = load_config(config_path)
    tasks, checkpoint, _ = load_trained_tasks(config, checkpoint_path(args.checkpoint or args.run, args.run))
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
    from parl.experiment.runs.plot import plot_curves

    print(plot_curves(args.log_dirs, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())


#: The subcommands of ``parl``, in the order ``parl --help`` lists them: a new one is a function and an entry.
COMMANDS: Tuple[Command, ...] = (
    Command(
        "train",
        "train the robot of a config",
        (
            _config(),
            _override(),
            Argument(
                ("--resume",), {"action": "store_true", "help": "continue from the latest checkpoint in the log dir"}
            ),
            _QUIET,
            Argument(
                ("--seeds",),
                {
                    "default": None,
                    "metavar": "SEEDS",
                    "help": "train once per seed (0-4, 0,3,7) into <log_dir>/seed_<n>, then write "
                    "<log_dir>/aggregate.json",
                },
            ),
            Argument(
                ("--jobs",), {"type": int, "default": None, "help": "with --seeds: runs at once, each its own process"}
            ),
        ),
        _train,
    ),
    Command(
        "tune",
        "train a grid of variants of a config on Ray Tune, one row per trial",
        (
            _config(),
            Argument(
                ("--grid",),
                {
                    "action": "append",
                    "default": [],
                    "required": True,
                    "metavar": "KEY.PATH=V1,V2",
                    "help": "a config key and its values, each read as -o reads it; trials run every combination",
                },
            ),
            Argument(
                ("--samples",),
                {"type": int, "default": 1, "help": "repeat the grid N times, sample i with seed + i (default 1)"},
            ),
            _override("change one value of every trial"),
            Argument(
                ("--log-dir",), {"help": "trials write to LOG_DIR/tune/<trial name> (default: the config's log_dir)"}
            ),
            Argument(
                ("--max-concurrent",), {"type": int, "help": "trials running at once (default: as many as CPUs allow)"}
            ),
            Argument(
                ("--trial-cpus",),
                {
                    "type": float,
                    "help": "CPUs each trial's own process asks for (default 1; placement ray: 0 plus a bundle per "
                    "worker)",
                },
            ),
            Argument(("--address",), {"help": "the Ray cluster to run on (default: a local Ray on 127.0.0.1)"}),
        ),
        _tune,
    ),
    Command(
        "serve",
        "train the robot of a config for environments that connect over the network (RLX, docs/rlx.md)",
        (
            _config("a YAML robot config (its env gives the spaces)"),
            *(
                Argument((option,), {"type": kind, "metavar": metavar, "help": f"{text} ({key})"})
                for option, (kind, metavar, key, text) in SERVE_OPTIONS.items()
            ),
            _override(),
            Argument(
                ("--no-eval",),
                {"action": "store_true", "help": "no evaluation on local copies of the env (for remote-only envs)"},
            ),
            _QUIET,
        ),
        _serve,
        description="Listen for RLX clients, one agent per connection, and train as parl train CONFIG "
        "-o placement.name=rlx does; resume from the latest checkpoint in the log dir when there is one.",
    ),
    Command(
        "eval",
        "evaluate a checkpoint with deterministic episodes",
        (
            _config("the YAML robot config the checkpoint was trained with"),
            Argument(
                ("--checkpoint",),
                {
                    "required": True,
                    "help": "a checkpoint directory, a checkpoints directory, a run's log dir, or 'best': the "
                    "checkpoint of the best evaluation of the config's run",
                },
            ),
            Argument(("--episodes",), {"type": int, "default": 10}),
            Argument(
                ("--seed",), {"type": int, "default": 1_000_000, "help": "episode i resets its env with seed + i"}
            ),
            Argument(
                ("--video",),
                {
                    "metavar": "DIR",
                    "default": None,
                    "help": "record every episode to DIR as an MP4 (needs parl[video])",
                },
            ),
            _override(),
        ),
        _eval,
    ),
    Command(
        "export",
        "write a run's trained policy to a directory of its own",
        (
            Argument(
                ("run",), {"metavar": "RUN_DIR", "help": "a run's log dir (it holds config.yaml and checkpoints/)"}
            ),
            Argument(
                ("-o", "--out"), {"required": True, "metavar": "DIR", "help": "the directory to write the policy to"}
            ),
            Argument(
                ("--checkpoint",),
                {
                    "default": None,
                    "help": "a checkpoint of the run, or 'best': its best evaluation's (default: its latest)",
                },
            ),
        ),
        _export,
    ),
    Command(
        "plot",
        "draw learning curves of runs to a PNG",
        (
            Argument(("log_dirs",), {"nargs": "+", "metavar": "LOGDIR"}),
            Argument(("-o", "--output"), {"default": "curves.png", "help": "the PNG to write (default curves.png)"}),
        ),
        _plot,
    ),
)
