"""RemoteEnv: the environment of one slot of an RLX server, played by whichever client is connected to it.

    env = runner.environment(make_env)        # placement "rlx": a slot with make_env()'s spaces
    agent = GymAgent(env, seed=0)             # any agent: its episode loop is unchanged
    obs, info = env.reset()                   # parks the agent until a client sends init
    obs, reward, terminated, truncated, info = env.step(action)   # sends the action, parks until step or reset

The agent calls gymnasium's ``reset`` and ``step``; each parks it (a greenlet of the server's
scheduler) until its client's next request, so an agent waiting on the network costs nothing.
``step`` answers the request that led to it with the action, and once an episode ends, with its
return and length (``done``) before the agent stores the last transition.

When the connection ends mid-episode (the client left, timed out or broke the protocol), the
episode ends as truncated at the last observation with reward 0 for the action no client took,
so no experience spans two clients. ``info["action_taken"]``: the action the client's environment
took instead of the one sent, when it said so (GymAgent learns from that one).
"""

from __future__ import annotations

from time import perf_counter
from typing import Any, Dict, Optional, Protocol, Tuple

import greenlet
import numpy as np

from parl.core.specs import Spec
from parl.rlx import spaces
from parl.rlx.messages import Action, ActionValue, Done, Init, ServerMessage, Step
from parl.runtime.rlx.connection import Connection, checked
from parl.runtime.rlx.values import FLOAT32_MAX, bounded

#: What a slot waiting for a new episode waits for (else it waits for the reply of one connection).
_INIT = "init"
#: Given to a slot waiting for a reply when its connection ended.
_CUT = object()

Transition = Tuple[Any, float, bool, bool, Dict[str, Any]]


class SlotHost(Protocol):
    """What a slot asks of its server (:class:`~parl.runtime.rlx.server.RlxServer`)."""

    def answer(self, conn: Connection, message: ServerMessage, *, act: bool) -> None:
        """Send the answer to ``conn``'s request under way."""

    def weights_version(self) -> int:
        """The updates of the robot's tasks so far."""

    def end(self, conn: Connection, code: Optional[str], reason: str) -> None:
        """Close ``conn`` after an ``error`` of ``code`` saying ``reason``."""


