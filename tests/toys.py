"""Small deterministic models, algorithms, environments and agents shared by the tests.

The central toy is an *echo* task: :class:`ToyModel` reads ``obs`` (float32
``[2]``) and :class:`EchoAlgorithm` answers with ``action = int64(obs[0])``,
so every sender can check that the reply it got is its own. ``obs[1]`` is a
marker that makes the algorithm fail or block on purpose (see ``*_FAIL`` and
``*_BLOCK``). Environments put ``1000 * code + step`` in ``obs[0]``, so the
sender of any row of a batch is ``obs[0] // 1000``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import paddle
import pytest

import parl
from parl import layers
from parl.core.specs import Spec, normalize_specs
from parl.runtime import registry
from parl.runtime.rlx.settings import ServerSettings
from parl.serving.request_queue import RequestQueue
from parl.utils import GymAgent

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


def _exit(result: Dict[str, float]) -> object:
    sys.exit(0)


def _interrupt(result: Dict[str, float]) -> object:
    raise KeyboardInterrupt


#: Ways an agent's episode can end badly, by name: each takes the episode's statistics and raises,
#: or returns what ``run_one_episode`` then returns.
FAILURES: Dict[str, Callable[[Dict[str, float]], object]] = {
    "sys.exit": _exit,
    "KeyboardInterrupt": _interrupt,
    "None": lambda result: None,
    "a list": lambda result: list(result.items()),
    "no reward": lambda result: {"steps": result["steps"]},
    "text reward": lambda result: {**result, "reward": "high"},
}


class FailingAgent(EchoAgent):
    """An echo agent whose episode ``fail_at`` ends as ``FAILURES[how]`` says, after it was played."""

    def __init__(self, env: CountEnv, *, how: str, fail_at: int, num_games: Optional[int] = None) -> None:
        super().__init__(env, num_games=num_games)
        self.how = how
        self.fail_at = fail_at

    def run_one_episode(self) -> Dict[str, float]:
        result = super().run_one_episode()
        return FAILURES[self.how](result) if self.episode == self.fail_at else result


class FailingGymAgent(GymAgent):
    """A GymAgent (for configs) whose episode ``fail_at`` ends as ``FAILURES[how]`` says, before it is played."""

    def __init__(
        self, env: object, *, how: str = "sys.exit", fail_at: int = 0, seed: int = 0, num_games: Optional[int] = None
    ) -> None:
        super().__init__(env, seed=seed, num_games=num_games)
        self.how = how
        self.fail_at = fail_at

    def run_one_episode(self) -> Dict[str, float]:
        if self.episode == self.fail_at:
            return FAILURES[self.how]({"reward": 0.0, "steps": 0})
        return super().run_one_episode()


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


# -- agents and environments whose records tell what happened, wherever they ran ----------------


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

    def reset(self, seed: Optional[int] = None):
        obs, info = super().reset(seed)
        return self._mark(obs), info

    def step(self, action: int):
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

    def reset(self, seed: Optional[int] = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.length = int(self._rng.integers(2, 8))
        return super().reset(seed)

    def step(self, action: int):
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


# -- watching a robot from the test ------------------------------------------------------------


class Sender(threading.Thread):
    """Calls ``fn`` in a thread and records the result or exception; ``done`` is set when it returns."""

    def __init__(self, fn: Callable[[], object], name: str) -> None:
        super().__init__(name=f"sender-{name}", daemon=True)
        self.fn, self.result, self.error, self.done = fn, None, None, threading.Event()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc
        finally:
            self.done.set()


class Arrivals:
    """A count shared by every process of a robot on this machine: agents call :meth:`arrive` (in a
    forked worker process or a Ray worker too: the object pickles as a file path), the test waits
    for a number of arrivals. Each arrival appends one byte to a file of its own."""

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(prefix="parl-arrivals-")
        os.close(fd)
        self._seen = 0
        self._owner = os.getpid()  # copies in other processes leave the file alone

    def arrive(self) -> None:
        """Count one arrival."""
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)

    def wait(self, count: int, timeout: float = WAIT) -> bool:
        """Whether ``count`` more arrivals came within ``timeout`` seconds (each is counted once)."""
        deadline = time.monotonic() + timeout
        while os.path.getsize(self.path) < self._seen + count:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        self._seen += count
        return True

    def __del__(self) -> None:
        if os.getpid() == self._owner:
            try:
                os.unlink(self.path)
            except OSError:  # removed already
                pass


class FileEvent:
    """A ``threading.Event`` for every process of a robot on this machine (forked or Ray workers
    too: it pickles as a file path): :meth:`set` creates the file, :meth:`wait` looks for it."""

    def __init__(self) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="parl-event-"), "set")
        self._owner = os.getpid()

    def set(self) -> None:
        """Set the event (for every process)."""
        with open(self.path, "w"):
            pass

    def is_set(self) -> bool:
        return os.path.exists(self.path)

    def wait(self, timeout: float) -> bool:
        """Whether the event was set within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.is_set():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def __del__(self) -> None:
        if os.getpid() == self._owner:
            shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)


