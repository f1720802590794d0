"""The share of a training run spent in its evaluations: ``parl train`` of a config, one seed after
another in this process, with the Trainer's ``evaluate_agents`` timed.

    .venv/bin/python benchmarks/eval_in_training.py examples/configs/ppo_cartpole.yaml --seeds 0 1 2

Prints one line per seed: the run's wall seconds, the seconds spent in ``evaluate_agents``
(periodic checks, their confirmations and the final evaluation), the episodes they played and the
sum of their returns (the env steps they played on CartPole, one reward per step), the
evaluation's microseconds per such step, and the part of the checks' first episodes, which play
alone (a check whose first episode misses the target plays no other). Runs with several agents
differ from run to run (which requests share a batch depends on thread timing), so their env steps
and wall seconds vary; the time per evaluation step does not depend on them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import List, Optional

import parl.experiment.train.trainer as trainer
from parl.experiment.cli.commands import main as parl_main


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    evaluate_agents = trainer.evaluate_agents
    spent = {"seconds": 0.0, "episodes": 0, "returns": 0.0, "alone": 0.0, "alone_returns": 0.0}

    def timed(*call_args, **kwargs):  # the Trainer's evaluate_agents, timed
        start = time.perf_counter()
        returns = evaluate_agents(*call_args, **kwargs)
        spent["seconds"] += time.perf_counter() - start
        spent["episodes"] += len(returns)
        spent["returns"] += sum(returns)
        if len(returns) == 1:  # a check's first episode, played alone
            spent["alone"] += time.perf_counter() - start
            spent["alone_returns"] += returns[0]
        return returns

    trainer.evaluate_agents = timed
    with tempfile.TemporaryDirectory() as root:
        for seed in args.seeds:
            spent.update(seconds=0.0, episodes=0, returns=0.0, alone=0.0, alone_returns=0.0)
            log_dir = os.path.join(root, f"seed_{seed}")
            start = time.perf_counter()
            status = parl_main(["train", args.config, "--quiet", "-o", f"seed={seed}", "-o", f"log_dir={log_dir}"])
            wall = time.perf_counter() - start
            per_step = spent["seconds"] / max(spent["returns"], 1.0) * 1e6
            print(
                f"seed {seed}: status {status}, wall {wall:.1f} s, evaluations {spent['seconds']:.1f} s "
                f"({spent['seconds'] / wall:.0%}), {spent['episodes']} episodes, return sum {spent['returns']:.0f}, "
                f"{per_step:.1f} us per unit of return; of which first episodes played alone "
                f"{spent['alone']:.1f} s, return sum {spent['alone_returns']:.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
