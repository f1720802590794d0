"""The Python RLX client: one environment's connection to a robot served by ``parl serve``.

    with Client("127.0.0.1:7070", token=None) as client:
        action = client.init(obs)                          # starts an episode
        obs, reward, terminated, truncated, _ = env.step(action)
        action = client.send(reward, obs)                  # the reward of the last action, the next action
        ...
        episode_return = client.reset(reward)              # ends it (terminated; truncated=True for a time limit)

RELAAX's client API (``init``, ``send``, ``reset``, ``metrics``, ``disconnect``) over the RLX
protocol (docs/rlx.md): every call but ``metrics`` waits for the server's reply. An ``error`` from
the server (``busy``, ``unauthorized``, ``timeout``, ``shutdown``, ...) raises :class:`ServerError`
with its code, and the connection is closed. :func:`parl.rlx.drive` plays a gymnasium
environment through a client.
"""

from __future__ import annotations

import socket
import time
from collections import deque
from typing import Deque, Dict, Mapping, Optional, Type, TypeVar, Union

import numpy as np

from parl.rlx import spaces
from parl.rlx.address import split_address
from parl.rlx.errors import ServerError
from parl.rlx.framing import MAX_FRAME_BYTES, FrameReader, encode
from parl.rlx.messages import (
    VERSION,
    Action,
    ActionValue,
    Bye,
    ClientMessage,
    Done,
    Error,
    Hello,
    Init,
    Metrics,
    Observation,
    Reset,
    ServerMessage,
    Step,
    Welcome,
    parse_server,
)

#: What the client calls itself in its hello (the server logs it).
CLIENT_NAME = "parl-python"

_Reply = TypeVar("_Reply", bound=ServerMessage)