def announcing(arrivals: Arrivals, change: Optional[Callable[[dict, int], dict]] = None) -> Callable[[dict, int], dict]:
    """An EchoAgent ``corrupt`` hook that counts each prediction on ``arrivals`` as it is sent, and
    alters its inputs with ``change(inputs, episode)`` when given."""

    def hook(inputs: dict, episode: int) -> dict:
        arrivals.arrive()
        return change(inputs, episode) if change is not None else inputs

    return hook


class QueueWatch:
    """Records every request put on and taken from one RequestQueue (from the wrapper's loop or any
    transport's), by shadowing the queue's methods with instance attributes."""

    def __init__(self, queue: RequestQueue) -> None:
        self.puts: List[object] = []
        self.takes: List[object] = []
        self._cond = threading.Condition()
        put, take = queue.put, queue.take

        def recording_put(request) -> None:
            put(request)
            with self._cond:
                self.puts.append(request)
                self._cond.notify_all()

        def recording_take(*args, **kwargs) -> list:
            batch = take(*args, **kwargs)
            with self._cond:
                self.takes.extend(batch)
                self._cond.notify_all()
            return batch

        queue.put = recording_put
        queue.take = recording_take

    def wait(self, condition: Callable[["QueueWatch"], bool], timeout: float = WAIT) -> bool:
        """Whether ``condition(self)`` came true within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: condition(self), timeout)

    def senders_put(self) -> Set[int]:
        """Agent ids of the requests put so far."""
        return {request.agent_id for request in self.puts}


def wait_for(condition: Callable[[], bool], timeout: float = WAIT) -> bool:
    """Whether ``condition()`` came true within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def stays(read: Callable[[], object], seconds: float) -> bool:
    """Whether ``read()`` gives the same value for ``seconds`` (polled; False at the first change)."""
    first = read()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if read() != first:
            return False
        time.sleep(0.01)
    return read() == first


def settles(read: Callable[[], object], quiet: float, timeout: float = WAIT) -> bool:
    """Whether ``read()`` stops changing, staying the same for ``quiet`` seconds, within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stays(read, quiet):
            return True
    return False


def child_pids() -> Set[int]:
    """Pids of this process's running children (a zombie, dead but not yet reaped, is not running)."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(entry))
    return out


# -- placement cases: every registered placement, for the placement contract ------------------------

#: Manager options a placement needs in the tests; a placement without an entry runs with its defaults.
TEST_OPTIONS: Dict[str, Dict[str, object]] = {
    "processes": {"workers": 2},
    "ray": {"workers": 2},
    # Any free port of this machine: tests in other sessions may listen beside it. The contract runs
    # the runner with agents of their own environments; its network side (slots played by clients) is
    # tests/test_rlx_server.py's and tests/test_rlx_fuzz.py's.
    "rlx": {"rlx": ServerSettings(bind="127.0.0.1:0")},
}


def _unprepared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing to set up."""


def _python_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cooperative runners made from now on run the Python twins of the C extension's pieces."""
    from parl.runtime.cooperative import runner

    monkeypatch.setattr(runner, "EXTENSION", None)


#: Variants of a placement that keep the contract too, as (case suffix, setup): the cooperative
#: runner's Python twins, which stand in for its C extension where that was not built.
VARIANTS: Dict[str, Sequence[Tuple[str, Callable[[pytest.MonkeyPatch], None]]]] = {
    "cooperative": [("python", _python_twins)],
}


@dataclass(frozen=True)
class PlacementCase:
    """One way of running a robot in the placement contract.

    Attributes:
        id: the test id (the placement's name, with a variant's suffix).
        placement: the registry entry.
        options: its Manager options for the tests (TEST_OPTIONS).
        prepare: called with pytest's monkeypatch before the test makes its Managers.
    """

    id: str
    placement: str
    options: Mapping[str, object] = field(default_factory=dict)
    prepare: Callable[[pytest.MonkeyPatch], None] = _unprepared


def placement_cases() -> List[PlacementCase]:
    """A case for every entry of :mod:`parl.runtime.registry`, in registration order, each followed
    by its VARIANTS."""
    cases = []
    for name in registry.names():
        options = dict(TEST_OPTIONS.get(name, {}))
        cases.append(PlacementCase(name, name, options))
        cases.extend(
            PlacementCase(f"{name}-{suffix}", name, options, prepare) for suffix, prepare in VARIANTS.get(name, ())
        )
    return cases


def open_gates(task: parl.ComputationTask) -> None:
    """Let every computation held by ``task``'s echo algorithm go on (for teardown)."""
    if isinstance(task.algorithm, EchoAlgorithm):
        task.algorithm.gate.set()


