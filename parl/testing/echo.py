"""The echo task: a small deterministic robot whose every reply and update can be traced to its sender.

:class:`EchoModel` reads ``obs`` (float32 ``[2]``) and :class:`EchoAlgorithm` answers with
``action = int64(obs[0])``, so every agent can check that the reply it got is its own. ``obs[1]`` is
a marker that makes the algorithm fail or block on purpose (``PREDICT_FAIL``, ``PREDICT_BLOCK``,
``LEARN_FAIL``, ``LEARN_BLOCK``). Environments put ``1000 * code + step`` in ``obs[0]``, so the
sender of any row of a batch is ``obs[0] // 1000`` (:func:`senders`).

The placement contract (:mod:`parl.testing.placement_contract`) runs robots of these agents; tests
of a placement's own behaviour can use them too.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np
import paddle

import parl
from parl import layers

# Markers carried in obs[1].
PREDICT_FAIL = -1.0
PREDICT_BLOCK = -2.0
LEARN_FAIL = -3.0
LEARN_BLOCK = -4.0

#: How long a test waits for something that should happen at once (generous for a loaded 2-core machine).
WAIT = 5.0

OBS_SPECS = [("obs", dict(shape=[2], dtype="float32"))]
ACTION_SPECS = [("action", dict(shape=[1], dtype="int64"))]


class ToyFailure(Exception):
    """Raised by the echo task on purpose, so tests can tell it from real failures."""


# -- the task -------------------------------------------------------------------------------------


class EchoModel(parl.Model):
    """``obs`` float32 [2] in, ``action`` int64 [1] out; one fc layer so there is something to train.

    The spec lists can be replaced to test spec declarations and checks.
    """

    def __init__(
        self,
        input_specs: Optional[list] = None,
        action_specs: Optional[list] = None,
        state_specs: Optional[list] = None,
        reward_specs: Optional[list] = None,
    ) -> None:
        super().__init__()
        self._specs = {
            "input": OBS_SPECS if input_specs is None else input_specs,
            "action": ACTION_SPECS if action_specs is None else action_specs,
            "state": [] if state_specs is None else state_specs,
            "reward": [("reward", dict(shape=[1], dtype="float32"))] if reward_specs is None else reward_specs,
        }
        self.fc = layers.fc(1)

    def get_input_specs(self) -> list:
        return self._specs["input"]

    def get_action_specs(self) -> list:
        return self._specs["action"]

    def get_state_specs(self) -> list:
        return self._specs["state"]

    def get_reward_specs(self) -> list:
        return self._specs["reward"]

    def value(self, inputs: Mapping[str, paddle.Tensor]) -> paddle.Tensor:
        """A linear value of the (scaled) observations, ``[B, 1]``: what ``learn`` regresses on the reward."""
        return self.fc(inputs["obs"] * 1e-3)


class EchoAlgorithm(parl.Algorithm):
    """Predicts ``action = int64(obs[0])``; learns a regression of the reward on obs.

    Records every batch it sees. A batch holding a ``*_FAIL`` marker raises
    :class:`ToyFailure`; one holding a ``*_BLOCK`` marker sets ``entered`` and
    waits for ``gate``.
    """

    model: EchoModel  # or a subclass, from model_func

    def __init__(
        self,
        model_func: Callable[[], parl.Model] = EchoModel,
        *,
        learning_rate: float = 1e-3,
        grad_clip: Optional[float] = None,
    ) -> None:
        super().__init__(model_func, learning_rate=learning_rate, grad_clip=grad_clip)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.prediction_batches: List[np.ndarray] = []
        self.learn_batches: List[np.ndarray] = []
        #: Per learned batch, as ``learn_batches``: its rewards, ``next_episode_end`` and segment lengths.
        self.learn_rewards: List[np.ndarray] = []
        self.learn_ends: List[np.ndarray] = []
        self.learn_lengths: List[Tuple[int, ...]] = []

    def _maybe_block_or_fail(self, obs: np.ndarray, fail: float, block: float) -> None:
        if (obs[:, 1] == block).any():
            self.entered.set()
            if not self.gate.wait(30):  # a safety net only: tests open the gate
                raise ToyFailure("gate never opened")
        if (obs[:, 1] == fail).any():
            raise ToyFailure(f"marker {fail} in a batch of {len(obs)}")

    def predict(
        self, inputs: Dict[str, paddle.Tensor], states: Dict[str, paddle.Tensor], *, deterministic: bool = False
    ) -> Tuple[Dict[str, paddle.Tensor], Dict[str, paddle.Tensor]]:
        """``action = int64(obs[0])``, recording the batch (it fails or blocks on a marker)."""
        obs = inputs["obs"].numpy()
        self.prediction_batches.append(obs)
        self._maybe_block_or_fail(obs, PREDICT_FAIL, PREDICT_BLOCK)
        return {"action": paddle.cast(inputs["obs"][:, :1], "int64")}, {}

    def learn(self, batch: parl.Transition) -> Dict[str, paddle.Tensor]:
        """One regression step of the reward on obs, recording the batch (it fails or blocks on a marker);
        costs ``loss`` and ``rows`` (the batch's size)."""
        obs = batch.inputs["obs"].numpy()
        self.learn_batches.append(obs)
        self.learn_rewards.append(batch.rewards["reward"].numpy()[:, 0])
        self.learn_ends.append(batch.next_episode_end.numpy()[:, 0])
        self.learn_lengths.append(tuple(batch.sequence_lengths or (len(obs),)))
        self._maybe_block_or_fail(obs, LEARN_FAIL, LEARN_BLOCK)
        error = self.model.value(batch.inputs) - batch.rewards["reward"]
        return {"loss": (error * error).mean(), "rows": paddle.full([], float(len(obs)))}


def echo_algorithm(task: parl.ComputationTask) -> EchoAlgorithm:
    """The EchoAlgorithm of ``task`` (the placement contract's robots have no other)."""
    algorithm = task.algorithm
    assert isinstance(algorithm, EchoAlgorithm), type(algorithm).__name__
    return algorithm


def echo_algorithm_func(learning_rate: float = 1e-3, grad_clip: Optional[float] = None) -> Callable[[], EchoAlgorithm]:
    """A zero-argument callable building an EchoAlgorithm over an EchoModel, for TaskSettings."""
    return lambda: EchoAlgorithm(EchoModel, learning_rate=learning_rate, grad_clip=grad_clip)


def senders(batch_obs: np.ndarray) -> List[int]:
    """Sorted distinct sender codes of the rows of a batch."""
    return sorted({int(v) // 1000 for v in batch_obs[:, 0]})


def echo_obs(code: int, step: int, marker: float = 0.0) -> np.ndarray:
    """The observation of ``code``'s step ``step``: ``[1000 * code + step, marker]``."""
    return np.array([1000 * code + step, marker], dtype=np.float32)


def echo_batch(code: int, rows: int = 2, marker: float = 0.0) -> parl.Transition:
    """A training batch (what ComputationTask.learn takes) whose rows all come from ``code``: one
    time-ordered segment, as an on-policy helper sends, so the wrapper may join it with others."""
    obs = np.stack([echo_obs(code, i, marker) for i in range(rows)])
    return parl.Transition(
        inputs={"obs": obs},
        actions={"action": obs[:, :1].astype(np.int64)},
        rewards={"reward": np.ones((rows, 1), np.float32)},
        next_inputs={"obs": obs + np.float32(1)},
        next_episode_end=np.zeros((rows, 1), np.float32),
        states={},
        next_states={},
        sequence_lengths=(rows,),
    )


# -- environments and agents --------------------------------------------------------------------


class CountEnv:
    """Gymnasium-style episodes of ``length`` steps; obs is ``[1000 * code + step, marker]``, reward 1.

    With ``fail_at=(episode, step)`` the step call of that step raises ToyFailure.
    """

    def __init__(
        self,
        code: int,
        length: int = 5,
        marker: float = 0.0,
        fail_at: Optional[Tuple[int, int]] = None,
        truncate: bool = False,
    ) -> None:
        self.code, self.length, self.marker, self.fail_at, self.truncate = code, length, marker, fail_at, truncate
        self.episode = -1
        self.t = 0

    def reset(self, seed: Optional[int] = None) -> Tuple[np.ndarray, dict]:
        self.episode += 1
        self.t = 0
        return echo_obs(self.code, 0, self.marker), {}

    def step(self, action: int) -> Tuple[np.ndarray, float, bool, bool, dict]:
        if self.fail_at == (self.episode, self.t):
            self._explode()
        self.t += 1
        over = self.t >= self.length
        return echo_obs(self.code, self.t, self.marker), 1.0, over and not self.truncate, over and self.truncate, {}

    def _explode(self) -> None:
        raise ToyFailure(f"env {self.code} exploded in episode {self.episode} at step {self.t}")


class EchoAgent(parl.Agent):
    """Plays a CountEnv through the helper of task "T", counting replies that are not its own echo.

    ``corrupt(inputs, episode)`` may return altered inputs, to send bad data.
    """

    def __init__(
        self, env: CountEnv, *, num_games: Optional[int] = None, corrupt: Optional[Callable[[dict, int], dict]] = None
    ) -> None:
        super().__init__(env, num_games=num_games)
        self.corrupt = corrupt
        self.replies = 0
        self.mismatches = 0
        self.learned = 0  # learn() calls whose update's costs came back

    def run_one_episode(self) -> Dict[str, float]:
        helper = self.helpers["T"]
        obs, _ = self.reset_env()
        total, steps, done = 0.0, 0, False
        while not done:
            inputs = {"obs": obs}
            if self.corrupt is not None:
                inputs = self.corrupt(inputs, self.episode)
            actions, _ = helper.predict(inputs)
            self.replies += 1
            if int(actions["action"][0]) != int(obs[0]):
                self.mismatches += 1
            next_obs, reward, terminated, truncated, _ = self.env.step(int(actions["action"][0]))
            helper.store_data({"obs": obs}, actions, reward, {"obs": next_obs}, terminated, truncated)
            if helper.learn() is not None:
                self.learned += 1
            obs, total, steps, done = next_obs, total + reward, steps + 1, terminated or truncated
        return {"reward": total, "steps": steps}


class ReportingEchoAgent(EchoAgent):
    """An EchoAgent whose episode records also carry what only the agent sees, so they reach the
    test from any placement (a worker process too): ``pid``, and ``replies``, ``mismatches`` and
    ``learned`` counted since the agent started."""

    def __init__(
        self,
        env: CountEnv,
        *,
        num_games: Optional[int] = None,
        seed: Optional[int] = None,
        corrupt: Optional[Callable[[dict, int], dict]] = None,
    ) -> None:
        super().__init__(env, num_games=num_games, corrupt=corrupt)
        self.seed = seed

    def run_one_episode(self) -> Dict[str, float]:
        result = super().run_one_episode()
        counts = {"replies": self.replies, "mismatches": self.mismatches, "learned": self.learned}
        return {**result, "pid": os.getpid(), **counts}


class OnceMarkedEnv(CountEnv):
    """A CountEnv whose observations carry ``marker`` in episode ``marked_episode`` only."""

    def __init__(self, code: int, length: int = 5, marker: float = 0.0, marked_episode: int = 0) -> None:
        super().__init__(code, length=length, marker=marker)
        self.marked_episode = marked_episode

    def reset(self, seed: Optional[int] = None) -> Tuple[np.ndarray, dict]:
        obs, info = super().reset(seed)
        return self._mark(obs), info

    def step(self, action: int) -> Tuple[np.ndarray, float, bool, bool, dict]:
        obs, reward, terminated, truncated, info = super().step(action)
        return self._mark(obs), reward, terminated, truncated, info

    def _mark(self, obs: np.ndarray) -> np.ndarray:
        if self.episode != self.marked_episode:
            obs[1] = 0.0
        return obs


class SeededCountEnv(CountEnv):
    """A CountEnv whose episode lengths (2 to 7 steps) and rewards (a draw plus ``action % 3``)
    come from a generator seeded at reset, so a seeded agent plays the same episodes anywhere."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self._rng = np.random.default_rng()

    def reset(self, seed: Optional[int] = None) -> Tuple[np.ndarray, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.length = int(self._rng.integers(2, 8))
        return super().reset(seed)

    def step(self, action: int) -> Tuple[np.ndarray, float, bool, bool, dict]:
        obs, _, terminated, truncated, info = super().step(action)
        return obs, float(self._rng.random()) + action % 3, terminated, truncated, info


class TwoTaskAgent(parl.Agent):
    """Hierarchical style: every step asks task "goal", then task "follow" with the goal's answer
    (``obs[0] + 500_000``), and each task learns from its own data; the records count replies that
    were not the sender's own echo (``mismatches``)."""

    def __init__(self, env: CountEnv, *, num_games: int) -> None:
        super().__init__(env, num_games=num_games)
        self.mismatches = 0

    def run_one_episode(self) -> Dict[str, float]:
        goal, follow = self.helpers["goal"], self.helpers["follow"]
        obs, _ = self.reset_env()
        done, steps = False, 0
        while not done:
            goal_actions, _ = goal.predict({"obs": obs})
            follow_obs = np.array([obs[0] + 500_000, 0.0], np.float32)
            follow_actions, _ = follow.predict({"obs": follow_obs})
            if int(goal_actions["action"][0]) != int(obs[0]) or int(follow_actions["action"][0]) != int(follow_obs[0]):
                self.mismatches += 1
            next_obs, reward, terminated, truncated, _ = self.env.step(0)
            goal.store_data({"obs": obs}, goal_actions, reward, {"obs": next_obs}, terminated, truncated)
            follow.store_data({"obs": follow_obs}, follow_actions, reward, {"obs": follow_obs}, terminated, truncated)
            goal.learn()
            follow.learn()
            obs, steps, done = next_obs, steps + 1, terminated or truncated
        return {"reward": float(steps), "steps": steps, "mismatches": self.mismatches}


def replay_sample(code: int, rows: int = 2, marker: float = 0.0) -> parl.Transition:
    """A replay sample from ``code``: :func:`echo_batch` without its segment lengths, so the wrapper
    learns it as an update of its own, never joined with other batches."""
    return echo_batch(code, rows=rows, marker=marker)._replace(sequence_lengths=None)
