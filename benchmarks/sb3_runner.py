"""One Stable-Baselines3 training run to a greedy target, checked as parl's Trainer checks.

    .venv-sb3/bin/python benchmarks/sb3_runner.py --algo ppo --env CartPole-v1 --target 475 --seed 0

Runs in its own virtualenv (``make .venv-sb3``, benchmarks/requirements-sb3.txt),
so it imports neither parl nor paddle. Every ``--check-interval`` env steps
(once the mean of the last 20 training returns reaches ``--check-from``) it
plays one deterministic episode on a fresh environment and, when that one
reaches the target, nine more, and when their mean does, fifty more to
confirm: training stops at the first check whose confirmation reaches the
target and whose mean over all 60, less two standard errors, does too (parl's
``confirmed_check`` in parl/experiment/evaluation/greedy.py, same seeds). The
policy of that check (or of the best, when none passed) is then evaluated on
50 fresh seeds (five times the check's episodes, as parl's Trainer). The time
runs from the start of ``learn()`` (after imports and model set-up) to that
stop. Prints one line ``RESULT {json}`` with the keys of benchmarks/parl_runner.py,
plus ``cpu_seconds``: the process's CPU time over the whole call (set-up,
training, final evaluation), less sensitive than wall time to a shared machine.

Settings: ``zoo`` are rl-baselines3-zoo 2.9.2's ``hyperparams/<algo>.yml``
for the task, transcribed in benchmarks/sb3_zoo.json (its ``n_timesteps`` is
the step budget, and schedules such as ``lin_0.001`` run over it); ``default``
are SB3's constructor defaults with the same budget.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.noise import NormalActionNoise

ALGORITHMS = {"a2c": A2C, "ddpg": DDPG, "dqn": DQN, "ppo": PPO, "sac": SAC, "td3": TD3}
RECENT_EPISODES = 20  # training returns averaged for --check-from, as parl's Trainer


def linear(initial: float) -> Callable[[float], float]:
    """The zoo's ``lin_<initial>`` schedule: ``initial`` times the fraction of the budget left."""
    return lambda progress_remaining: progress_remaining * initial


@dataclass
class Setup:
    """How to build one SB3 model: ``n_envs`` copies, constructor options, and the env step budget."""

    budget: int
    n_envs: int = 1
    options: Dict[str, Any] = field(default_factory=dict)
    action_noise_std: Optional[float] = None  # zoo ``noise_type: normal`` with ``noise_std``


#: rl-baselines3-zoo 2.9.2's settings, as its hyperparams/<algo>.yml files write them (see its "_source").
ZOO_FILE = Path(__file__).resolve().with_name("sb3_zoo.json")
#: Entries of a zoo setting that are not constructor options.
_NOT_OPTIONS = ("n_timesteps", "n_envs", "noise_type", "noise_std")


def zoo_setup(entry: Dict[str, Any]) -> Setup:
    """The :class:`Setup` of one zoo entry: ``n_timesteps`` the budget, ``lin_<x>`` values :func:`linear`
    schedules, ``noise_type: normal`` with ``noise_std`` the action noise, the rest constructor options.

    Raises:
        ValueError: a noise type other than ``normal``.
    """
    if entry.get("noise_type", "normal") != "normal":
        raise ValueError(f"only normal action noise is supported, got noise_type {entry['noise_type']!r}")
    options = {
        key: linear(float(value[4:])) if isinstance(value, str) and value.startswith("lin_") else value
        for key, value in entry.items()
        if key not in _NOT_OPTIONS
    }
    return Setup(entry["n_timesteps"], entry.get("n_envs", 1), options, entry.get("noise_std"))


def load_zoo(path: Path) -> Dict[Tuple[str, str], Setup]:
    """The setups of ``path`` (benchmarks/sb3_zoo.json) by (algorithm, environment id); an entry that is an
    algorithm's name stands for that algorithm's entry of the same environment."""
    table = {algo: envs for algo, envs in json.loads(path.read_text(encoding="utf-8")).items() if algo in ALGORITHMS}
    return {
        (algo, env_id): zoo_setup(table[entry][env_id] if isinstance(entry, str) else entry)
        for algo, envs in table.items()
        for env_id, entry in envs.items()
    }