class Robots:
    """Makes Managers of echo tasks in one placement case and tells what they left running."""

    def __init__(self, case: PlacementCase) -> None:
        self.case = case
        self.managers: List[parl.Manager] = []
        self._children_before = child_pids()

    def __call__(self, tasks: Sequence[str] = ("T",), **settings: object) -> parl.Manager:
        """A Manager with one echo task per name of ``tasks``, each with TaskSettings ``settings``."""
        manager = parl.Manager(
            {name: parl.TaskSettings(echo_algorithm_func(), **settings) for name in tasks},
            placement=self.case.placement,
            thread_placement="os",
            **self.case.options,
        )
        self.managers.append(manager)
        return manager

    def leftovers(self) -> List[str]:
        """The parl threads still running and the child processes started since this object was made."""
        children = sorted(child_pids() - self._children_before)
        return [t.name for t in parl_threads()] + [f"child process {pid}" for pid in children]

    def close(self) -> None:
        """Stop every Manager made (their algorithms' gates opened first)."""
        for manager in self.managers:
            for task in manager.tasks.values():
                open_gates(task)
            manager.stop()


# -- RLX servers: placement "rlx" with echo tasks, and clients of them --------------------------------

#: The discrete actions of an RLX echo robot: enough for every ``obs[0]`` the tests send.
RLX_ACTIONS = 1_000_000


class SpacesEnv:
    """What an RLX server reads of its config's environment: the spaces (obs float32 [2], as the echo
    model's, and RLX_ACTIONS discrete actions); it cannot be stepped."""

    def __init__(self) -> None:
        import gymnasium

        self.observation_space = gymnasium.spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(RLX_ACTIONS)

    def close(self) -> None:
        """Nothing to release."""


class RecordingHelper(parl.OnPolicyHelper):
    """An OnPolicyHelper that also keeps every transition it stores, with its ``episode_over``."""

    def __init__(self, sample_interval: int = 4) -> None:
        super().__init__(sample_interval=sample_interval)
        self.stored: List[Tuple[parl.Transition, bool]] = []

    def _store(self, transition: parl.Transition, episode_over: bool) -> None:
        self.stored.append((transition, episode_over))
        super()._store(transition, episode_over)


def rlx_manager(
    slots: int, settings: ServerSettings, games: Optional[int] = None, **task_settings: object
) -> parl.Manager:
    """A Manager of an echo task in placement "rlx" with ``slots`` slot agents (GymAgents playing
    RemoteEnvs with SpacesEnv's spaces, ``games`` episodes each (None: no end), each with a
    RecordingHelper); not started."""
    manager = parl.Manager(
        {"T": parl.TaskSettings(echo_algorithm_func(), **task_settings)},
        placement="rlx",
        rlx=settings,
        thread_placement="os",
    )
    for index in range(slots):
        agent = GymAgent(manager.environment(SpacesEnv), task="T", seed=index, num_games=games)
        manager.add_agent(agent, {"T": RecordingHelper()})
    return manager


def rlx_address(manager: parl.Manager) -> str:
    """``host:port`` the started RLX manager listens on."""
    host, port = manager.runner.address
    return f"{host}:{port}"


def rlx_obs(code: int, step: int) -> np.ndarray:
    """The observation an RLX echo client sends: the echo robot answers ``1000 * code + step``."""
    return np.array([1000 * code + step, 0.0], np.float32)


class RawConnection:
    """A client socket that sends whatever bytes a test gives it (unlike parl.rlx.Client) and reads the
    server's frames as plain dicts."""

    def __init__(self, address: str, timeout: float = WAIT) -> None:
        import socket

        from parl.rlx.address import split_address

        self.sock = socket.create_connection(split_address(address), timeout=timeout)
        self._buffer = b""

    def send_bytes(self, data: bytes) -> None:
        """Send ``data`` as it is; a server that has closed may make this raise OSError."""
        self.sock.sendall(data)

    def send(self, message: Dict[str, object]) -> None:
        """Send one frame of ``message``."""
        from parl.rlx.framing import encode

        self.send_bytes(encode(message))

    def read(self) -> Optional[Dict[str, object]]:
        """The server's next message, or None once it has closed (a reset counts as closed)."""
        from parl.rlx.framing import decode

        while len(self._buffer) < 4 or len(self._buffer) < 4 + int.from_bytes(self._buffer[:4], "big"):
            try:
                data = self.sock.recv(1 << 16)
            except ConnectionResetError:
                data = b""
            if not data:
                return None
            self._buffer += data
        size = 4 + int.from_bytes(self._buffer[:4], "big")
        body, self._buffer = self._buffer[4:size], self._buffer[size:]
        return decode(body)

    def read_all(self) -> List[Dict[str, object]]:
        """Every message until the server closes (the socket's timeout bounds each wait)."""
        messages = []
        while True:
            message = self.read()
            if message is None:
                return messages
            messages.append(message)

    def hello(self, token: Optional[bytes] = None) -> Dict[str, object]:
        """Say hello; the server's answer."""
        self.send({"type": "hello", "version": 1, **({} if token is None else {"token": token})})
        return self.read()

    def close(self) -> None:
        self.sock.close()


def serve_process(*args: str) -> Tuple[subprocess.Popen, str]:
    """``parl serve`` with ``args`` in a child process of this one, once it listens (stdout and stderr
    piped, text), and its address; the caller stops it, by its pid."""
    from parl.experiment.serve_process import start_serve

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])
    return start_serve(args, cwd=repo, env=dict(os.environ, PYTHONPATH=path))
