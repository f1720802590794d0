"""Exploring agents: epsilon-greedy for discrete actions; a uniformly random start, then Gaussian or
Ornstein-Uhlenbeck action noise, for continuous ones. None explores when evaluating (``training`` False).

    agent:
      class: parl.utils.EpsilonGreedyAgent
      epsilon: {class: parl.utils.LinearSchedule, start: 1.0, end: 0.02, steps: 2000}

    agent: {class: parl.utils.GaussianNoiseAgent, noise_std: 0.1, random_steps: 1000}

Continuous agents act in [-1, 1] (what :func:`parl.utils.env_action_converter`
scales to the Box's bounds). Each agent draws from its own generator seeded
with its seed.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

from parl.utils.gym_agent import GymAgent
from parl.utils.observations import ObservationMapper
from parl.validation import check_int, check_positive

ArrayDict = Dict[str, np.ndarray]


class EpsilonGreedyAgent(GymAgent):
    """Acts uniformly at random (the action space's own sampler) with probability
    ``epsilon(total_steps)``, by the policy otherwise and always when evaluating.

    Args:
        env: a gymnasium environment with a Discrete action space.
        epsilon: the exploration rate by this agent's step (a :class:`parl.utils.LinearSchedule`).
        seed: seeds the coin flips (``random.Random(seed)``), the first reset and the action space.
        task: the name of the task whose helper acts and learns.
        observation_inputs: as :class:`~parl.utils.GymAgent`'s.
    """

    def __init__(
        self,
        env: Any,
        *,
        epsilon: Callable[[int], float],
        seed: int,
        task: str = "RL",
        observation_inputs: Optional[Union[str, ObservationMapper]] = None,
    ) -> None:
        super().__init__(env, task=task, seed=seed, observation_inputs=observation_inputs)
        if not callable(epsilon):
            raise ValueError(f"epsilon must be a schedule called with the step, got {epsilon!r}")
        self.epsilon = epsilon
        self.rng = random.Random(seed)

    def act(self, inputs: ArrayDict, states: ArrayDict) -> Tuple[ArrayDict, ArrayDict]:
        """A random action with probability epsilon while training, else the policy's."""
        if self.training and self.rng.random() < self.epsilon(self.total_steps):
            return {"action": np.array([self.env.action_space.sample()], dtype=np.int64)}, {}
        return super().act(inputs, states)


class RandomStartAgent(GymAgent):
    """Acts uniformly at random in [-1, 1] for its first ``random_steps`` steps, then by the policy;
    always by the policy when evaluating.

    Args:
        env: a gymnasium environment with a Box action space.
        random_steps: steps of uniformly random actions at the start (0: none).
        seed: seeds the random actions (``numpy.random.default_rng(seed)``), the first reset and the action space.
        task: the name of the task whose helper acts and learns.
        observation_inputs: as :class:`~parl.utils.GymAgent`'s.
    """

    def __init__(
        self,
        env: Any,
        *,
        task: str = "RL",
        random_steps: int,
        seed: int,
        observation_inputs: Optional[Union[str, ObservationMapper]] = None,
    ) -> None:
        super().__init__(env, task=task, seed=seed, observation_inputs=observation_inputs)
        self.random_steps = check_int("random_steps", random_steps, 0)
        self.rng = np.random.default_rng(seed)
        self.action_shape = env.action_space.shape

    def act(self, inputs: ArrayDict, states: ArrayDict) -> Tuple[ArrayDict, ArrayDict]:
        """A uniformly random action during the random start, else the policy's."""
        if self.training and self.total_steps < self.random_steps:
            return {"action": self.rng.uniform(-1.0, 1.0, self.action_shape).astype(np.float32)}, {}
        return super().act(inputs, states)


class GaussianNoiseAgent(RandomStartAgent):
    """After the random start, adds N(0, ``noise_std``^2) to the policy's action and clips to [-1, 1]
    (the exploration of Fujimoto et al., 2018); no noise when evaluating.

    Args:
        noise_std: the noise's standard deviation, in the policy's [-1, 1] units.
        random_steps, seed, task, observation_inputs: as :class:`RandomStartAgent`; the noise comes from the
            same generator.
    """

    def __init__(
        self,
        env: Any,
        *,
        random_steps: int,
        seed: int,
        noise_std: float,
        task: str = "RL",
        observation_inputs: Optional[Union[str, ObservationMapper]] = None,
    ) -> None:
        super().__init__(env, random_steps=random_steps, seed=seed, task=task, observation_inputs=observation_inputs)
        self.noise_std = check_positive("noise_std", noise_std)

    def act(self, inputs: ArrayDict, states: ArrayDict) -> Tuple[ArrayDict, ArrayDict]:
        """The policy's action plus Gaussian noise, clipped, after the random start while training."""
        if not self.training or self.total_steps < self.random_steps:
            return super().act(inputs, states)
        actions, next_states = GymAgent.act(self, inputs, states)
        noisy = actions["action"] + self.rng.normal(0.0, self.noise_std, self.action_shape)
        return {"action": np.clip(noisy, -1.0, 1.0).astype(np.float32)}, next_states


class OUNoise:
    """Ornstein-Uhlenbeck noise: ``x += theta * (-x) * dt + sigma * sqrt(dt) * N(0, 1)`` per call,
    from zero after :meth:`reset` (the exploration of Lillicrap et al., 2016).

    Args:
        shape: the shape of one sample.
        rng: the generator the normal draws come from.
        theta: the pull back to zero per unit time.
        sigma: the scale of the random drive.
        dt: the time step of one call.
    """

    def __init__(
        self,
        shape: Tuple[int, ...],
        rng: np.random.Generator,
        *,
        theta: float = 0.15,
        sigma: float = 0.2,
        dt: float = 1e-2,
    ) -> None:
        self.shape = tuple(shape)
        self.rng = rng
        self.theta = check_positive("theta", theta)
        self.sigma = check_positive("sigma", sigma)
        self.dt = check_positive("dt", dt)
        self.state = np.zeros(self.shape)

    def reset(self) -> None:
        """Start again from zero (at every episode's start)."""
        self.state = np.zeros(self.shape)

    def __call__(self) -> np.ndarray:
        """The next sample."""
        drive = self.sigma * np.sqrt(self.dt) * self.rng.normal(0.0, 1.0, self.shape)
        self.state = self.state - self.theta * self.state * self.dt + drive
        return self.state


class OUNoiseAgent(RandomStartAgent):
    """After the random start, adds :class:`OUNoise` (reset at every episode's start) to the policy's
    action and clips to [-1, 1]; no noise when evaluating.

    Args:
        theta, sigma, dt: as :class:`OUNoise`.
        random_steps, seed, task, observation_inputs: as :class:`RandomStartAgent` (one generator draws
            the random start and the noise).
    """

    def __init__(
        self,
        env: Any,
        *,
        random_steps: int,
        seed: int,
        theta: float = 0.15,
        sigma: float = 0.2,
        dt: float = 1e-2,
        task: str = "RL",
        observation_inputs: Optional[Union[str, ObservationMapper]] = None,
    ) -> None:
        super().__init__(env, random_steps=random_steps, seed=seed, task=task, observation_inputs=observation_inputs)
        self.noise = OUNoise(self.action_shape, self.rng, theta=theta, sigma=sigma, dt=dt)

    def reset_env(self) -> Any:
        """Reset the environment and the noise."""
        self.noise.reset()
        return super().reset_env()

    def act(self, inputs: ArrayDict, states: ArrayDict) -> Tuple[ArrayDict, ArrayDict]:
        """The policy's action plus OU noise, clipped, after the random start while training."""
        if not self.training or self.total_steps < self.random_steps:
            return super().act(inputs, states)
        actions, next_states = GymAgent.act(self, inputs, states)
        noisy = actions["action"] + self.noise()
        return {"action": np.clip(noisy, -1.0, 1.0).astype(np.float32)}, next_states


__all__ = [
    "EpsilonGreedyAgent",
    "GaussianNoiseAgent",
    "OUNoise",
    "OUNoiseAgent",
    "RandomStartAgent",
]