class Client:
    """A connection to an RLX server, for one environment (one episode at a time).

    Args:
        address: the server's ``host:port``.
        token: the server's token (str or bytes), if it has one.
        timeout: seconds to wait for the connection and for each reply (None: no limit); a reply
            can take as long as the server's evaluation pauses it.

    Attributes:
        observation_space, action_space: the spaces the server announced
            (:mod:`parl.rlx.spaces`; ``to_gymnasium()`` gives gymnasium's).
        limits: the server's limits (``max_frame_bytes``, ``idle_timeout``, ``episode_timeout``).
        env_steps: the robot's env steps when this client connected.
        slot: the server's slot that plays this connection.
        weights_version: the updates of the robot's tasks before the last action was chosen.
        latency: seconds of the last request's round trip (network and server).
        episode_length: actions of the last episode ended by :meth:`reset`.

    Raises:
        ServerError: the server refused the connection (``busy``, ``unauthorized``, ``version``).
        OSError: no connection could be made.
    """

    def __init__(self, address: str, token: Union[str, bytes, None] = None, *, timeout: Optional[float] = 60.0) -> None:
        host, port = split_address(address)
        self._sock: Optional[socket.socket] = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = FrameReader(MAX_FRAME_BYTES)
        self._waiting: Deque[bytes] = deque()  # frames received and not yet read
        self._max_frame_bytes = MAX_FRAME_BYTES
        self.latency = 0.0
        self.weights_version = 0
        self.episode_length = 0
        secret = token.encode("utf-8") if isinstance(token, str) else token
        welcome = self._request(Hello(VERSION, secret, CLIENT_NAME), Welcome)
        self.observation_space: spaces.Space = welcome.observation_space
        self.action_space: spaces.Space = welcome.action_space
        self.limits: Dict[str, object] = welcome.limits
        self.env_steps = welcome.env_steps
        self.slot = welcome.slot
        limit = welcome.limits.get("max_frame_bytes")
        self._max_frame_bytes = limit if type(limit) is int and limit > 0 else MAX_FRAME_BYTES
        space = self.observation_space
        self._obs_dtype = _dtype(space) if not isinstance(space, spaces.DictSpace) else np.dtype(np.float32)
        self._obs_dtypes: Optional[Dict[str, np.dtype]] = None
        if isinstance(space, spaces.DictSpace):
            self._obs_dtypes = {key: _dtype(member) for key, member in space.spaces.items()}

    # -- RELAAX's calls --------------------------------------------------------------------------
    def init(self, obs: object) -> ActionValue:
        """Start an episode at observation ``obs``; returns its first action."""
        return self._act(Init(self._obs(obs)))

    def send(self, reward: float, obs: object, *, action_taken: Optional[ActionValue] = None) -> ActionValue:
        """The reward of the last action and the observation it led to; returns the next action.
        ``action_taken``: the action the environment took instead of the one sent (it is learned from)."""
        return self._act(Step(float(reward), self._obs(obs), action_taken=_action(action_taken)))

    def reset(
        self,
        reward: float,
        *,
        truncated: bool = False,
        obs: Optional[object] = None,
        action_taken: Optional[ActionValue] = None,
    ) -> float:
        """End the episode with the reward of the last action; returns the episode's return.

        Args:
            reward: the reward of the last action.
            truncated: the episode was cut (a time limit) rather than terminated: the robot then
                bootstraps from ``obs``, the last observation (give it; the one before stands in).
            obs: the last observation.
            action_taken: as for :meth:`send`.
        """
        message = Reset(float(reward), bool(truncated), None if obs is None else self._obs(obs), _action(action_taken))
        done = self._request(message, Done)
        self.episode_length = done.length
        return done.episode_return

    def metrics(self, name: str, value: float, step: Optional[int] = None) -> None:
        """Log ``value`` as the server's metric ``client/<name>`` at ``step`` (None: the robot's env
        steps). Sent without waiting; a name the server refuses ends the connection."""
        self._send(Metrics(name, float(value), step))

    def disconnect(self) -> None:
        """Say goodbye and close (an episode under way ends as truncated); later calls do nothing."""
        if self._sock is None:
            return
        try:
            self._send(Bye())
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        """Close the connection without a goodbye."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.disconnect()

    # -- the wire ----------------------------------------------------------------------------------
    def _obs(self, obs: object) -> Observation:
        """``obs`` as it travels: an array of the space's dtype, or for a dict space key -> such arrays.

        Raises:
            ValueError: a dict space's observation that is not a mapping of exactly its keys.
        """
        dtypes = self._obs_dtypes
        if dtypes is None:
            return np.asarray(obs, dtype=self._obs_dtype)
        if not isinstance(obs, Mapping) or obs.keys() != dtypes.keys():
            got = sorted(map(str, obs)) if isinstance(obs, Mapping) else type(obs).__name__
            raise ValueError(f"the server's observations are maps of keys {sorted(dtypes)}, got {got}")
        return {key: np.asarray(obs[key], dtype=dtype) for key, dtype in dtypes.items()}

    def _act(self, message: ClientMessage) -> ActionValue:
        reply = self._request(message, Action)
        self.weights_version = reply.weights_version
        return reply.action

    def _request(self, message: ClientMessage, expected: Type[_Reply]) -> _Reply:
        start = time.perf_counter()
        self._send(message)
        reply = self._receive()
        self.latency = time.perf_counter() - start
        if isinstance(reply, Error):
            self.close()
            raise ServerError(reply.code, reply.message)
        if not isinstance(reply, expected):
            self.close()
            raise ConnectionError(f"expected {expected.__name__.lower()} from the server, got {type(reply).__name__}")
        return reply

    def _send(self, message: ClientMessage) -> None:
        if self._sock is None:
            raise ConnectionError("the connection is closed")
        frame = encode(message.to_data())
        if len(frame) - 4 > self._max_frame_bytes:
            raise ValueError(f"a message of {len(frame) - 4} bytes; the server takes at most {self._max_frame_bytes}")
        self._sock.sendall(frame)

    def _receive(self) -> ServerMessage:
        waiting = self._waiting
        while not waiting:
            if self._sock is None:
                raise ConnectionError("the connection is closed")
            data = self._sock.recv(1 << 16)
            if not data:
                self.close()
                raise ConnectionError("the server closed the connection")
            waiting.extend(self._reader.feed(data))
        return parse_server(waiting.popleft())


def _dtype(space: spaces.SimpleSpace) -> np.dtype:
    """What a value of ``space`` travels as: the box's dtype, int64 for a discrete space."""
    return np.dtype(space.dtype) if isinstance(space, spaces.BoxSpace) else np.dtype(np.int64)


def _action(value: Optional[object]) -> Optional[ActionValue]:
    """An action to send: ints stay ints (discrete), anything else an array."""
    if value is None or type(value) is int:
        return value
    if isinstance(value, np.integer):
        return int(value)
    return np.asarray(value)
