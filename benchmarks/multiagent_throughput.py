"""Agent steps per second of a multi-agent robot beside single-agent robots of comparable cost per agent step.

    python benchmarks/multiagent_throughput.py [--placement cooperative] [--seconds 2] [--rounds 5]

Rows, all in one Manager placement, acting only (no learning, as benchmarks/throughput.py), each
environment agent's action from a 64-64 MLP (DQN's greedy predict) through a helper of one shared task:

- multi-agent: 8 copies of mpe2 simple_spread (N=3), each played by one PettingZooAgent with a helper
  per environment agent (24 helpers);
- single-agent, 8 and 24: copies of mpe2 simple_spread with N=1 (one agent, one landmark) seen as a
  single-agent environment, each played by a GymAgent. Its step costs about what one agent's share of
  an N=3 step costs (the script prints both), so the environments' cost per agent step is comparable.

An agent step is one environment agent's decision: one prediction served. The machine's speed drifts
when other jobs share it, so the rows take turns, ``--rounds`` times ``--seconds`` each (the others
paused meanwhile); the table gives each row's median, and the median of the per-round ratios of the
multi-agent row to each single-agent row.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
from mpe2 import simple_spread_v3

import parl
from parl.algorithms import DQN
from parl.models import MLPQModel
from parl.multiagent import PettingZooAgent
from parl.runtime import registry
from parl.utils import GymAgent

COPIES = 8
SPREAD_AGENTS = 3
NUM_ACTIONS = 5  # simple_spread's discrete actions


class OneAgentEnv:
    """A PettingZoo Parallel env of one agent as a gymnasium-style env (reset / step of that agent)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        (self.agent,) = env.possible_agents
        self.observation_space = env.observation_space(self.agent)
        self.action_space = env.action_space(self.agent)

    def reset(self, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, dict]:
        observations, infos = self.env.reset(seed=seed)
        return observations[self.agent], infos[self.agent]

    def step(self, action: Any) -> Tuple[Any, float, bool, bool, dict]:
        a = self.agent
        observations, rewards, terminations, truncations, infos = self.env.step({a: action})
        return observations[a], rewards[a], terminations[a], truncations[a], infos[a]

    def close(self) -> None:
        self.env.close()


def spread(agents: int) -> Any:
    """mpe2 simple_spread with ``agents`` agents (and as many landmarks), discrete actions, 25 steps."""
    return simple_spread_v3.parallel_env(N=agents, max_cycles=25, continuous_actions=False)


class PredictOnlyHelper(parl.AgentHelper):
    """A helper that never learns (the harness measures acting only)."""

    def _store(self, transition: Any, episode_over: bool) -> None:  # pragma: no cover - never called
        pass

    def learn(self) -> None:
        return None


class Robot(NamedTuple):
    """One row's robot: its name, its Manager (paused between turns) and its agent steps per env step."""

    name: str
    manager: parl.Manager


def robot(name: str, placement: str, obs_dim: int, agents: List[parl.Agent]) -> Robot:
    """A started, paused Manager of ``agents`` on one shared task "RL" of a 64-64 MLP over ``obs_dim`` inputs."""
    model_args = dict(obs_dim=obs_dim, num_actions=NUM_ACTIONS, hidden_sizes=(64, 64))
    algorithm_func: Callable[[], parl.Algorithm] = lambda: parl.create_algorithm_func(  # noqa: E731
        MLPQModel, model_args, DQN, {}
    )()
    manager = parl.Manager(
        {"RL": parl.TaskSettings(algorithm_func, batching=parl.Batching(max_batchsize=256))}, placement=placement
    )
    for agent in agents:
        keys = agent.helper_tasks(["RL"])
        manager.add_agent(agent, {key: PredictOnlyHelper() for key in keys})
    manager.pause()
    manager.start()
    return Robot(name, manager)


def measure(row: Robot, seconds: float) -> float:
    """Agent steps (predictions served) per second of ``row`` over ``seconds``, resumed then paused again."""
    stats = row.manager.wrappers["RL"].stats
    row.manager.resume()
    time.sleep(0.2)  # up to speed
    served, start = stats.predictions, time.perf_counter()
    time.sleep(seconds)
    rate = (stats.predictions - served) / (time.perf_counter() - start)
    row.manager.pause()
    return rate


def env_us_per_agent_step(agents: int, steps: int = 500) -> float:
    """Microseconds of one simple_spread step of ``agents`` agents, per agent, in a plain loop."""
    env = spread(agents)
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        if not env.agents:
            env.reset()
        env.step({a: 0 for a in env.agents})
    return (time.perf_counter() - start) / steps / agents * 1e6


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--placement", default="cooperative", choices=registry.names())
    parser.add_argument("--seconds", type=float, default=2.0, help="measuring time per row per round")
    parser.add_argument("--rounds", type=int, default=5, help="turns of every row")
    args = parser.parse_args(argv)

    single_obs = spread(1).observation_space("agent_0").shape[0]
    multi_obs = spread(SPREAD_AGENTS).observation_space("agent_0").shape[0]
    rows = [
        robot(
            f"multi-agent: {COPIES} envs x {SPREAD_AGENTS} agents",
            args.placement,
            multi_obs,
            [PettingZooAgent(spread(SPREAD_AGENTS), seed=i) for i in range(COPIES)],
        ),
        *(
            robot(
                f"single-agent: {n} envs",
                args.placement,
                single_obs,
                [GymAgent(OneAgentEnv(spread(1)), seed=i) for i in range(n)],
            )
            for n in (COPIES, COPIES * SPREAD_AGENTS)
        ),
    ]
    rates: Dict[str, List[float]] = {row.name: [] for row in rows}
    try:
        for _ in range(args.rounds):
            for row in rows:
                rates[row.name].append(measure(row, args.seconds))
    finally:
        for row in rows:
            row.manager.stop()
    multi = rates[rows[0].name]
    print(f"placement {args.placement!r}; medians over {args.rounds} rounds of {args.seconds:g} s per row")
    print(
        f"environment alone, us per agent step: N={SPREAD_AGENTS} {env_us_per_agent_step(SPREAD_AGENTS):.0f}, "
        f"N=1 {env_us_per_agent_step(1):.0f}"
    )
    print(f"{'row':<34} {'agent steps/s':>14} {'multi-agent / row':>18}")
    for row in rows:
        ratio = statistics.median(m / r for m, r in zip(multi, rates[row.name]))
        print(f"{row.name:<34} {statistics.median(rates[row.name]):>14,.0f} {ratio:>18.2f}")
    if any(not np.isfinite(r) for r in multi):
        raise SystemExit("a row served nothing")


if __name__ == "__main__":
    main()
