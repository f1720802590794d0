"""The contract every algorithm of parl.algorithms keeps (parl.testing.AlgorithmContract), over all of them:
predictions shaped by the specs, finite named costs, exact save/load round trips, identical single-agent
runs under one seed, bad hyperparameters named in a ValueError."""

from __future__ import annotations

from typing import List

from parl.testing import AlgorithmCase, AlgorithmContract


def _cases() -> List[AlgorithmCase]:
    from parl.algorithms.a2c import A2C
    from parl.algorithms.appo import APPO
    from parl.algorithms.ddpg import DDPG
    from parl.algorithms.dqn import DQN
    from parl.algorithms.impala import IMPALA
    from parl.algorithms.policy_gradient import PolicyGradient
    from parl.algorithms.ppo import PPO
    from parl.algorithms.sac import SAC
    from parl.algorithms.td3 import TD3
    from parl.models import LSTMActorCritic, MLPActorCritic, MLPQModel
    from parl.models.continuous import DeterministicActorCritic, GaussianActorCritic

    Case = AlgorithmCase
    q = dict(obs_dim=4, num_actions=2, hidden_sizes=(16,))
    discrete = dict(obs_dim=4, num_actions=2, hidden_sizes=(16,))
    gaussian = dict(obs_dim=3, action_dim=1, hidden_sizes=(16,))
    lstm = dict(obs_dim=4, num_actions=2, hidden_size=8)
    continuous = dict(obs_dim=3, action_dim=1, hidden_sizes=(16,))
    ppo = dict(epochs=2, num_minibatches=2)
    # Minibatches by size, learning rate and clip range annealed to 0 within the contract's batches.
    ppo_annealed = dict(
        epochs=2, minibatch_size=5, learning_rate_schedule="linear", clip_range_schedule="linear", schedule_steps=60
    )
    return [
        Case("DQN", DQN, MLPQModel, q, {}, "CartPole-v1", False),
        Case("DQN-dueling", DQN, MLPQModel, {**q, "dueling": True}, {}, "CartPole-v1", False),
        Case(
            "DQN-prioritized-3-step",
            DQN,
            MLPQModel,
            q,
            {},
            "CartPole-v1",
            False,
            dict(prioritized=True, n_step=3, gamma=0.99),
        ),
        Case("PolicyGradient", PolicyGradient, MLPActorCritic, discrete, {}, "CartPole-v1", True),
        Case("PolicyGradient-gaussian", PolicyGradient, MLPActorCritic, gaussian, {}, "Pendulum-v1", True),
        Case("A2C", A2C, MLPActorCritic, discrete, {}, "CartPole-v1", True),
        Case("A2C-gaussian", A2C, MLPActorCritic, gaussian, {}, "Pendulum-v1", True),
        Case("A2C-lstm", A2C, LSTMActorCritic, lstm, {}, "CartPole-v1", True),
        Case("PPO", PPO, MLPActorCritic, discrete, ppo, "CartPole-v1", True),
        Case("PPO-annealed", PPO, MLPActorCritic, discrete, ppo_annealed, "CartPole-v1", True),
        Case("PPO-gaussian", PPO, MLPActorCritic, gaussian, ppo, "Pendulum-v1", True),
        Case("PPO-lstm", PPO, LSTMActorCritic, lstm, ppo, "CartPole-v1", True),
        Case("IMPALA", IMPALA, MLPActorCritic, discrete, {}, "CartPole-v1", True),
        Case("IMPALA-lstm", IMPALA, LSTMActorCritic, lstm, {}, "CartPole-v1", True),
        Case("APPO", APPO, MLPActorCritic, discrete, ppo, "CartPole-v1", True),
        Case("APPO-gaussian", APPO, MLPActorCritic, gaussian, ppo, "Pendulum-v1", True),
        Case("DDPG", DDPG, DeterministicActorCritic, {**continuous, "num_critics": 1}, {}, "Pendulum-v1", False),
        Case("TD3", TD3, DeterministicActorCritic, continuous, {}, "Pendulum-v1", False),
        Case("SAC", SAC, GaussianActorCritic, continuous, {}, "Pendulum-v1", False),
        Case("SAC-3-step", SAC, GaussianActorCritic, continuous, {}, "Pendulum-v1", False, dict(n_step=3, gamma=0.99)),
    ]


CASES = _cases()


class TestParlAlgorithms(AlgorithmContract):
    cases = CASES


def test_every_exported_algorithm_is_under_contract() -> None:
    import parl.algorithms

    exported = {getattr(parl.algorithms, name) for name in parl.algorithms.__all__}
    exported = {cls for cls in exported if isinstance(cls, type) and issubclass(cls, parl.Algorithm)}
    covered = {case.algorithm_class for case in CASES}
    assert exported <= covered, sorted(cls.__name__ for cls in exported - covered)
