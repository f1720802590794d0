"""Shared PPO and MAPPO on MPE simple_spread (3 agents, 25-step episodes), beside a published figure.

    .venv/bin/python benchmarks/simple_spread.py --configs ppo --seeds 14 15 16   # the published budget, 2M
    .venv/bin/python benchmarks/simple_spread.py --configs mappo --seeds 0 --steps 100000

Each row trains examples/configs/<config>_simple_spread.yaml with the Trainer for ``--steps`` env steps
(one env step: all three agents act) and reports the final evaluation: the greedy policy's mean agent
return per episode (our ``reward``: the mean over the three agents of each one's own return) over the
config's final episodes on fresh seeds, of the best evaluated policy of the run. Beside it, the best
evaluation during training itself (the highest mean of the config's evaluations: 100 episodes every
50,000 env steps, EPyMARL's schedule), which the choice of the best policy lifts by
chance; the target is judged on the final evaluation.

The reference is the IPPO and MAPPO return on MPE Spread of Papoudakis et al. (2021), converted to our
measure (see ``REFERENCE``); docs/multiagent.md records a run and the conversion.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from parl.experiment.config.robot_config import load_config
from parl.experiment.train.trainer import Trainer

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"

#: The published return on MPE Spread (Papoudakis et al. 2021, "Benchmarking Multi-Agent Deep
#: Reinforcement Learning Algorithms in Cooperative Tasks", NeurIPS Datasets and Benchmarks, the table of
#: maximum returns with parameter sharing, greedy evaluation): IPPO -133.86, MAPPO -133.54, after 2M env
#: steps. That return is the episode's sum of the three agents' rewards in the original MPE, where an
#: agent's reward is minus the coverage (each landmark's distance to its nearest agent, summed) minus 1
#: for every agent it collides with, itself included: -1 every step. Over 25 steps that is
#: -3 x coverage - 75 - collisions with others. mpe2's agent reward is 0.5 x (minus the coverage) - 0.5 x
#: the agent's collisions with others (local_ratio 0.5, no self-collision), so our mean agent return is
#: (published + 75) / 6. docs/multiagent.md derives it.
REFERENCE = {"ppo": (-133.86 + 75) / 6, "mappo": (-133.54 + 75) / 6}
REFERENCE_STEPS = 2_000_000


def run(config: str, seed: int, steps: int) -> Dict[str, float]:
    """Train ``config`` (``ppo`` or ``mappo``) with ``seed`` for ``steps`` env steps: its final evaluation,
    its best evaluation during training, env steps and wall seconds."""
    with tempfile.TemporaryDirectory() as log_dir:
        overrides = [f"seed={seed}", f"train.max_env_steps={steps}", f"log_dir={log_dir}"]
        robot = load_config(CONFIGS / f"{config}_simple_spread.yaml", overrides)
        start = time.perf_counter()
        result = Trainer(robot, progress=False).run()
        seconds = time.perf_counter() - start
    if result["error"] is not None:
        raise RuntimeError(f"{config} seed {seed}: {result['error']}")
    return {
        "final_eval": float(result["final_eval"]),
        "best_eval": float(result["best_eval"]),
        "env_steps": float(result["env_steps"]),
        "seconds": seconds,
    }


def table(config: str, seeds: List[int], steps: int) -> List[str]:
    """The rows of ``config`` over ``seeds``, printed as each ends, and a summary line."""
    reference = REFERENCE[config]
    lines = []
    reached = 0
    for seed in seeds:
        row = run(config, seed, steps)
        reached += row["final_eval"] >= reference
        line = (
            f"| {config} | {seed} | {row['final_eval']:.2f} | {row['best_eval']:.2f} | {int(row['env_steps'])} "
            f"| {row['seconds']:.0f} "
            f"| {reference:.1f} ({REFERENCE_STEPS // 1_000_000}M steps) |"
        )
        print(line, flush=True)
        lines.append(line)
    summary = f"{config}: reached the published figure on {reached}/{len(seeds)} seeds"
    print(summary, flush=True)
    return [*lines, summary]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", choices=sorted(REFERENCE), default=["ppo", "mappo"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument(
        "--steps", type=int, default=REFERENCE_STEPS, help="env steps per run (default: the published budget)"
    )
    args = parser.parse_args()
    print("| config | seed | final eval (best policy, fresh episodes) | best eval | env steps | wall s | published |")
    print("|---|---|---|---|---|---|---|")
    for config in args.configs:
        table(config, args.seeds, args.steps)


if __name__ == "__main__":
    main()