ZOO = load_zoo(ZOO_FILE)


def setup_for(algo: str, env_id: str, settings: str) -> Setup:
    """The zoo's setup, or SB3's defaults on the zoo's budget (``settings == "default"``).

    Raises:
        ValueError: no zoo entry for ``(algo, env_id)``, or an unknown ``settings``.
    """
    if (algo, env_id) not in ZOO:
        raise ValueError(f"no rl-baselines3-zoo settings for {algo!r} on {env_id!r}; known: {sorted(ZOO)}")
    if settings == "zoo":
        return ZOO[algo, env_id]
    if settings == "default":
        return Setup(budget=ZOO[algo, env_id].budget)
    raise ValueError(f"settings must be 'zoo' or 'default', got {settings!r}")


def evaluate(model: BaseAlgorithm, env_id: Union[str, Callable[[], gym.Env]], episodes: int, seed: int) -> List[float]:
    """Returns of ``episodes`` deterministic episodes on ``env_id`` (a gymnasium id, or a function making
    the environment); episode ``i`` resets with ``seed + i``. As parl's evaluation, the episodes play at
    once with one batched prediction per step."""
    envs = [gym.make(env_id) if isinstance(env_id, str) else env_id() for _ in range(episodes)]
    try:
        obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
        totals, active = [0.0] * episodes, list(range(episodes))
        while active:
            actions, _ = model.predict(np.stack([obs[i] for i in active]), deterministic=True)
            still = []
            for action, i in zip(actions, active):
                obs[i], reward, terminated, truncated, _ = envs[i].step(action)
                totals[i] += float(reward)
                if not (terminated or truncated):
                    still.append(i)
            active = still
    finally:
        for env in envs:
            env.close()
    return totals


CONFIDENCE = 2.0  # parl.experiment.evaluation.greedy.CONFIDENCE
CONFIRM_FACTOR = 5  # parl.experiment.evaluation.greedy.CONFIRM_FACTOR


def check_seed(run_seed: int, env_steps: int) -> int:
    """parl.experiment.evaluation.greedy.check_seed: the first episode seed of a check, in the run's own block."""
    return ((run_seed + 1) << 32) + env_steps


def final_seed(run_seed: int) -> int:
    """parl.experiment.evaluation.greedy.final_seed: the first episode seed of the final evaluation."""
    return ((run_seed + 1) << 32) + (1 << 31)


def greedy_check(model: BaseAlgorithm, env_id: str, episodes: int, target: float, seed: int) -> Tuple[float, bool]:
    """parl's ``confirmed_check`` (parl/experiment/evaluation/greedy.py) as parl's Trainer calls it, which this
    virtualenv cannot import: one deterministic episode, ``episodes - 1`` more when it reaches
    ``target``, and when their mean does, ``5 * episodes`` more on the next seeds to confirm. Returns
    the mean of all played and whether the confirmation's mean and the mean of all less
    ``CONFIDENCE`` standard errors reach ``target``."""
    returns = evaluate(model, env_id, 1, seed)
    if returns[0] >= target and episodes > 1:
        returns += evaluate(model, env_id, episodes - 1, seed + 1)
    if len(returns) < episodes or np.mean(returns) < target:
        return float(np.mean(returns)), False
    confirmation = evaluate(model, env_id, CONFIRM_FACTOR * episodes, seed + episodes)
    every = np.asarray(returns + confirmation)
    bound = every.mean() - CONFIDENCE * every.std(ddof=1) / np.sqrt(every.size)
    return float(every.mean()), bool(np.mean(confirmation) >= target and bound >= target)


