"""Each parl example beside Stable-Baselines3 on the same task: env steps and seconds to a greedy target.

    make bench-compare                         # builds .venv-sb3, then: compare.py --side-cpus 1 0 --write
    .venv/bin/python benchmarks/compare.py                       # every row, seeds 0-9; prints the tables
    .venv/bin/python benchmarks/compare.py --cpus 1 --write      # the same, pinned to core 1, into docs/benchmarks.md
    .venv/bin/python benchmarks/compare.py --only dqn_cartpole ppo_cartpole --seeds 0 --no-sb3
    .venv/bin/python benchmarks/compare.py --only dqn_cartpole --no-sb3 --option tasks.RL.algorithm.tau=0.02

Every (row, side, seed) trains in a fresh process, one after another, so
runs share no state, do not compete for cores, and imports are not timed: parl's side
trains the example's robot config with the Trainer through
benchmarks/parl_runner.py, SB3's runs benchmarks/sb3_runner.py in the
``.venv-sb3`` virtualenv (``make .venv-sb3``). Both stop at the first greedy
check whose 10-episode mean reaches the row's target and is confirmed on 50
more episodes (one deterministic episode every 1,000 env steps, nine more
when it passes, fifty more to confirm). The tables give, per row and side, the
seeds that reached the target of the seeds run (default 0-9), the reached
seeds whose final evaluation on fresh seeds is at the target too, and the
median env steps and seconds over the seeds that reached. A row whose
config does not exist yet shows "missing"; SB3 shows "n/a" where it has no
counterpart. ``--write`` replaces the section between
``<!-- compare:begin -->`` and ``<!-- compare:end -->`` in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from compare_report import PARL, SB3, Run, Side, runs_table, section, summary_table, write_section
from compare_rows import ROWS, Row

ROOT = Path(__file__).resolve().parents[1]
SB3_PYTHON = ROOT / ".venv-sb3" / "bin" / "python"
PARL_RUNNER = ROOT / "benchmarks" / "parl_runner.py"
SB3_RUNNER = ROOT / "benchmarks" / "sb3_runner.py"
DOC = ROOT / "docs" / "benchmarks.md"
CHECK_INTERVAL = 1_000  # env steps between greedy checks, on both sides


def parl_command(row: Row, seed: int, options: Sequence[str] = ()) -> List[str]:
    """The command that trains ``row``'s parl config once, with the row's options and then ``options``
    (``KEY.PATH=VALUE`` overrides of the config; see benchmarks/parl_runner.py)."""
    command = [sys.executable, str(PARL_RUNNER), "--config", str(ROOT / row.config), "--seed", str(seed)]
    command += ["--target", str(row.threshold), "--check-interval", str(CHECK_INTERVAL)]
    return command + [arg for option in (*row.options, *options) for arg in ("--option", option)]


def sb3_command(row: Row, seed: int, settings: str, threads: int) -> List[str]:
    """The command that trains ``row``'s SB3 counterpart once."""
    command = [str(SB3_PYTHON), str(SB3_RUNNER), "--algo", row.sb3_algo, "--env", row.sb3_env]
    command += ["--target", str(row.threshold), "--seed", str(seed), "--settings", settings, "--threads", str(threads)]
    command += ["--check-interval", str(CHECK_INTERVAL)]
    if row.sb3_check_from is not None:
        command += ["--check-from", str(row.sb3_check_from)]
    return command


def run_command(command: List[str], cpus: Optional[str], timeout: float) -> Tuple[Optional[dict], Optional[str]]:
    """Run ``command`` (under ``taskset -c cpus`` when given); returns its last ``RESULT {json}`` line,
    parsed, or None and the reason there is none (its last line of stderr, at most 200 characters)."""
    if cpus:
        command = ["taskset", "-c", cpus] + command
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None, f"stopped after {timeout:.0f} s"
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return None, last.replace("|", "/")[:200]
    return json.loads(lines[-1][len("RESULT ") :]), None


def run_once(run: Run, command: List[str], cpus: Optional[str], timeout: float) -> Run:
    """Run ``command`` (under ``taskset -c cpus`` when given) and keep its ``RESULT`` line or its error."""
    run.result, run.error = run_command(command, cpus, timeout)
    return run


def sb3_settings(row: Row, pendulum_settings: str) -> str:
    """The settings SB3 trains ``row`` with: the zoo's, or its defaults where the row allows and it was asked."""
    return pendulum_settings if row.sb3_tunable else "zoo"


def settings_label(settings: str) -> str:
    return {"zoo": "rl-zoo tuned", "default": "SB3 defaults"}[settings]


