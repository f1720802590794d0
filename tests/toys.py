"""Small deterministic models, algorithms, environments and agents shared by the tests.

The central toy is an *echo* task: :class:`ToyModel` reads ``obs`` (float32
``[2]``) and :class:`EchoAlgorithm` answers with ``action = int64(obs[0])``,
so every sender can check that the reply it got is its own. ``obs[1]`` is a
marker that makes the algorithm fail or block on purpose (see ``*_FAIL`` and
``*_BLOCK``). Environments put ``1000 * code + step`` in ``obs[0]``, so the
sender of any row of a batch is ``obs[0] // 1000``.
"""

from __future__ import annotations

import threading
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import paddle

import parl
from parl import layers
from parl.core.specs import Spec, normalize_specs
from parl.serving.request_queue import RequestQueue

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
    """Raised by the toys on purpose, so tests can tell it from real failures."""


# -- models -------------------------------------------------------------------


class ToyModel(parl.Model):
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

    def get_input_specs(self):
        return self._specs["input"]

    def get_action_specs(self):
        return self._specs["action"]

    def get_state_specs(self):
        return self._specs["state"]

    def get_reward_specs(self):
        return self._specs["reward"]

    def value(self, inputs: Dict[str, paddle.Tensor]) -> paddle.Tensor:
        return self.fc(inputs["obs"] * 1e-3)