class RemoteEnv:
    """One slot of an RLX server: gymnasium's ``reset`` and ``step`` for the agent that plays it, and
    the hooks the server's scheduler thread calls (``attach``, ``offer``, ``connection_closed``).

    Attributes:
        index: the slot's number (its agent's id in the server's robot).
        observation_space, action_space: the gymnasium spaces of the robot's environment.
        described_observation, described_action: the same as a ``welcome`` tells them.
        obs_spec: what an observation must be (shape, dtype, finite); for a dict space, a placeholder.
        obs_specs: for a dict space, what each key's value must be (None for other spaces).
        connection: the connection attached now (None: the slot is free, unless ``retired``).
        retired: its agent has ended (played its games, or failed); it takes no new connection.
        waited_at, resumed_at: ``perf_counter()`` when its agent last began and ended a wait on the
            network (the watchdog counts such waits as waits, not time in the environment).
    """

    def __init__(self, index: int, observation_space: Any, action_space: Any, server: SlotHost) -> None:
        self.index = index
        self.observation_space = observation_space
        self.action_space = action_space
        self.described_observation = spaces.describe(observation_space)
        self.described_action = spaces.describe(action_space)
        described = self.described_observation
        if isinstance(described, spaces.DictSpace):
            self.obs_specs: Optional[Dict[str, Spec]] = {key: _spec(key, s) for key, s in described.spaces.items()}
            self.obs_spec = Spec("obs", (), "float32")
        else:
            self.obs_specs, self.obs_spec = None, _spec("obs", described)
        if isinstance(self.described_action, spaces.DictSpace):
            raise ValueError("an RLX action space is a Box or a Discrete space, got a Dict space")
        self._taken_spec = _spec("action_taken", self.described_action)
        self._discrete = isinstance(self.described_action, spaces.DiscreteSpace)
        described = self.described_action
        self._action_dtype = None if isinstance(described, spaces.DiscreteSpace) else described.dtype
        self._server = server
        self.connection: Optional[Connection] = None
        #: True once its agent has ended: it takes no new connection.
        self.retired = False
        self.waited_at = self.resumed_at = 0.0
        self._agent: greenlet.greenlet = None  # the agent's and the scheduler's, set by bind
        self._hub: greenlet.greenlet = None
        self._waiting_for: object = None  # _INIT, the connection whose reply it waits for, or None
        self._episode: Optional[Connection] = None
        self._last_obs: Any = None

    # -- the agent's side: gymnasium's API ---------------------------------------------------------
    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None) -> Tuple[Any, Dict[str, Any]]:
        """The first observation of the next episode a client starts (``seed`` and ``options`` are
        the client's business and ignored here)."""
        self._episode = None
        conn, message = self._wait(_INIT)
        self._episode, self._last_obs = conn, message.obs
        return message.obs, {}

    def step(self, action: Any) -> Transition:
        """Send ``action`` to the episode's client; its next observation, reward and end flags."""
        conn = self._episode
        if conn is None:
            raise RuntimeError(f"slot {self.index}: step before reset")
        if conn.open:
            value = int(action) if self._discrete else self._box_action(action)
            self._server.answer(conn, Action(value, self._server.weights_version()), act=True)
        if not conn.open:
            return self._cut()
        _, message = self._wait(conn)
        if message is _CUT:
            return self._cut()
        if type(message) is Step:
            obs, terminated, truncated = message.obs, message.terminated, message.truncated
        else:  # Reset
            obs = message.obs if message.obs is not None else self._last_obs
            terminated, truncated = not message.truncated, message.truncated
        if terminated or truncated:
            self._episode = None
            self._server.answer(conn, Done(conn.episode_return, conn.episode_length), act=False)
        self._last_obs = obs
        info = {} if message.action_taken is None else {"action_taken": message.action_taken}
        return obs, message.reward, terminated, truncated, info

    def close(self) -> None:
        """Nothing to release: the server owns the connections."""

    def _box_action(self, action: Any) -> np.ndarray:
        return np.asarray(action, dtype=self._action_dtype)

    def _cut(self) -> Transition:
        """The end of an episode whose connection ended: truncated at the last observation."""
        self._episode = None
        return self._last_obs, 0.0, False, True, {"rlx": "the connection ended"}

    def _wait(self, what: Any) -> Tuple[Connection, Any]:
        """The next request for this slot: an init from its connection (``_INIT``), or the reply
        of connection ``what``; parks the agent until it comes."""
        conn = self.connection if what is _INIT else what
        if conn is not None and conn.pending is not None:
            message, conn.pending = conn.pending, None
            return conn, message
        self._waiting_for = what
        self.waited_at = perf_counter()
        try:
            return self._hub.switch()
        finally:
            self._waiting_for = None
            self.resumed_at = perf_counter()

    # -- the scheduler's side -----------------------------------------------------------------------
    def bind(self, agent: greenlet.greenlet, hub: greenlet.greenlet) -> None:
        """The greenlet of the agent that plays this slot, and the scheduler's."""
        self._agent, self._hub = agent, hub

    def retire(self) -> None:
        """Its agent has ended (played its games, or failed): no new connection plays this slot (the
        runner hands the one attached now over to another slot, or ends it)."""
        self.retired = True

    def hand_over(self, target: "RemoteEnv") -> Connection:
        """This slot's connection (between episodes) plays the free slot ``target`` from now on; a
        request it sent and no agent took waits for ``target``'s agent. Returns the connection."""
        conn, self.connection = self.connection, None
        assert conn is not None  # handed over between episodes, connected
        conn.slot = target
        target.attach(conn)
        return conn

    def attach(self, conn: Connection) -> None:
        """A new connection plays this (free) slot."""
        self.connection = conn

    def offer(self, conn: Connection, message: Any) -> None:
        """A checked init, step or reset of ``conn``: its agent gets it now if it waits for it (and
        runs until it parks again), else when it next does."""
        waiting = self._waiting_for
        if waiting is conn or (waiting is _INIT and conn is self.connection and type(message) is Init):
            self._agent.switch((conn, message))
        else:
            conn.pending = message

    def connection_closed(self, conn: Connection) -> None:
        """``conn`` ended: the slot is free, and an episode it was playing ends (now, if its agent waits)."""
        conn.pending = None
        if self.connection is conn:
            self.connection = None
        if self._waiting_for is conn:
            self._agent.switch((conn, _CUT))

    def action_taken(self, value: ActionValue, where: str) -> ActionValue:
        """A client's ``action_taken`` checked against the action space: an int, or an array of its dtype
        (whose floats are finite as float32).

        Raises:
            ProtocolError: ``bad_message`` naming ``where``.
        """
        spec = self._taken_spec
        array = bounded(spec, checked(spec, value, f"{where}:"), FLOAT32_MAX, "float32's largest", f"{where}:")
        return int(array) if self._discrete else array


def _spec(name: str, space: spaces.SimpleSpace) -> Spec:
    """What a value of ``space`` must be: an int in range (discrete), or an array of the box's shape and dtype."""
    if isinstance(space, spaces.DiscreteSpace):
        return Spec(name, (), "int64", (space.start, space.start + space.n))
    return Spec(name, space.shape, space.dtype)
