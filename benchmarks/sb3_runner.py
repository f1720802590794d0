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
for the task (its ``n_timesteps`` is the step budget, and schedules such as
``lin_0.001`` run over it); ``default`` are SB3's constructor defaults with
the same budget.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import dataclass, field
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


# rl-baselines3-zoo 2.9.2, hyperparams/{ppo,dqn,a2c,sac,td3,ddpg}.yml.
# rl-zoo gives TD3 and DDPG the same Pendulum settings.
_ZOO_TD3_DDPG_PENDULUM = Setup(
    budget=20_000,
    options=dict(
        gamma=0.98,
        buffer_size=200_000,
        learning_starts=10_000,
        gradient_steps=1,
        train_freq=1,
        learning_rate=1e-3,
        policy_kwargs=dict(net_arch=[400, 300]),
    ),
    action_noise_std=0.1,
)

ZOO: Dict[Tuple[str, str], Setup] = {
    ("ppo", "CartPole-v1"): Setup(
        budget=100_000,
        n_envs=8,
        options=dict(
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate=linear(1e-3),
            clip_range=linear(0.2),
        ),
    ),
    ("dqn", "CartPole-v1"): Setup(
        budget=50_000,
        options=dict(
            learning_rate=2.3e-3,
            batch_size=64,
            buffer_size=100_000,
            learning_starts=1_000,
            gamma=0.99,
            target_update_interval=10,
            train_freq=256,
            gradient_steps=128,
            exploration_fraction=0.16,
            exploration_final_eps=0.04,
            policy_kwargs=dict(net_arch=[256, 256]),
        ),
    ),
    ("a2c", "CartPole-v1"): Setup(budget=500_000, n_envs=8, options=dict(ent_coef=0.0)),
    ("sac", "Pendulum-v1"): Setup(budget=20_000, options=dict(learning_rate=1e-3)),
    ("td3", "Pendulum-v1"): _ZOO_TD3_DDPG_PENDULUM,
    ("ddpg", "Pendulum-v1"): _ZOO_TD3_DDPG_PENDULUM,
    # The zoo's LunarLander-v2 entry, run on gymnasium's LunarLander-v3.
    ("ppo", "LunarLander-v3"): Setup(
        budget=1_000_000,
        n_envs=16,
        options=dict(n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01),
    ),
    ("ppo", "Pendulum-v1"): Setup(
        budget=100_000,
        n_envs=4,
        options=dict(
            n_steps=1024,
            gae_lambda=0.95,
            gamma=0.9,
            n_epochs=10,
            ent_coef=0.0,
            learning_rate=1e-3,
            clip_range=0.2,
            use_sde=True,
            sde_sample_freq=4,
        ),
    ),
}


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


class GreedyCheckCallback(BaseCallback):
    """Greedy checks during ``learn()``; stops training at the first that reaches the target."""

    def __init__(
        self,
        env_id: str,
        *,
        run_seed: int,
        target: float,
        check_interval: int,
        check_from: Optional[float],
        eval_episodes: int,
    ) -> None:
        super().__init__()
        self.env_id = env_id
        self.run_seed = run_seed
        self.target = target
        self.check_interval = check_interval
        self.check_from = check_from
        self.eval_episodes = eval_episodes
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
        if self.check_from is not None and np.mean(self.recent) < self.check_from:
            return True
        self.next_check = steps + self.check_interval
        seed = check_seed(self.run_seed, steps)
        self.check, passed = greedy_check(self.model, self.env_id, self.eval_episodes, self.target, seed)
        if passed or self.check > self.best_check:
            self.best_check = self.check
            self.best_policy = copy.deepcopy(self.model.policy.state_dict())
        self.reached = passed
        return not passed

    def _on_training_end(self) -> None:
        self.stop = time.perf_counter()


def train(
    algo: str,
    env_id: str,
    *,
    seed: int,
    target: float,
    settings: str = "zoo",
    check_interval: int = 1_000,
    check_from: Optional[float] = None,
    eval_episodes: int = 10,
) -> Dict[str, Any]:
    """Train SB3's ``algo`` on ``env_id`` until a greedy check reaches ``target`` or the budget runs out."""
    cpu_start = time.process_time()
    setup = setup_for(algo, env_id, settings)
    env = make_vec_env(env_id, n_envs=setup.n_envs, seed=seed)
    options = dict(setup.options)
    if setup.action_noise_std is not None:
        n_actions = env.action_space.shape[-1]
        options["action_noise"] = NormalActionNoise(np.zeros(n_actions), setup.action_noise_std * np.ones(n_actions))
    model = ALGORITHMS[algo]("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **options)
    callback = GreedyCheckCallback(
        env_id,
        run_seed=seed,
        target=target,
        check_interval=check_interval,
        check_from=check_from,
        eval_episodes=eval_episodes,
    )
    model.learn(total_timesteps=setup.budget, callback=callback)
    if callback.best_policy is not None:
        model.policy.load_state_dict(callback.best_policy)
    returns = evaluate(model, env_id, CONFIRM_FACTOR * eval_episodes, seed=final_seed(seed))  # as parl's Trainer
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
        "settings": settings,
    }


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algo", required=True, choices=sorted(ALGORITHMS))
    parser.add_argument("--env", required=True, help="gymnasium id, e.g. CartPole-v1")
    parser.add_argument("--target", type=float, required=True, help="greedy mean return that ends training")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--settings", choices=("zoo", "default"), default="zoo")
    parser.add_argument("--check-interval", type=int, default=1_000, help="env steps between greedy checks")
    parser.add_argument("--check-from", type=float, default=None, help="mean training return that starts checks")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (parl uses one)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = train(
        args.algo,
        args.env,
        seed=args.seed,
        target=args.target,
        settings=args.settings,
        check_interval=args.check_interval,
        check_from=args.check_from,
        eval_episodes=args.eval_episodes,
    )
    result["torch_threads"] = args.threads
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