class TwoLayerModel(parl.Model):
    """A tiny MLP, ``value(x) -> [B, 2]``, optionally built around a given (shared) first layer."""

    def __init__(self, first: Optional[layers.LayerFunc] = None) -> None:
        super().__init__()
        self.first = first if first is not None else layers.fc(4, act="tanh")
        self.head = layers.fc(2)

    def get_input_specs(self):
        return [("x", dict(shape=[3], dtype="float32"))]

    def get_action_specs(self):
        return ACTION_SPECS

    def value(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.head(self.first(x))


# -- algorithms ---------------------------------------------------------------


class EchoAlgorithm(parl.Algorithm):
    """Predicts ``action = int64(obs[0])``; learns a regression of the reward on obs.

    Records every batch it sees. A batch holding a ``*_FAIL`` marker raises
    :class:`ToyFailure`; one holding a ``*_BLOCK`` marker sets ``entered`` and
    waits for ``gate``.
    """

    def __init__(self, model_func: Callable[[], parl.Model] = ToyModel, **kwargs) -> None:
        super().__init__(model_func, **kwargs)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.prediction_batches: List[np.ndarray] = []
        self.learn_batches: List[np.ndarray] = []

    def _maybe_block_or_fail(self, obs: np.ndarray, fail: float, block: float) -> None:
        if (obs[:, 1] == block).any():
            self.entered.set()
            if not self.gate.wait(30):  # a safety net only: tests open the gate
                raise ToyFailure("gate never opened")
        if (obs[:, 1] == fail).any():
            raise ToyFailure(f"marker {fail} in a batch of {len(obs)}")

    def predict(self, inputs, states, *, deterministic=False):
        obs = inputs["obs"].numpy()
        self.prediction_batches.append(obs)
        self._maybe_block_or_fail(obs, PREDICT_FAIL, PREDICT_BLOCK)
        return {"action": paddle.cast(inputs["obs"][:, :1], "int64")}, {}

    def learn(self, batch):
        obs = batch.inputs["obs"].numpy()
        self.learn_batches.append(obs)
        self._maybe_block_or_fail(obs, LEARN_FAIL, LEARN_BLOCK)
        error = self.model.value(batch.inputs) - batch.rewards["reward"]
        return {"loss": (error * error).mean(), "rows": paddle.full([], float(len(obs)))}


def echo_algorithm_func(**kwargs) -> Callable[[], EchoAlgorithm]:
    """A zero-argument callable for TaskSettings."""
    return lambda: EchoAlgorithm(ToyModel, **kwargs)


def senders(batch_obs: np.ndarray) -> List[int]:
    """Sorted distinct sender codes of the rows of a batch."""
    return sorted({int(v) // 1000 for v in batch_obs[:, 0]})


def echo_obs(code: int, step: int, marker: float = 0.0) -> np.ndarray:
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


def echo_sample(code: int, rows: int = 2, marker: float = 0.0) -> parl.Transition:
    """A replay sample (learned as an update of its own): :func:`echo_batch` without its segment lengths."""
    return echo_batch(code, rows=rows, marker=marker)._replace(sequence_lengths=None)


def simple_batch(
    obs: np.ndarray,
    actions: np.ndarray,
    rewards: np.ndarray,
    next_obs: np.ndarray,
    ends: np.ndarray,
    *,
    states: Optional[Dict[str, np.ndarray]] = None,
    next_states: Optional[Dict[str, np.ndarray]] = None,
    sequence_lengths: Optional[Sequence[int]] = None,
    bootstrap_steps: Optional[np.ndarray] = None,
    weights: Optional[np.ndarray] = None,
) -> parl.Transition:
    """A numpy batch for models of one input ``obs``, one action ``action`` and one reward ``reward``;
    ``.to_tensors()`` makes it what ``Algorithm.learn`` receives."""
    return parl.Transition(
        inputs={"obs": obs},
        actions={"action": actions},
        rewards={"reward": rewards},
        next_inputs={"obs": next_obs},
        next_episode_end=ends,
        states=states or {},
        next_states=next_states or {},
        sequence_lengths=None if sequence_lengths is None else tuple(sequence_lengths),
        bootstrap_steps=bootstrap_steps,
        weights=weights,
    )


def columns_batch(
    columns: Dict[str, np.ndarray],
    *,
    states: Optional[Dict[str, np.ndarray]] = None,
    next_states: Optional[Dict[str, np.ndarray]] = None,
    sequence_lengths: Optional[Sequence[int]] = None,
) -> parl.Transition:
    """:func:`simple_batch` of the columns ``obs``, ``action``, ``reward``, ``next_obs`` and ``end``."""
    return simple_batch(
        columns["obs"],
        columns["action"],
        columns["reward"],
        columns["next_obs"],
        columns["end"],
        states=states,
        next_states=next_states,
        sequence_lengths=sequence_lengths,
    )


# -- environments and agents ----------------------------------------------------


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

    def reset(self, seed: Optional[int] = None):
        self.episode += 1
        self.t = 0
        return echo_obs(self.code, 0, self.marker), {}

    def step(self, action: int):
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
            helper.learn()
            obs, total, steps, done = next_obs, total + reward, steps + 1, terminated or truncated
        return {"reward": total, "steps": steps}


# -- transport and thread helpers ---------------------------------------------


class RecordingCommunicator:
    """A stand-in transport (same attributes as parl.Communicator) that records training batches."""

    def __init__(self, model: parl.Model) -> None:
        self.agent_id = 0
        self.input_specs: List[Spec] = normalize_specs(model.get_input_specs(), "input")
        self.state_specs: List[Spec] = normalize_specs(model.get_state_specs(), "state")
        self.action_specs: List[Spec] = normalize_specs(model.get_action_specs(), "action")
        self.reward_specs: List[Spec] = normalize_specs(model.get_reward_specs(), "reward")
        self.batches: List[parl.Transition] = []

    def predict(self, inputs, states):
        raise AssertionError("not used")

    def learn(self, batch):
        self.batches.append(batch)
        return {"loss": 0.0}


def count_puts(queue: RequestQueue) -> threading.Semaphore:
    """A semaphore released once for every request put on ``queue`` from now on."""
    puts = threading.Semaphore(0)
    original = queue.put

    def put(request) -> None:
        original(request)
        puts.release()

    queue.put = put  # instance attribute shadows the method
    return puts


def acquire_n(semaphore: threading.Semaphore, n: int, timeout: float = WAIT) -> bool:
    return all(semaphore.acquire(timeout=timeout) for _ in range(n))


def parl_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("parl-")]


def specs(*entries: Tuple[str, Sequence[int], str]) -> List[Spec]:
    return [Spec(name, shape, dtype) for name, shape, dtype in entries]
