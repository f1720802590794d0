"""Every robot config of the examples trained with ``parl train``: does it reach its example's target?

    .venv/bin/python benchmarks/configs.py                          # every config but Atari, seed 0
    .venv/bin/python benchmarks/configs.py --seeds 0 1 2 --write     # the table into docs/experiments.md
    .venv/bin/python benchmarks/configs.py --only ppo_cartpole dqn_cartpole --cpus 1

Each (config, seed) runs, one at a time and each in fresh processes:

    python -m parl train CONFIG -o seed=S -o log_dir=OUT/<name>-sS --quiet
    python -m parl eval CONFIG --checkpoint OUT/<name>-sS --episodes 10      (fresh seeds)
    python -m parl plot OUT/<name>-sS -o OUT/<name>-sS.png

and the table shows the stop reason, env steps, training seconds (after set-up), the last
evaluation during training and the fresh-seed evaluation of the final checkpoint. The configs are
those of examples/configs (named by their stem) and the multi-task and hierarchical robots
(``multitask/cartpole``, ``hierarchical/hierarchical``, ``hierarchical/flat``). The Atari
config runs only when named with ``--only`` (its full budget is millions of env steps; give
``--override train.max_env_steps=...`` for a short run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_report import write_section  # noqa: E402

EXAMPLES = ROOT / "examples"
ROBOT_CONFIGS = ("multitask/cartpole", "hierarchical/hierarchical", "hierarchical/flat")
DOC = ROOT / "docs" / "experiments.md"
BEGIN, END = "<!-- configs:begin -->", "<!-- configs:end -->"
#: Runs of millions of env steps (Atari, MuJoCo with published budgets): named with --only to run them.
SKIPPED_BY_DEFAULT = ("dqn_atari", "ppo_atari", "sac_mujoco", "td3_mujoco", "ppo_halfcheetah", "ppo_hopper")


@dataclass
class ConfigRun:
    """One ``parl train`` run and the evaluation of its final checkpoint."""

    name: str
    seed: int
    stop_reason: str
    env_steps: int
    train_seconds: float
    last_eval: float
    fresh_eval: float
    target: Optional[float]
    wall_seconds: float
    plot: str


def config_path(name: str) -> Path:
    """The file of config ``name``: ``examples/configs/<name>.yaml``, or ``examples/<name>.yaml``
    for the robots of :data:`ROBOT_CONFIGS`."""
    return EXAMPLES / (f"{name}.yaml" if "/" in name else f"configs/{name}.yaml")


def config_names(only: Optional[Sequence[str]]) -> List[str]:
    """The configs to run: ``only`` (checked), else all but the Atari one."""
    names = sorted(p.stem for p in (EXAMPLES / "configs").glob("*.yaml")) + list(ROBOT_CONFIGS)
    if only:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise SystemExit(f"unknown configs {unknown}; known: {names}")
        return list(only)
    return [n for n in names if n not in SKIPPED_BY_DEFAULT]


def parl(arguments: List[str], cpus: Optional[str], timeout: float) -> subprocess.CompletedProcess:
    command = (["taskset", "-c", cpus] if cpus else []) + [sys.executable, "-m", "parl"] + arguments
    done = subprocess.run(command, cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def run_config(
    name: str, seed: int, out: Path, overrides: Sequence[str], cpus: Optional[str], timeout: float
) -> ConfigRun:
    """Train, evaluate and plot one config with one seed."""
    config = str(config_path(name))
    log_dir = out / f"{name.replace('/', '-')}-s{seed}"
    options: List[str] = []
    for item in ["seed=" + str(seed), f"log_dir={log_dir}", *overrides]:
        options += ["-o", item]
    start = time.perf_counter()
    parl(["train", config, *options, "--quiet"], cpus, timeout)
    wall = time.perf_counter() - start
    result = json.loads((log_dir / "result.json").read_text())
    resolved = yaml.safe_load((log_dir / "config.yaml").read_text())
    evaluated = parl(["eval", config, *options, "--checkpoint", str(log_dir), "--episodes", "10"], cpus, timeout)
    fresh = json.loads(evaluated.stdout.strip().splitlines()[-1])
    png = out / f"{name.replace('/', '-')}-s{seed}.png"
    parl(["plot", str(log_dir), "-o", str(png)], cpus, timeout)
    return ConfigRun(
        name=name,
        seed=seed,
        stop_reason=result["stop_reason"],
        env_steps=int(result["env_steps"]),
        train_seconds=float(result["train_seconds"]),
        last_eval=float(result["last_eval"]),
        fresh_eval=float(fresh["mean_return"]),
        target=resolved["train"].get("target_return"),
        wall_seconds=wall,
        plot=str(png),
    )


def table(runs: Sequence[ConfigRun]) -> str:
    """The runs as a markdown table."""
    lines = [
        "| config | seed | target | stop | env steps | train s | last eval | fresh-seed eval (10 ep) |",
        "|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in runs:
        target = "" if r.target is None else f"{r.target:g}"
        lines.append(
            f"| {r.name} | {r.seed} | {target} | {r.stop_reason} | {r.env_steps:,} | {r.train_seconds:.1f} | "
            f"{r.last_eval:.1f} | {r.fresh_eval:.1f} |"
        )
    return "\n".join(lines)


def section(command: str, runs: Sequence[ConfigRun], loads: Sequence[float]) -> str:
    """The generated section of docs/experiments.md, markers included."""
    machine = (
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()} with {_cores()} cores, no GPU; Python "
        f"{platform.python_version()}; 1-minute load average between {min(loads):.1f} and {max(loads):.1f} "
        "around the runs (above the core count means other jobs shared the machine)."
    )
    return "\n\n".join(
        [
            BEGIN,
            "<!-- generated by benchmarks/configs.py --write: edits up to configs:end are overwritten -->",
            "## Every example config, trained with `parl train`",
            f"```bash\n{command}\n```",
            machine,
            '"stop" is why training ended (`target return`: an evaluation\'s mean over all its episodes reached '
            'the target; `step budget`: `train.max_env_steps` ran out). "last eval" is the mean of the last '
            "evaluation during training (nan: none ran; `result.json`'s `no_evaluation` says why). "
            "The fresh-seed evaluation is `parl eval` of the final checkpoint on 10 "
            "other episode seeds; after a stop at the target that checkpoint holds exactly the weights that "
            "passed, since the robot stays paused from that evaluation on. The hierarchical and flat four-rooms "
            "robots have no target: their mean return is the share of episodes that reach the goal.",
            table(runs),
            END,
        ]
    )


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="configs to run (file stems)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--override", action="append", default=[], metavar="KEY.PATH=VALUE", help="for every run")
    parser.add_argument("--cpus", help="run everything under `taskset -c CPUS`")
    parser.add_argument("--out", help="where log dirs and PNGs go (default: a new temporary directory)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per command")
    parser.add_argument("--write", action="store_true", help="write the table into docs/experiments.md")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="parl-configs-"))
    loads, runs = [], []
    for name in config_names(args.only):
        for seed in args.seeds:
            loads.append(os.getloadavg()[0])
            run = run_config(name, seed, out, args.override, args.cpus, args.timeout)
            loads.append(os.getloadavg()[0])
            runs.append(run)
            print(
                f"{name:>24} seed {seed}: {run.stop_reason:<28} env steps {run.env_steps:7d}  "
                f"{run.train_seconds:6.1f} s  last eval {run.last_eval:7.1f}  fresh {run.fresh_eval:7.1f}",
                flush=True,
            )
    print()
    print(table(runs))
    print(f"\nlog dirs and curves in {out}")
    if args.write:
        command = "python benchmarks/configs.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(DOC, section(command.strip(), runs, loads), BEGIN, END)
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
