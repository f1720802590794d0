"""What learning without waiting buys an off-policy robot: env steps per second with
``ExpReplayHelper(max_in_flight=k)`` against waiting for each update (k = 0), at the same
update-to-data ratio.

    .venv/bin/python benchmarks/learn_handover.py                  # DQN CartPole and SAC Pendulum
    .venv/bin/python benchmarks/learn_handover.py --examples dqn_cartpole --agents 1 --in-flight 0 2
    .venv/bin/python benchmarks/learn_handover.py --thread-placement one_core   # everything on one core
    .venv/bin/python benchmarks/learn_handover.py --env-wait-ms 1   # each env step waits 1 ms (a remote simulator)

Each row trains the example's robot config (examples/configs/<example>.yaml, its agent count and
``tasks.RL.helper.max_in_flight`` changed) with the Trainer for a fixed number of env steps per
agent with no evaluation during training (one one-episode evaluation after it), in the given
placement and thread placement (``split`` by default: the training thread on a core of its own,
which is where an agent that does not wait can gain; with ``one_core`` the agents and the training
thread share one core and there is nothing to overlap),
and reports env steps per second of training and the updates made per env step (which must be
the example's ``updates_per_step`` whatever k is). The rows of one configuration are run in
turns, ``--repeats`` times, and the medians are printed, with each row's speed as a ratio to
k = 0's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import gymnasium as gym

from parl import affinity
from parl.experiment.config.robot_config import load_config
from parl.experiment.train.trainer import Trainer

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"
#: Env steps per agent and row, by example: thousands of updates past each agent's warm-up.
STEPS = {"dqn_cartpole": 10_000, "sac_pendulum": 3_000, "td3_pendulum": 3_000, "ddpg_pendulum": 3_000}


class WaitingEnv(gym.Wrapper):
    """An environment whose every step first waits ``seconds`` without holding the CPU or Python's
    lock: a stand-in for a simulator in another process or machine."""

    def __init__(self, env: gym.Env, seconds: float) -> None:
        super().__init__(env)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


def waiting_env(env_id: str, seconds: float) -> gym.Env:
    """``gymnasium.make(env_id)`` whose every step first waits ``seconds`` (a config's ``env.factory``)."""
    return WaitingEnv(gym.make(env_id), seconds)


def run_overrides(placement: str, thread_placement: str, agents: int, in_flight: int, steps: int) -> List[str]:
    """The config overrides of one row's run: no evaluation before the end, one episode then."""
    return [
        f"agents={agents}",
        f"placement={placement}",
        f"thread_placement={thread_placement}",
        f"tasks.RL.helper.max_in_flight={in_flight}",
        f"train.max_env_steps={steps}",
        "train.target_return=null",
        "evaluation.every_steps=null",
        "evaluation.episodes=1",
        "evaluation.final_episodes=1",
    ]


def run(
    example: str, placement: str, thread_placement: str, agents: int, in_flight: int, steps: int, env_wait: float
) -> Tuple[float, float]:
    """(env steps per second of training, updates per env step) of one run."""
    path = str(CONFIGS / f"{example}.yaml")
    overrides = run_overrides(placement, thread_placement, agents, in_flight, steps)
    if env_wait > 0:  # this file's folder is on sys.path, as it is for any script
        env_id = load_config(path).env.id
        overrides += ["env.id=null", "env.factory=learn_handover.waiting_env"]
        overrides.append(f"env.kwargs={{env_id: {env_id}, seconds: {env_wait}}}")
    with tempfile.TemporaryDirectory(prefix="learn-handover-") as log_dir:
        config = load_config(path, [*overrides, f"log_dir={log_dir}"])
        result = Trainer(config, progress=False).run()
    return result["env_steps"] / result["train_seconds"], result["updates"]["RL"] / result["env_steps"]


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", nargs="+", default=["dqn_cartpole", "sac_pendulum"], choices=sorted(STEPS))
    parser.add_argument("--placements", nargs="+", default=["threads", "cooperative"])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[0, 1, 2], help="max_in_flight values; 0 first")
    parser.add_argument("--repeats", type=int, default=2, help="turns over the rows of one configuration")
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiplies each example's env steps")
    parser.add_argument("--thread-placement", default="split", choices=affinity.PLACEMENTS)
    parser.add_argument("--env-wait-ms", type=float, default=0.0, help="each env step first sleeps this long")
    args = parser.parse_args(argv)
    print(f"thread placement: {args.thread_placement}; env steps wait {args.env_wait_ms} ms")

    print(
        f"{'example':<14} {'placement':<12} {'agents':>6} {'max_in_flight':>13} {'env steps/s':>12}"
        f" {'vs waiting':>10} {'updates/step':>13}  runs"
    )
    for example in args.examples:
        for placement in args.placements:
            for agents in args.agents:
                steps = int(STEPS[example] * args.steps_scale) * agents
                rates: Dict[int, List[float]] = {k: [] for k in args.in_flight}
                ratios: Dict[int, List[float]] = {k: [] for k in args.in_flight}
                for _ in range(args.repeats):
                    for k in args.in_flight:
                        rate, ratio = run(
                            example, placement, args.thread_placement, agents, k, steps, args.env_wait_ms / 1000
                        )
                        rates[k].append(rate)
                        ratios[k].append(ratio)
                base = statistics.median(rates[args.in_flight[0]])
                for k in args.in_flight:
                    rate = statistics.median(rates[k])
                    runs = ", ".join(f"{r:,.0f}" for r in rates[k])
                    print(
                        f"{example:<14} {placement:<12} {agents:>6} {k:>13} {rate:>12,.0f} {rate / base:>10.2f}"
                        f" {statistics.median(ratios[k]):>13.3f}  {runs}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
