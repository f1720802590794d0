"""parl beside Stable-Baselines3 on the heavy workloads at fixed settings: training speed over a fixed
budget (Atari DQN, SAC on HalfCheetah, PPO on Atari), or with ``--learn`` the mean return at a budget.

    .venv/bin/python benchmarks/workloads.py                         # every throughput row, seed 0; prints the table
    .venv/bin/python benchmarks/workloads.py --write                 # the same, into docs/benchmarks.md
    .venv/bin/python benchmarks/workloads.py --only sac-halfcheetah --budget 2000 --no-sb3
    .venv/bin/python benchmarks/workloads.py --double-q              # parl's DQN rows as Double DQN (its config's)
    .venv/bin/python benchmarks/workloads.py --learn --seeds 0 1 2   # mean return at 100k env steps (hours)

Each row trains parl and SB3 in separate processes at once, parl pinned to one core and SB3 to the other
(``--side-cpus``, default 1 0, as benchmarks/compare.py's), one intra-op thread each, the same seeds.
parl's side is benchmarks/parl_runner.py on the row's config (examples/configs) with the row's overrides;
SB3's is benchmarks/sb3_workloads.py in ``.venv-sb3`` (``make .venv-sb3``), rl-baselines3-zoo's settings.
The rows (see :data:`THROUGHPUT` and :data:`LEARN`):

- ``dqn-atari``: DQN on ALE/Pong-v5 (Nature CNN), one env, each action for 4 frames, ALE's sticky actions
  at 0.25 on both sides (examples/configs/dqn_atari.yaml's; SB3's AtariWrapper over ``frameskip=1``), one
  update of 32 per 4 action steps after 1,000 transitions, a replay of 100k, SB3's target (the target
  network picks the next action; ``--double-q``: parl's Double DQN), epsilon 1 -> 0.01 over 1M action steps.
- ``sac-halfcheetah``: SAC on HalfCheetah-v5, 256x256, batch 256, one update per env step after 1,000
  uniformly random steps (the config's 10,000 cut for the benchmark).
- ``ppo-atari``: PPO on ALE/Pong-v5 with rl-zoo's Atari settings: 8 envs, n_steps 128, 4 epochs,
  minibatches of 256, no sticky actions (examples/configs/ppo_atari.yaml; SB3: ``make_atari_env(n_envs=8)``,
  a DummyVecEnv, and ``VecFrameStack(4)``).

Speeds are per action step (all environments together) and per frame (4 to an Atari action step), over
the wall time of training (parl: ``Trainer.run()``'s ``train_seconds``; SB3: ``learn()``) and over the
process CPU time of that call, which other jobs on the machine inflate less. The ratio is parl's speed
over SB3's: above 1, parl is faster. ``--learn`` trains :data:`LEARN`'s rows to their budget and gives
the mean greedy return of the final policy on the seeds of parl's final evaluation, per seed and over
seeds. parl's PPO row runs 8 action steps (one per agent) past the budget: its Trainer would otherwise stop
as the last update starts and fail (see :class:`Workload`). ``--write`` replaces the section between this
script's markers in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import math
import os
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from compare import DOC, PARL_RUNNER, ROOT, SB3_PYTHON, cpu_model, load, run_command, sb3_versions, version
from compare_report import PARL, SB3, SideRun, write_section

SB3_SIDE = ROOT / "benchmarks" / "sb3_workloads.py"
MARKERS = {
    False: ("<!-- workloads:begin -->", "<!-- workloads:end -->"),
    True: ("<!-- workloads-learn:begin -->", "<!-- workloads-learn:end -->"),
}
#: parl overrides of every run: no evaluation during training, no periodic checkpoint.
COMMON_OPTIONS = ("evaluation.every_steps=null", "checkpoint.every_minutes=null")
DQN_SB3_TARGET = "tasks.RL.algorithm.double_q=false"
DQN_DOUBLE = "tasks.RL.algorithm.double_q=true"


@dataclass(frozen=True)
class Workload:
    """One row: a parl config with overrides beside an SB3 workload of benchmarks/sb3_workloads.py.

    Attributes:
        name: the row's key for ``--only``, and SB3's ``--workload``.
        task: the task as shown in the table.
        algorithm: the algorithm as shown in the table.
        config: parl's robot config.
        options: parl overrides (``KEY.PATH=VALUE``) besides the budget, warm-up and :data:`COMMON_OPTIONS`.
        budget: action steps of training, all environments together.
        frame_skip: frames per action step: parl counts env steps in frames on Atari (1: no frames).
        warmup: action steps before learning on both sides (None: the algorithm has none).
        warmup_keys: parl's settings of the warm-up (its transitions, and its random actions if any).
        eval_episodes: ``--learn``: greedy episodes of the final evaluation (parl's ``final_episodes``).
        parl_extra: action steps parl's side runs past the budget. PPO: one per agent, so that parl's stop
            falls after the last rollout's update rather than at its start (the Trainer gives a stop 5 s,
            less than a PPO update of 1,024 Atari frames on one core takes, and the run then fails).
    """

    name: str
    task: str
    algorithm: str
    config: str
    options: Tuple[str, ...]
    budget: int
    frame_skip: int = 1
    warmup: Optional[int] = None
    warmup_keys: Tuple[str, ...] = ()
    eval_episodes: int = 0
    parl_extra: int = 0

    @property
    def dqn(self) -> bool:
        return DQN_SB3_TARGET in self.options


DQN_WARMUP = ("tasks.RL.helper.warmup_steps",)
SAC_WARMUP = ("agent.random_steps", "tasks.RL.helper.warmup_steps")

THROUGHPUT: Tuple[Workload, ...] = (
    Workload(
        "dqn-atari",
        "Pong (ALE v5, sticky 0.25)",
        "DQN, Nature CNN, 1 env",
        "examples/configs/dqn_atari.yaml",
        # one agent, rl-zoo's replay of 100k and its epsilon over 1M action steps (4M frames)
        ("agents=1", "tasks.RL.helper.capacity=100000", "agent.epsilon.steps=4000000", DQN_SB3_TARGET),
        budget=6_000,
        frame_skip=4,
        warmup=1_000,
        warmup_keys=DQN_WARMUP,
    ),
    Workload(
        "sac-halfcheetah",
        "HalfCheetah-v5",
        "SAC 256x256, batch 256",
        "examples/configs/sac_mujoco.yaml",
        (),
        budget=4_000,
        warmup=1_000,
        warmup_keys=SAC_WARMUP,
    ),
    Workload(
        "ppo-atari",
        "Pong (ALE v5, no sticky actions)",
        "PPO, Nature CNN, 8 envs x 128",
        "examples/configs/ppo_atari.yaml",
        (),
        budget=8 * 128 * 4,
        frame_skip=4,
        parl_extra=8,
    ),
)

LEARN: Tuple[Workload, ...] = (
    Workload(
        "sac-halfcheetah",
        "HalfCheetah-v5",
        "SAC 256x256 (rl-zoo)",
        "examples/configs/sac_mujoco.yaml",
        (),
        budget=100_000,
        warmup=10_000,
        warmup_keys=SAC_WARMUP,
        eval_episodes=25,
    ),
    Workload(
        "dqn-minatar",
        "MinAtar Breakout",
        "DQN, 3-step, examples/configs/dqn_minatar.yaml",
        "examples/configs/dqn_minatar.yaml",
        (DQN_SB3_TARGET,),
        budget=100_000,
        warmup=1_000,
        warmup_keys=DQN_WARMUP,
        eval_episodes=50,
    ),
)


class Outcome(SideRun[Workload]):
    """One side's run of one row and seed of benchmarks/workloads.py."""

    @property
    def action_steps(self) -> float:
        steps = float(self.result["env_steps"])
        return steps / self.row.frame_skip if self.side == PARL else steps

    @property
    def speed(self) -> float:
        """Action steps per wall second of training."""
        return self.action_steps / self.result["train_seconds"]

    @property
    def cpu_speed(self) -> float:
        """Action steps per CPU second of the training call."""
        return self.action_steps / self.result["run_cpu_seconds"]


