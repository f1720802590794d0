"""What learning without waiting buys an off-policy robot: env steps per second with
``ExpReplayHelper(max_in_flight=k)`` against waiting for each update (k = 0), at the same
update-to-data ratio.

    .venv/bin/python benchmarks/learn_handover.py                  # DQN CartPole and SAC Pendulum
    .venv/bin/python benchmarks/learn_handover.py --examples dqn_cartpole --agents 1 --in-flight 0 2
    .venv/bin/python benchmarks/learn_handover.py --thread-placement one_core   # everything on one core
    .venv/bin/python benchmarks/learn_handover.py --env-wait-ms 1   # each env step waits 1 ms (a remote simulator)

Each row trains the example's robot (its own settings, ``max_in_flight`` changed) for a fixed
number of env steps per agent with no greedy checks (the target is out of reach), in the given
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
import time
from pathlib import Path
from typing import Dict, List, Mapping, Tuple

import gymnasium as gym
from parl_runner import load_example

import parl
import parl.utils.training as training
from parl import affinity

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
#: Env steps per agent and row, by example: thousands of updates past each agent's warm-up.
STEPS = {"dqn_cartpole": 10_000, "sac_pendulum": 3_000, "td3_pendulum": 3_000, "ddpg_pendulum": 3_000}


def use_thread_placement(thread_placement: str) -> None:
    """Make the examples' training loop (``parl.utils.training.train_agents``) build its Manager with
    ``thread_placement``: the examples' ``train`` does not take it."""
    original = training.Manager

    def manager(tasks: Mapping[str, parl.TaskSettings], *, placement: str, thread_placement: str) -> parl.Manager:
        return original(tasks, placement=placement, thread_placement=chosen)

    chosen = thread_placement
    training.Manager = manager


class WaitingEnv(gym.Wrapper):
    """An environment whose every step first waits ``seconds`` without holding the CPU or Python's
    lock: a stand-in for a simulator in another process or machine."""

    def __init__(self, env: gym.Env, seconds: float) -> None:
        super().__init__(env)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


def run(example: str, placement: str, agents: int, in_flight: int, steps: int, env_wait: float) -> Tuple[float, float]:
    """(env steps per second of training, updates per env step) of one run."""
    module = load_example(EXAMPLES / f"{example}.py")
    if env_wait > 0:
        make_env = module.make_env
        module.make_env = lambda: WaitingEnv(make_env(), env_wait)
    settings = module.Settings(agents=agents, max_in_flight=in_flight)
    result = module.train(
        seed=0, max_steps=steps, target=1e9, eval_episodes=1, settings=settings, verbose=False, placement=placement
    )
    return result["env_steps"] / result["train_seconds"], result["updates"] / result["env_steps"]


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
    use_thread_placement(args.thread_placement)
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
                        rate, ratio = run(example, placement, agents, k, steps, args.env_wait_ms / 1000)
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