@dataclass(frozen=True)
class Run:
    """One training run: the command line's options (``--env`` is ``env_id``) and their defaults."""

    algo: str
    env_id: str
    target: float
    seed: int = 0
    settings: str = "zoo"
    check_interval: int = 1_000  # env steps between greedy checks
    check_from: Optional[float] = None  # the mean training return that starts the checks
    eval_episodes: int = 10


class GreedyCheckCallback(BaseCallback):
    """Greedy checks during ``learn()``; stops training at the first that reaches the target."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self.run = run
        self.recent: List[float] = []
        self.episodes = 0
        self.next_check = 0
        self.check = float("nan")
        self.best_check = float("-inf")
        self.reached = False
        self.best_policy: Optional[Dict[str, torch.Tensor]] = None
        self.start = 0.0
        self.stop = 0.0

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.episodes += 1
                self.recent = (self.recent + [float(info["episode"]["r"])])[-RECENT_EPISODES:]
        steps = self.model.num_timesteps
        if not self.recent or steps < self.next_check:
            return True
        run = self.run
        if run.check_from is not None and np.mean(self.recent) < run.check_from:
            return True
        self.next_check = steps + run.check_interval
        seed = check_seed(run.seed, steps)
        self.check, passed = greedy_check(self.model, run.env_id, run.eval_episodes, run.target, seed)
        if passed or self.check > self.best_check:
            self.best_check = self.check
            self.best_policy = copy.deepcopy(self.model.policy.state_dict())
        self.reached = passed
        return not passed

    def _on_training_end(self) -> None:
        self.stop = time.perf_counter()


def train(run: Run) -> Dict[str, Any]:
    """Train SB3's ``run.algo`` on ``run.env_id`` until a greedy check reaches ``run.target`` or the budget
    runs out."""
    cpu_start = time.process_time()
    algo, env_id, seed = run.algo, run.env_id, run.seed
    setup = setup_for(algo, env_id, run.settings)
    env = make_vec_env(env_id, n_envs=setup.n_envs, seed=seed)
    options = dict(setup.options)
    if setup.action_noise_std is not None:
        n_actions = env.action_space.shape[-1]
        options["action_noise"] = NormalActionNoise(np.zeros(n_actions), setup.action_noise_std * np.ones(n_actions))
    model = ALGORITHMS[algo]("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **options)
    callback = GreedyCheckCallback(run)
    model.learn(total_timesteps=setup.budget, callback=callback)
    if callback.best_policy is not None:
        model.policy.load_state_dict(callback.best_policy)
    returns = evaluate(model, env_id, CONFIRM_FACTOR * run.eval_episodes, seed=final_seed(seed))  # as parl's Trainer
    return {
        "seed": seed,
        "train_seconds": callback.stop - callback.start,
        "env_steps": int(model.num_timesteps),
        "episodes": callback.episodes,
        "greedy_check": callback.check,
        "best_greedy_check": callback.best_check,
        "reached": callback.reached,
        "greedy_mean_return": float(np.mean(returns)),
        "cpu_seconds": time.process_time() - cpu_start,
        "budget": setup.budget,
        "settings": run.settings,
    }


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", required=True, choices=sorted(ALGORITHMS))
    parser.add_argument("--env", dest="env_id", required=True, help="gymnasium id, e.g. CartPole-v1")
    parser.add_argument("--target", type=float, required=True, help="greedy mean return that ends training")
    parser.add_argument("--seed", type=int, default=Run.seed)
    parser.add_argument("--settings", choices=("zoo", "default"), default=Run.settings)
    parser.add_argument(
        "--check-interval", type=int, default=Run.check_interval, help="env steps between greedy checks"
    )
    parser.add_argument("--check-from", type=float, default=None, help="mean training return that starts checks")
    parser.add_argument("--eval-episodes", type=int, default=Run.eval_episodes)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (parl uses one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = train(Run(**{option.name: getattr(args, option.name) for option in fields(Run)}))
    result["torch_threads"] = args.threads
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
