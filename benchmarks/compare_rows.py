"""What benchmarks/compare.py measures: each parl example beside its Stable-Baselines3 counterpart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

CARTPOLE = "CartPole-v1"
PENDULUM = "Pendulum-v1"
PO_CARTPOLE = "partially observed CartPole"
LUNARLANDER = "LunarLander-v3"


@dataclass(frozen=True)
class Row:
    """One comparison: a parl example's robot config and, where SB3 has one, the same algorithm in SB3.

    Attributes:
        name: the row's key for ``--only``.
        task: the task as shown in the table.
        threshold: greedy 10-episode mean return to reach.
        algorithm: the algorithm as shown in the table.
        config: the parl example's robot config under ``examples/configs/``.
        options: ``KEY.PATH=VALUE`` overrides of the config (see benchmarks/parl_runner.py).
        sb3_algo: SB3's algorithm (benchmarks/sb3_runner.py ``--algo``), None where SB3 has none.
        sb3_env: the gymnasium id SB3 trains on.
        sb3_absent: why there is no SB3 run, shown in its place.
        sb3_check_from: mean training return from which SB3's greedy checks start (None: at once).
        sb3_tunable: whether ``--sb3-pendulum-settings`` applies (SB3 defaults may replace the zoo's).
    """

    name: str
    task: str
    threshold: float
    algorithm: str
    config: str
    options: Tuple[str, ...] = ()
    sb3_algo: Optional[str] = None
    sb3_env: Optional[str] = None
    sb3_absent: str = ""
    sb3_check_from: Optional[float] = None
    sb3_tunable: bool = False


def _config(name: str) -> str:
    return f"examples/configs/{name}.yaml"


def _cartpole(name: str, algorithm: str, sb3_algo: Optional[str], sb3_absent: str = "") -> Row:
    # SB3's checks start from 30% of the target, as examples/configs/dqn_cartpole.yaml's.
    return Row(name, CARTPOLE, 475.0, algorithm, _config(name), (), sb3_algo, CARTPOLE, sb3_absent, 142.5)


def _pendulum(name: str, algorithm: str, sb3_algo: str, threshold: float = -200.0) -> Row:
    return Row(name, PENDULUM, threshold, algorithm, _config(name), (), sb3_algo, PENDULUM, sb3_tunable=True)


def _po_cartpole(model: str, algorithm: str) -> Row:
    return Row(
        f"a2c_po_cartpole_{model}",
        PO_CARTPOLE,
        400.0,
        algorithm,
        _config("a2c_po_cartpole" if model == "lstm" else f"a2c_po_cartpole_{model}"),
        (),
        sb3_absent="SB3 has no recurrent A2C",
    )


ROWS: Tuple[Row, ...] = (
    _cartpole("pg_cartpole", "PolicyGradient (REINFORCE)", None, "SB3 has no REINFORCE"),
    _cartpole("a2c_cartpole", "A2C", "a2c"),
    _cartpole("ppo_cartpole", "PPO", "ppo"),
    _cartpole("dqn_cartpole", "DQN", "dqn"),
    _pendulum("ddpg_pendulum", "DDPG", "ddpg"),
    _pendulum("td3_pendulum", "TD3", "td3"),
    _pendulum("sac_pendulum", "SAC", "sac"),
    _pendulum("ppo_pendulum", "PPO (continuous)", "ppo", threshold=-300.0),
    _po_cartpole("lstm", "A2C, LSTM"),
    _po_cartpole("mlp", "A2C, MLP (feedforward)"),
    # rl-zoo's LunarLander settings on both sides; checks from the start (returns begin near -200).
    Row(
        "ppo_lunarlander",
        LUNARLANDER,
        200.0,
        "PPO (rl-zoo's settings)",
        _config("ppo_lunarlander"),
        (),
        "ppo",
        LUNARLANDER,
    ),
)
