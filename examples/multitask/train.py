"""A2C on CartPole-v1 with and without an auxiliary reward-prediction task on the policy's trunk.

    python examples/multitask/train.py [--seeds 0 1 2] [--variants rl rl+aux] [--trunk actor]
                                       [--max-steps 50000] [--target 475] [--aux-lr 1e-2]

Variant ``rl`` is examples/a2c_cartpole.py's robot (8 agents, one task
"RL"); ``rl+aux`` adds the task "Aux" (:class:`RewardPrediction`), whose
model shares the RL model's hidden layers and input statistics, and whose
helpers get the same steps. Both train with ``parl.utils.train_until`` until a
greedy check reaches ``--target`` or ``--max-steps`` env steps pass; one row
per run, then the median per variant.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
from typing import Dict, List

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # examples/: the RL task's settings

import a2c_cartpole  # noqa: E402
from multitask_robot import MultitaskAgent, make_aux_helper, make_aux_settings, shared_parts  # noqa: E402

import parl  # noqa: E402
from parl.utils import train_until  # noqa: E402

VARIANTS = ("rl", "rl+aux")


def make_env() -> gym.Env:
    return gym.make(a2c_cartpole.ENV_ID)


def build(variant: str, seed: int, agents: int, trunk: str, aux_lr: float) -> parl.Manager:
    """The robot of ``variant``, its agents added, seeded with ``seed``."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
    rl = a2c_cartpole.Settings(agents=agents)
    parl.seed_everything(seed)
    tasks = {"RL": a2c_cartpole.make_settings(rl)}
    shared = None
    if variant == "rl+aux":
        tasks["Aux"] = make_aux_settings(hidden_sizes=rl.hidden_sizes, learning_rate=aux_lr)
        shared = shared_parts(trunk)
    manager = parl.Manager(tasks, shared=shared)
    for i in range(agents):
        agent_seed = seed * 1000 + i
        helpers = {"RL": a2c_cartpole.make_helper(rl, agent_seed)}
        if variant == "rl+aux":
            helpers["Aux"] = make_aux_helper(rl.sample_interval)
        manager.add_agent(MultitaskAgent(make_env(), seed=agent_seed), helpers)
    return manager


def run(variant: str, seed: int, *, agents: int, trunk: str, aux_lr: float, max_steps: int, target: float) -> Dict:
    """Train one robot; ``train_until``'s result plus the auxiliary task's updates."""
    manager = build(variant, seed, agents, trunk, aux_lr)
    settings = a2c_cartpole.make_settings(a2c_cartpole.Settings(agents=agents))  # the evaluator's: RL alone
    result = train_until(
        manager,
        settings,
        make_env,
        target=target,
        max_steps=max_steps,
        seed=seed,
        check_from=0.3 * target,
        verbose=False,
    )
    result["variant"] = variant
    aux = manager.tasks.get("Aux")
    result["aux_updates"] = aux.update_steps if aux is not None else 0
    result["end_auc"] = termination_auc(aux, seed=2_000_000 + seed) if aux is not None else float("nan")
    return result


def termination_auc(task: parl.ComputationTask, *, seed: int, episodes: int = 300) -> float:
    """How well the task's ``end_probability`` ranks the steps after which an episode terminated above
    the others (ROC AUC; 0.5 is chance), over ``episodes`` episodes of uniformly random actions."""
    env, rng = make_env(), np.random.default_rng(seed)
    observations, actions, ends = [], [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        done = False
        while not done:
            action = int(rng.integers(env.action_space.n))
            next_obs, _, terminated, truncated, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            ends.append(terminated)
            obs, done = next_obs, terminated or truncated
    env.close()
    predicted, _ = task.predict({"obs": np.asarray(observations, np.float32)}, {}, deterministic=True)
    score = predicted["end_probability"][np.arange(len(actions)), actions]
    ends = np.asarray(ends)
    ended, other = score[ends][:, None], score[~ends][None, :]
    return float((ended > other).mean() + 0.5 * (ended == other).mean())


def main(argv: List[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--trunk", choices=("actor", "critic"), default="actor", help="layers the Aux task shares")
    parser.add_argument(
        "--aux-lr",
        type=float,
        default=1e-2,
        help="the Aux task's Adam step size (1e-3: its termination head stays at chance)",
    )
    parser.add_argument("--agents", type=int, default=a2c_cartpole.Settings.agents)
    parser.add_argument("--max-steps", type=int, default=50_000)
    parser.add_argument("--target", type=float, default=475.0)
    args = parser.parse_args(argv)
    columns = ("train s", "env steps", "RL upd", "Aux upd", "final", "end AUC")
    print(f"{'variant':8s} {'seed':>4s} " + " ".join(f"{c:>9s}" for c in columns))
    steps: Dict[str, List[int]] = {v: [] for v in args.variants}
    for seed in args.seeds:
        for variant in args.variants:
            r = run(
                variant,
                seed,
                agents=args.agents,
                trunk=args.trunk,
                aux_lr=args.aux_lr,
                max_steps=args.max_steps,
                target=args.target,
            )
            steps[variant].append(r["env_steps"])
            print(
                f"{variant:8s} {seed:4d} {r['train_seconds']:9.1f} {r['env_steps']:9d} {r['updates']:9d} "
                f"{r['aux_updates']:9d} {r['greedy_mean_return']:9.1f} {r['end_auc']:9.2f}",
                flush=True,
            )
    for variant, values in steps.items():
        print(f"{variant}: median env steps {statistics.median(values):.0f} over seeds {args.seeds}")


if __name__ == "__main__":
    main(sys.argv[1:])