def progress(run: Run) -> None:
    if run.result is None:
        print(f"{run.row.name:>22} {run.side:>4} seed {run.seed}: error: {run.error}", flush=True)
        return
    r = run.result
    print(
        f"{run.row.name:>22} {run.side:>4} seed {run.seed}: {'reached' if run.reached else 'NOT reached'} "
        f"check {r['greedy_check']:.1f}  env steps {r['env_steps']}  {r['train_seconds']:.1f} s  "
        f"(CPU {r['cpu_seconds']:.1f} s whole call)  final greedy {r['greedy_mean_return']:.1f}",
        flush=True,
    )


def measure(
    rows: Sequence[Row], args: argparse.Namespace, loads: List[float]
) -> Tuple[Dict[str, Dict[str, Side]], List[Run]]:
    """Train every row's sides for every seed, alternating sides so drifts of machine speed hit both alike.

    Appends the 1-minute load average after each run to ``loads``.

    Returns:
        the sides of each row by row name and side (PARL, SB3), and every run in the order it ran.
    """
    sides: Dict[str, Dict[str, Side]] = {}
    runs: List[Run] = []
    for row in rows:
        settings = sb3_settings(row, args.sb3_pendulum_settings)
        parl = Side(status="not run" if args.sb3_only else "")
        if not parl.status and not (ROOT / row.config).exists():
            parl.status = "missing"
        sb3 = Side(status="not run" if args.no_sb3 else "", settings=settings_label(settings) if row.sb3_algo else "")
        if row.sb3_algo is None:
            sb3.status = f"n/a ({row.sb3_absent})"
        parl_runs, sb3_runs = [], []
        parl_cpus, sb3_cpus = args.side_cpus if args.side_cpus else (args.cpus, args.cpus)
        for seed in args.seeds:
            jobs = []
            if not parl.status:
                jobs.append((parl_runs, Run(row, PARL, seed), parl_command(row, seed, args.option), parl_cpus))
            if not sb3.status:
                jobs.append(
                    (sb3_runs, Run(row, SB3, seed), sb3_command(row, seed, settings, args.sb3_threads), sb3_cpus)
                )
            if args.side_cpus:
                # The two sides at once, each alone on its own core.
                with concurrent.futures.ThreadPoolExecutor(len(jobs) or 1) as pool:
                    done = list(pool.map(lambda job: run_once(job[1], job[2], job[3], args.timeout), jobs))
            else:
                done = [run_once(job[1], job[2], job[3], args.timeout) for job in jobs]
            for job, run in zip(jobs, done):
                job[0].append(run)
                progress(run)
                loads.append(load())
        parl.runs, sb3.runs = parl_runs, sb3_runs
        sides[row.name] = {PARL: parl, SB3: sb3}
        runs += parl_runs + sb3_runs
    return sides, runs