def warmup_for(row: Workload, budget: int) -> Optional[int]:
    """The row's warm-up, cut to half the budget when the budget is shorter than twice it (smoke runs)."""
    return None if row.warmup is None else min(row.warmup, budget // 2)


def parl_command(row: Workload, seed: int, budget: int, args: argparse.Namespace) -> List[str]:
    """benchmarks/parl_runner.py's command training ``row`` for ``budget`` action steps."""
    options = [*COMMON_OPTIONS, *row.options, f"train.max_env_steps={(budget + row.parl_extra) * row.frame_skip}"]
    warmup = warmup_for(row, budget)
    options += [f"{key}={warmup}" for key in row.warmup_keys]
    if row.dqn and args.double_q:
        options = [DQN_DOUBLE if option == DQN_SB3_TARGET else option for option in options]
    command = [sys.executable, str(PARL_RUNNER), "--config", str(ROOT / row.config), "--seed", str(seed)]
    if args.learn:
        # the evaluation at the end of training goes to the best-policy record; the final one is the figure
        options.append(f"evaluation.final_episodes={row.eval_episodes}")
    else:
        command.append("--no-eval")
    return command + [arg for option in options for arg in ("--option", option)]


def sb3_command(row: Workload, seed: int, budget: int, args: argparse.Namespace) -> List[str]:
    """benchmarks/sb3_workloads.py's command training ``row`` for ``budget`` action steps."""
    command = [str(args.sb3_python), str(SB3_SIDE), "--workload", row.name, "--seed", str(seed)]
    command += ["--budget", str(budget), "--threads", str(args.sb3_threads)]
    warmup = warmup_for(row, budget)
    if warmup is not None:
        command += ["--learning-starts", str(warmup)]
    if args.learn:
        command += ["--eval-episodes", str(row.eval_episodes)]
    return command


def progress(outcome: Outcome) -> None:
    head = f"{outcome.row.name:>16} {outcome.side:>4} seed {outcome.seed}:"
    if outcome.result is None:
        print(f"{head} error: {outcome.error}", flush=True)
        return
    r = outcome.result
    text = (
        f"{head} {outcome.action_steps:,.0f} action steps, {r['updates']} updates, {r['train_seconds']:.1f} s "
        f"({r['run_cpu_seconds']:.1f} CPU s): {outcome.speed:.1f} action steps/s"
    )
    if not math.isnan(r.get("greedy_mean_return", math.nan)):
        text += f", greedy mean return {r['greedy_mean_return']:.1f}"
    print(text, flush=True)


def measure(rows: Sequence[Workload], args: argparse.Namespace, loads: List[float]) -> List[Outcome]:
    """Every row and seed, parl's and SB3's runs at once on their own cores; 1-minute load averages go to ``loads``."""
    outcomes: List[Outcome] = []
    cpus = {PARL: args.side_cpus[0], SB3: args.side_cpus[1]}
    for row in rows:
        budget = args.budget or row.budget
        for seed in args.seeds:
            jobs = []
            if not args.sb3_only:
                jobs.append((Outcome(row, PARL, seed), parl_command(row, seed, budget, args)))
            if not args.no_sb3:
                jobs.append((Outcome(row, SB3, seed), sb3_command(row, seed, budget, args)))

            def run(job: Tuple[Outcome, List[str]]) -> Outcome:
                outcome, command = job
                outcome.result, outcome.error = run_command(command, cpus[outcome.side], args.timeout)
                return outcome

            with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
                for outcome in pool.map(run, jobs):
                    progress(outcome)
                    outcomes.append(outcome)
            loads.append(load())
    return outcomes


def _median(outcomes: Sequence[Outcome], value: Callable[[Outcome], float]) -> Optional[float]:
    values = [value(o) for o in outcomes if o.result is not None]
    return statistics.median(values) if values else None


def _side(outcomes: Sequence[Outcome], row: Workload, side: str) -> List[Outcome]:
    return [o for o in outcomes if o.row is row and o.side == side]


def _number(value: Optional[float], digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _ratio(parl: Optional[float], sb3: Optional[float]) -> str:
    return "n/a" if parl is None or not sb3 else f"{parl / sb3:.2f}"


def throughput_table(rows: Sequence[Workload], outcomes: Sequence[Outcome]) -> str:
    """One line per row: each side's action steps and frames per second, updates, speed per CPU second, ratios."""
    lines = [
        "| workload | algorithm | action steps | parl steps/s | parl frames/s | parl updates | parl steps/CPU-s "
        "| SB3 steps/s | SB3 frames/s | SB3 updates | SB3 steps/CPU-s | parl/SB3 (wall) | parl/SB3 (CPU) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        cells = [f"{row.name}: {row.task}", row.algorithm]
        speeds = {}
        for side in (PARL, SB3):
            runs = _side(outcomes, row, side)
            speed, cpu_speed = _median(runs, lambda o: o.speed), _median(runs, lambda o: o.cpu_speed)
            speeds[side] = (speed, cpu_speed)
            if side == PARL:
                cells.append(_number(_median(runs, lambda o: o.action_steps), 0))
            if runs and all(o.result is None for o in runs):
                cells += [f"error: {runs[0].error}", "", "", ""]
                continue
            frames = None if speed is None or row.frame_skip == 1 else speed * row.frame_skip
            updates = _median(runs, lambda o: float(o.result.get("gradient_steps", o.result["updates"])))
            cells += [_number(speed), "–" if row.frame_skip == 1 else _number(frames, 0), _number(updates, 0)]
            cells.append(_number(cpu_speed))
        cells += [_ratio(speeds[PARL][0], speeds[SB3][0]), _ratio(speeds[PARL][1], speeds[SB3][1])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def learn_table(rows: Sequence[Workload], outcomes: Sequence[Outcome]) -> str:
    """One line per row: each side's greedy mean return at the budget, over seeds and per seed."""
    lines = [
        "| workload | algorithm | env steps | parl mean return (per seed) | SB3 mean return (per seed) |",
        "|---|---|---:|---|---|",
    ]
    for row in rows:
        cells = [f"{row.name}: {row.task}", row.algorithm]
        ran = _side(outcomes, row, PARL) or _side(outcomes, row, SB3)
        cells.append(_number(_median(ran, lambda o: o.action_steps), 0))
        for side in (PARL, SB3):
            runs = _side(outcomes, row, side)
            returns = [o.result["greedy_mean_return"] for o in runs if o.result is not None]
            errors = [o.error for o in runs if o.result is None]
            text = f"{statistics.mean(returns):.1f} ({', '.join(f'{r:.1f}' for r in returns)})" if returns else "n/a"
            cells.append(text + (f"; error: {errors[0]}" if errors else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine(args: argparse.Namespace, loads: Sequence[float]) -> str:
    """Where and how the figures were measured."""
    return (
        f"Measured {datetime.date.today().isoformat()} on {cpu_model()}, {os.cpu_count()} cores; 1-minute load "
        f"average between {min(loads):.1f} and {max(loads):.1f} around the runs. parl's runs pinned to CPU "
        f"{args.side_cpus[0]} and SB3's to CPU {args.side_cpus[1]} with `taskset`, the two sides of a row at "
        f"once, one intra-op thread each. parl side: paddlepaddle {version('paddlepaddle')}, gymnasium "
        f"{version('gymnasium')}, ale-py {version('ale-py')}, mujoco {version('mujoco')}. SB3 side (`.venv-sb3`, "
        f"benchmarks/requirements-sb3.txt): {sb3_versions(args.sb3_python, ('ale-py', 'mujoco'))}, "
        f"{args.sb3_threads} torch thread(s)."
    )


METHOD = """\
Each row trains both sides from scratch for the budget and times the training alone (parl: `Trainer.run()`,
whose `train_seconds` runs from the agents' start to their stop; SB3: `learn()`), after imports, environment
and model set-up. **steps/s**: action steps (all environments together) per wall second; **frames/s**: four
frames to an Atari action step; **steps/CPU-s**: per second of the process's CPU time in that call, the figure
other jobs on the machine inflate least. **updates**: gradient steps (PPO: 16 per rollout of 1,024 action steps,
4 epochs of 4 minibatches of 256). **parl/SB3**: parl's speed over SB3's, above 1 when parl is faster. Replay
memory per stored Atari transition is benchmarks/replay_memory.py's (its own table)."""

LEARN_METHOD = """\
Each row trains both sides to the budget with the settings of the config (SAC: rl-zoo's `mujoco-defaults`,
10,000 random steps; DQN on MinAtar: examples/configs/dqn_minatar.yaml, mirrored in SB3 with MinAtar's network
and SB3's target, and its `n_steps=3`), then plays the greedy policy on the seeds of parl's final evaluation
(25 episodes on HalfCheetah, 50 on MinAtar). A full run takes hours."""


def section(args: argparse.Namespace, command: str, loads: Sequence[float], table: str) -> str:
    """The generated section of docs/benchmarks.md, markers included."""
    begin, end = MARKERS[args.learn]
    title = "mean return at a budget" if args.learn else "training speed on the heavy workloads"
    return "\n\n".join(
        [
            begin,
            f"<!-- generated by benchmarks/workloads.py --write: edits up to {end[5:-4]} are overwritten -->",
            f"## parl beside Stable-Baselines3: {title}",
            f"```bash\n{command}\n```",
            machine(args, loads),
            LEARN_METHOD if args.learn else METHOD,
            table,
            end,
        ]
    )


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = sorted({row.name for row in THROUGHPUT + LEARN})
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME", help=f"rows to run, of: {names}")
    parser.add_argument("--learn", action="store_true", help="mean return at the budget instead of speed")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 0 (0 1 2 with --learn)")
    parser.add_argument("--budget", type=int, default=None, help="action steps of every row (default: the row's)")
    parser.add_argument("--double-q", action="store_true", help="parl's DQN rows as Double DQN (SB3 has none)")
    sides = parser.add_mutually_exclusive_group()
    sides.add_argument("--no-sb3", action="store_true", help="parl's side only")
    sides.add_argument("--sb3-only", action="store_true", help="SB3's side only")
    parser.add_argument("--side-cpus", nargs=2, default=("1", "0"), metavar=("PARL_CPU", "SB3_CPU"))
    parser.add_argument("--sb3-python", type=Path, default=SB3_PYTHON, help="the Python of .venv-sb3")
    parser.add_argument("--sb3-threads", type=int, default=1, help="torch threads of SB3 (parl uses one)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds before one run is stopped")
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    parser.add_argument("--doc", type=Path, default=DOC, help="the file --write updates")
    args = parser.parse_args(argv)
    if args.seeds is None:
        args.seeds = [0, 1, 2] if args.learn else [0]
    return args


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    rows = [row for row in (LEARN if args.learn else THROUGHPUT) if args.only is None or row.name in args.only]
    if not rows:
        sys.exit(f"none of {args.only} is a {'--learn' if args.learn else 'throughput'} row")
    if not args.no_sb3 and not args.sb3_python.exists():
        sys.exit(f"{args.sb3_python} not found: build it with `make .venv-sb3` (or pass --no-sb3)")
    loads = [load()]
    outcomes = measure(rows, args, loads)
    table = learn_table(rows, outcomes) if args.learn else throughput_table(rows, outcomes)
    print(f"\n{cpu_model()}, {os.cpu_count()} cores\n{table}")
    if args.write:
        python = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable
        command = shlex.join([python, "benchmarks/workloads.py", *argv])
        write_section(args.doc, section(args, command, loads, table), *MARKERS[args.learn])
        print(f"\nwrote {args.doc}")


if __name__ == "__main__":
    main()
