"""A2C on CartPole-v1 with and without an auxiliary reward-prediction task on the policy's trunk.

    python examples/multitask/compare.py [--seeds 0 1 2] [--variants rl rl+aux] [--trunk actor|critic]
                                         [--aux-lr 1e-2] [--log-dir runs/multitask] [-o KEY.PATH=VALUE ...]

Variant ``rl`` is the robot of examples/configs/a2c_cartpole.yaml (8 agents,
one task "RL"); ``rl+aux`` is the one of cartpole.yaml beside this file: the
same RL task and the task "Aux" (RewardPrediction), whose model shares the RL
model's hidden layers and input statistics. Each run is parl's Trainer on its
config, with ``seed``, ``log_dir`` (``<log-dir>/<variant>/seed<seed>``) and
the overrides ``-o`` (applied to both; ``train.max_env_steps=50000`` always
comes first, so ``-o`` can change it), until an evaluation reaches the
config's target return or the budget runs out. One row per run, then the
median env steps per variant.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

import parl
from parl.experiment.config.build import make_env
from parl.experiment.config.robot_config import RobotConfig, load_config
from parl.experiment.train.trainer import Trainer

HERE = Path(__file__).resolve().parent
#: The config of each variant.
CONFIGS = {"rl": HERE.parent / "configs" / "a2c_cartpole.yaml", "rl+aux": HERE / "cartpole.yaml"}
#: The layers of MLPActorCritic that ``--trunk`` lets the Aux task share.
TRUNKS = {"actor": "model.actor_hidden", "critic": "model.critic_hidden"}
#: The env-step budget of every run, unless an override changes it.
BUDGET = 50_000


def run(variant: str, seed: int, log_dir: str, overrides: Sequence[str] = ()) -> Dict[str, object]:
    """Train ``variant`` (a key of :data:`CONFIGS`) with ``seed``, logging to ``log_dir``.

    Returns the Trainer's result, plus ``aux_updates`` and ``end_auc`` (:func:`termination_auc`
    of the trained Aux task; NaN without one).

    Raises:
        ValueError: ``variant`` is not a key of :data:`CONFIGS`.
        ConfigError: an override does not fit the config.
    """
    if variant not in CONFIGS:
        raise ValueError(f"variant must be one of {list(CONFIGS)}, got {variant!r}")
    config = load_config(
        str(CONFIGS[variant]), [f"train.max_env_steps={BUDGET}", *overrides, f"seed={seed}", f"log_dir={log_dir}"]
    )
    trainer = Trainer(config, progress=False)
    result = trainer.run()
    aux = trainer.manager.tasks.get("Aux")
    return {
        **result,
        "aux_updates": aux.update_steps if aux is not None else 0,
        "end_auc": termination_auc(aux, config, seed=2_000_000 + seed) if aux is not None else float("nan"),
    }


def termination_auc(task: parl.ComputationTask, config: RobotConfig, *, seed: int, episodes: int = 300) -> float:
    """How well the task's ``end_probability`` ranks the steps after which an episode terminated above
    the others (ROC AUC; 0.5 is chance), over ``episodes`` episodes of uniformly random actions in
    the environment of ``config``."""
    env, rng = make_env(config), np.random.default_rng(seed)
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


def main(argv: Optional[List[str]] = None) -> Dict[str, List[Dict[str, object]]]:
    """The command line: train every variant for every seed; print a row per run and the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--trunk", choices=list(TRUNKS), default="actor", help="layers the Aux task shares")
    parser.add_argument(
        "--aux-lr", type=float, default=None, help="the Aux task's Adam step size (default: the config's, 1e-2)"
    )
    parser.add_argument("--log-dir", default="runs/multitask", help="runs go to LOG_DIR/<variant>/seed<seed>")
    parser.add_argument("-o", "--override", action="append", default=[], metavar="KEY.PATH=VALUE")
    args = parser.parse_args(argv)
    aux_overrides = [f"shared.trunk.RL={TRUNKS[args.trunk]}"]
    if args.aux_lr is not None:
        aux_overrides.append(f"tasks.Aux.algorithm.learning_rate={args.aux_lr}")
    columns = ("train s", "env steps", "RL upd", "Aux upd", "last eval", "end AUC", "stop")
    print(f"{'variant':8s} {'seed':>4s} " + " ".join(f"{c:>9s}" for c in columns))
    results: Dict[str, List[Dict[str, object]]] = {v: [] for v in args.variants}
    for seed in args.seeds:
        for variant in args.variants:
            overrides = [*args.override, *(aux_overrides if variant == "rl+aux" else [])]
            r = run(variant, seed, os.path.join(args.log_dir, variant, f"seed{seed}"), overrides)
            results[variant].append(r)
            print(
                f"{variant:8s} {seed:4d} {r['train_seconds']:9.1f} {r['env_steps']:9d} {r['updates']['RL']:9d} "
                f"{r['aux_updates']:9d} {r['last_eval']:9.1f} {r['end_auc']:9.2f}  {r['stop_reason']}",
                flush=True,
            )
    for variant, runs in results.items():
        steps = [r["env_steps"] for r in runs]
        print(f"{variant}: median env steps {statistics.median(steps):.0f} over seeds {args.seeds}")
    return results


if __name__ == "__main__":
    main()