def version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def sb3_versions(python: Path = SB3_PYTHON, packages: Sequence[str] = ()) -> str:
    """Versions in the SB3 virtualenv of ``python``, as one line: torch, SB3, gymnasium, numpy, then ``packages``."""
    if not python.exists():
        return "no .venv-sb3"
    names = ("torch", "stable-baselines3", "gymnasium", "numpy", *packages)
    code = f"import importlib.metadata as m; print(', '.join(f'{{p}} {{m.version(p)}}' for p in {names!r}))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip().splitlines()[-1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def load() -> float:
    """The 1-minute load average (0 where the system does not tell)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def machine(args: argparse.Namespace, loads: Sequence[float]) -> str:
    """Where and how the figures were measured; ``loads``: 1-minute load averages before and after each run."""
    memory = next(
        (line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")),
        None,
    )
    memory_text = f", {int(memory) / 2**20:.0f} GiB" if memory else ""
    if args.side_cpus:
        pinning = (
            f"parl's and SB3's runs of a seed side by side, parl pinned to CPU {args.side_cpus[0]} and SB3 to "
            f"CPU {args.side_cpus[1]} with `taskset`; one run per core at a time"
        )
    else:
        pinning = (
            f"one at a time, pinned to CPU {args.cpus} with `taskset -c {args.cpus}`"
            if args.cpus
            else "one at a time, not pinned"
        )
    cores = os.cpu_count() or 1
    # parl's runs are several threads each, all counted in the load average even when pinned to one core,
    # so a load above the core count does not tell other jobs from the runs' own threads.
    shared = (
        " The load rose above the core count (the runs' own agent threads count in it, and any other job):"
        " wall seconds may be inflated; env steps and CPU seconds are the steadier figures."
        if max(loads) > cores + 0.5
        else ""
    )
    return (
        f"Measured {datetime.date.today().isoformat()} on {cpu_model()}, {cores} cores{memory_text}; "
        f"1-minute load average between {min(loads):.1f} and {max(loads):.1f} around the runs. "
        f"parl side: Python {platform.python_version()}, paddlepaddle {version('paddlepaddle')}, "
        f"gymnasium {version('gymnasium')}, numpy {version('numpy')}. "
        f"SB3 side (`.venv-sb3`, benchmarks/requirements-sb3.txt): {sb3_versions()}, "
        f"{args.sb3_threads} torch thread(s). Runs {pinning}.{shared}"
    )


METHOD = """\
Both sides stop training at the first greedy check that reaches the target and is confirmed: one
deterministic episode every 1,000 env steps (seeds from `check_seed(seed, steps)`, in a block of the
run's own), nine more when it reaches the target, and when their mean does, fifty more on the next
seeds; training stops only when the mean of those fifty reaches the target and so does the mean of all
sixty less two standard errors (`parl.experiment.evaluation.greedy.confirmed_check`; SB3's side,
benchmarks/sb3_runner.py, does the same with the same seeds). Checks start once the mean of the last 20
training returns reaches a level: parl's example configs set their own (30% of the target on CartPole,
from the start on Pendulum), and SB3's side uses the same. **Reached** counts the seeds whose training stopped at
the target within the budget; **final at target** counts, among those, the seeds whose policy also
reached the target in a final evaluation of 50 episodes on seeds no check used (`final_seed(seed)`, in
the run's own block: runs of different seeds are evaluated on different episodes). **Env steps** (all
environment copies together, at the stop) and **seconds** (wall time from the start of training, after
imports and set-up, to the stop) are medians over the seeds that reached the target. "rl-zoo tuned":
rl-baselines3-zoo 2.9.2's hyperparameters for the task (`hyperparams/<algo>.yml`), whose `n_timesteps`
is the budget (PPO CartPole 100k, DQN CartPole 50k, A2C CartPole 500k, SAC, TD3 and DDPG Pendulum 20k,
PPO Pendulum 100k); "SB3 defaults": SB3's constructor defaults with the same budget. parl's budgets are
the configs' `train.max_env_steps`. "missing": the config does not exist yet. "CPU s (whole call)" in
the table of every run is the process's CPU time over set-up, training and the final evaluation: less
inflated than wall time when other jobs share the machine."""


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = [row.name for row in ROWS]
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME", help=f"rows to run, of: {names}")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    sides = parser.add_mutually_exclusive_group()
    sides.add_argument("--no-sb3", action="store_true", help="train parl's side only")
    sides.add_argument("--sb3-only", action="store_true", help="train SB3's side only")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an override of every parl config run (KEY.PATH=VALUE, as parl train -o), "
        "to measure a change: e.g. --option tasks.RL.algorithm.tau=1.0",
    )
    parser.add_argument("--write", action="store_true", help="write the tables into docs/benchmarks.md")
    parser.add_argument("--doc", type=Path, default=DOC, help="the file --write updates")
    parser.add_argument("--cpus", default=None, help="run every training under `taskset -c CPUS` (e.g. 1)")
    parser.add_argument(
        "--side-cpus",
        nargs=2,
        metavar=("PARL_CPU", "SB3_CPU"),
        help="run the parl and SB3 trainings of a seed at once, each pinned to its own core (halves wall time)",
    )
    parser.add_argument("--sb3-threads", type=int, default=1, help="torch threads of SB3 (parl uses one)")
    parser.add_argument(
        "--sb3-pendulum-settings",
        choices=("zoo", "default"),
        default="zoo",
        help="SB3's settings on Pendulum: rl-zoo's or SB3's defaults (CartPole always uses rl-zoo's tuned ones)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before one run is stopped")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    rows = [row for row in ROWS if args.only is None or row.name in args.only]
    if not args.no_sb3 and any(row.sb3_algo for row in rows) and not SB3_PYTHON.exists():
        sys.exit(f"{SB3_PYTHON} not found: build it with `make .venv-sb3` (or pass --no-sb3)")
    loads = [load()]
    sides, runs = measure(rows, args, loads)
    summary, every_run = summary_table(rows, sides), runs_table(runs)
    print("\n" + summary + "\n\n" + every_run)
    if args.write:
        python = os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable
        command = shlex.join([python, "benchmarks/compare.py", *argv])
        write_section(args.doc, section(command, machine(args, loads), METHOD, summary, every_run))
        print(f"\nwrote {args.doc}")


if __name__ == "__main__":
    main()
