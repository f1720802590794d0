"""What the tests share besides parl.testing: models, batches, failing agents, transports and RLX clients.

The echo task (a model, an algorithm, environments and agents whose every reply and update can be
traced to its sender), the watches and the placement cases live in :mod:`parl.testing`, for the
placement contract and for users' own tests; they are named here again so tests import one module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import paddle

import parl
from parl import layers
from parl.core.specs import Spec, normalize_specs
from parl.runtime.rlx.settings import ServerSettings
from parl.serving.request_queue import RequestQueue
from parl.testing.echo import (  # noqa: F401 - named again for the tests
    ACTION_SPECS,
    LEARN_BLOCK,
    LEARN_FAIL,
    OBS_SPECS,
    PREDICT_BLOCK,
    PREDICT_FAIL,
    WAIT,
    CountEnv,
    EchoAgent,
    EchoAlgorithm,
    EchoModel,
    ReportingEchoAgent,
    ToyFailure,
    echo_algorithm_func,
    echo_batch,
    echo_obs,
    replay_sample,
    senders,
)
from parl.testing.placement_cases import PlacementCase, Robots, open_gates, placement_cases  # noqa: F401
from parl.testing.watching import (  # noqa: F401
    Arrivals,
    FileEvent,
    QueueWatch,
    Sender,
    announcing,
    child_pids,
    parl_threads,
    running,
    settles,
    stays,
    wait_for,
)
from parl.utils import GymAgent

# -- models -------------------------------------------------------------------


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


#: Known weights of :func:`linear_actor_critic`, so tests can recompute its outputs in numpy (:func:`linear_forward`).
LINEAR_WEIGHTS = {
    "logits.w": np.array([[0.3, -0.2], [0.1, 0.4]], np.float32),
    "logits.b": np.array([0.0, 0.1], np.float32),
    "critic.w": np.array([[0.5], [-0.3]], np.float32),
    "critic.b": np.array([0.2], np.float32),
}


def linear_actor_critic() -> parl.models.MLPActorCritic:
    """An actor-critic without hidden layers: 2 observation features, 2 discrete actions."""
    return parl.models.MLPActorCritic(obs_dim=2, num_actions=2, hidden_sizes=())


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def linear_forward(weights: Dict[str, np.ndarray], obs: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """What :func:`linear_actor_critic` with ``weights`` computes, in float64: the actions' log-probabilities
    ``[B, 2]`` and the values ``[B, 1]``."""
    logp = log_softmax(obs.astype(np.float64) @ weights["logits.w"] + weights["logits.b"])
    return logp, obs.astype(np.float64) @ weights["critic.w"] + weights["critic.b"]


# -- algorithms ---------------------------------------------------------------


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
    "NaN reward": lambda result: {**result, "reward": float("nan")},
}


class IdleAgent(parl.Agent):
    """An agent that only holds an environment, helpers and counters, for tests that never play it."""

    def run_one_episode(self) -> Dict[str, float]:
        raise AssertionError("an IdleAgent is not played")


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


def specs(*entries: Tuple[str, Sequence[int], str]) -> List[Spec]:
    return [Spec(name, shape, dtype) for name, shape, dtype in entries]


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
    slots: int, settings: ServerSettings, games: Optional[int] = None, **task_settings: Any
) -> parl.Manager:
    """A Manager of an echo task in placement "rlx" with ``slots`` slot agents (GymAgents playing
    RemoteEnvs with SpacesEnv's spaces, ``games`` episodes each (None: no end), each with a
    RecordingHelper); not started."""
    manager = parl.Manager(
        {"T": parl.TaskSettings(echo_algorithm_func(), batching=parl.Batching(**task_settings))},
        placement=settings,
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
    from parl.experiment.cli.serve_process import start_serve

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])
    return start_serve(args, cwd=repo, env=dict(os.environ, PYTHONPATH=path))


def read_metrics(logdir: Path) -> Dict[str, List[Tuple[int, float]]]:
    """Every scalar of ``<logdir>/metrics.jsonl`` (what a Trainer writes): tag -> [(step, value)]."""
    scalars: Dict[str, List[Tuple[int, float]]] = defaultdict(list)
    for line in (Path(logdir) / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        for tag, value in row.items():
            if tag not in ("step", "time"):
                scalars[tag].append((row["step"], value))
    return scalars


def exiting_env() -> object:
    """CartPole whose ``step`` ends its process at once (``os._exit(3)``): a run whose process crashes
    once its agents play (an ``env.factory``; building and checking the config does not step)."""
    import gymnasium

    class ExitingEnv(gymnasium.Wrapper):
        def step(self, action: object) -> object:
            os._exit(3)

    return ExitingEnv(gymnasium.make("CartPole-v1"))


class IdReportingAgent(ReportingEchoAgent):
    """A ReportingEchoAgent whose episode records also carry ``own_id``: the ``self.id`` the agent sees,
    wherever it plays."""

    def run_one_episode(self) -> Dict[str, float]:
        return {**super().run_one_episode(), "own_id": self.id}


class FakeClock:
    """A clock the test moves by hand: calling it gives ``now``."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
