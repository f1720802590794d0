"""One client's connection to an RLX server: frames in and out, and where it stands in the protocol.

    conn = Connection(sock, "10.0.0.7:51234", settings, now)
    for body in conn.receive():              # the frames completed by what the socket had
        message = conn.accept(parse_client(body), now)   # checked against the protocol and the spaces
    conn.admit(slot)                         # its hello passed the server's checks: it plays this slot
    conn.send(Action(1, weights_version=12))

A connection goes through three states: ``handshake`` until its hello passes the server's checks
(it holds no slot until then), then ``ready`` (no episode) and ``episode`` in turns: ``init``
starts an episode, a ``step`` that terminates or truncates it or a ``reset`` ends it. One request
at a time: a client sends ``init``, ``step`` or ``reset`` only once the server has answered the one
before (``metrics`` need no answer). Everything a message carries is checked here, against the
slot's spaces and the server's limits, before any agent sees it: a message out of order or with a
bad value is a :class:`~parl.rlx.errors.ProtocolError` that ends this connection only.
"""

from __future__ import annotations

import socket
from typing import Any, Dict, List, Mapping, Optional, Protocol, Union, cast

import numpy as np

from parl.core.specs import Spec, check_sample
from parl.rlx.errors import BAD_MESSAGE, ProtocolError
from parl.rlx.framing import FrameReader, encode
from parl.rlx.messages import (
    ActionValue,
    Bye,
    ClientMessage,
    Hello,
    Init,
    Metrics,
    Reset,
    ServerMessage,
    Step,
)
from parl.rlx.messages import Observation as ObservationValue
from parl.runtime.rlx.log_text import escaped
from parl.runtime.rlx.rate import TokenBucket
from parl.runtime.rlx.settings import ServerSettings
from parl.runtime.rlx.values import bounded, checked_metric, checked_reward

HANDSHAKE, READY, EPISODE = "handshake", "ready", "episode"
#: What a connection may owe its client (frames written, not yet taken by its socket), in largest frames,
#: before it is ended.
MAX_OUTBOX_FRAMES = 4
_READ_BYTES = 1 << 16
#: What one read takes of a connection whose last ``metrics`` came beyond its rate: a flood of metrics
#: is parsed a few dozen at a time, so it costs the other connections little (and TCP slows its sender).
_THROTTLED_READ_BYTES = 1 << 11


class ClosedByPeer(Exception):
    """The client closed its end."""


class Slot(Protocol):
    """What a connection reads of the slot that plays it (:class:`~parl.runtime.rlx.remote_env.RemoteEnv`)."""

    index: int
    obs_spec: Spec
    obs_specs: Optional[Dict[str, Spec]]

    def action_taken(self, value: ActionValue, where: str) -> ActionValue:
        """A client's ``action_taken`` checked against the action space (ProtocolError if it does not fit)."""

    def offer(self, conn: "Connection", message: Any) -> None:
        """A checked init, step or reset of ``conn``, for the slot's agent."""

    def connection_closed(self, conn: "Connection") -> None:
        """``conn`` ended: the slot is free."""


class Connection:
    """A client's socket (non-blocking) and its protocol state; used by the server's scheduler thread only.

    Attributes:
        peer: ``host:port`` of the client, for logs (its ``repr`` shows the client's name escaped).
        slot: the server slot that plays this connection's episodes (None until :meth:`admit`).
        state: ``handshake``, ``ready`` or ``episode``.
        open: False once closed.
        awaiting_reply: the client waits for the server's answer (no idle clock runs then).
        last_heard: when the client last sent a frame or was last answered (the idle clock's start).
        episode_started: when the episode under way began.
        episode_return, episode_length: the rewards summed and actions counted in that episode.
        received_at: when the request the slot works on was read (the server's act latency starts).
        pending: a checked init, step or reset its slot has not taken yet.
    """

    def __init__(self, sock: socket.socket, peer: str, settings: ServerSettings, now: float) -> None:
        self.sock = sock
        self.peer = peer
        self.slot: Optional[Slot] = None
        self.settings = settings
        self.state = HANDSHAKE
        self.open = True
        self.awaiting_reply = False
        self.accepted_at = self.last_heard = now
        self.episode_started = 0.0
        self.episode_return = 0.0
        self.episode_length = 0
        self.received_at = 0.0
        self.pending: Optional[Union[Init, Step, Reset]] = None
        self.client = ""
        self._metrics = TokenBucket(settings.max_metrics_per_second, now)
        self._throttled = False  # its last metrics came beyond its rate: it is read little by little
        self._reader = FrameReader(settings.max_frame_bytes)
        self._outbox = bytearray()

    def __repr__(self) -> str:
        name = f" ({escaped(self.client)})" if self.client else ""
        slot = "" if self.slot is None else f", slot {self.slot.index}"
        return f"client {self.peer}{name}{slot}"

    # -- bytes ------------------------------------------------------------------------------------
    def receive(self) -> List[bytes]:
        """The bodies of the frames completed by what the socket holds now.

        Raises:
            ClosedByPeer: the client closed its end.
            ProtocolError: ``bad_frame``, a header announcing more than ``max_frame_bytes``.
            OSError: the socket failed.
        """
        try:
            data = self.sock.recv(_THROTTLED_READ_BYTES if self._throttled else _READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return []
        if not data:
            raise ClosedByPeer()
        return self._reader.feed(data)

    def send(self, message: ServerMessage) -> None:
        """Write one message; what the socket does not take now waits in the outbox (:meth:`flush`).

        Raises:
            OSError: the socket failed, or the client reads so little that more than
                MAX_OUTBOX_FRAMES times ``max_frame_bytes`` bytes wait for it.
        """
        frame = encode(message.to_data())
        if self._outbox:
            self._outbox += frame
        else:
            try:
                sent = self.sock.send(frame)
            except (BlockingIOError, InterruptedError):
                sent = 0
            if sent < len(frame):
                self._outbox += frame[sent:]
        if len(self._outbox) > MAX_OUTBOX_FRAMES * self.settings.max_frame_bytes:
            raise OSError(f"the client does not read: {len(self._outbox)} bytes wait for it")

    @property
    def wants_to_write(self) -> bool:
        """Whether frames wait in the outbox."""
        return bool(self._outbox)

    def flush(self) -> None:
        """Write what the outbox holds, as far as the socket takes it.

        Raises:
            OSError: the socket failed.
        """
        try:
            sent = self.sock.send(self._outbox)
        except (BlockingIOError, InterruptedError):
            return
        del self._outbox[:sent]

    def close(self) -> None:
        """Close the socket (what the outbox holds is dropped)."""
        self.open = False
        self._outbox.clear()
        try:
            self.sock.close()
        except OSError:
            pass

    # -- the protocol -----------------------------------------------------------------------------
    def accept(self, message: ClientMessage, now: float) -> ClientMessage:
        """``message``, checked against where the connection stands and against its slot's spaces,
        with arrays converted to the spaces' dtypes; the state moves on.

        Raises:
            ProtocolError: ``bad_message``, naming the message and what is wrong.
        """
        self.last_heard = now
        # Dispatched on the exact type (cheaper than isinstance); the casts say what each branch holds.
        kind = type(message)
        if self.state == HANDSHAKE:
            if kind is not Hello:
                raise ProtocolError(BAD_MESSAGE, f"expected hello first, got {_name(message)}")
            self.client = cast(Hello, message).client
            return message
        if kind is Metrics:
            checked_metric(cast(Metrics, message).value, "metrics:")
            return message
        if kind is Bye:
            return message
        if kind is Hello:
            raise ProtocolError(BAD_MESSAGE, "hello was already said")
        if self.awaiting_reply:
            raise ProtocolError(BAD_MESSAGE, f"{_name(message)} before the answer to the last request (one at a time)")
        slot = self.slot
        if kind is Init:
            if self.state != READY:
                raise ProtocolError(BAD_MESSAGE, "init while an episode is under way (end it with reset)")
            message = Init(self._observation(cast(Init, message).obs, "init:"))
            self.state, self.episode_started = EPISODE, now
            self.episode_return, self.episode_length = 0.0, 0
        else:
            if self.state != EPISODE:
                raise ProtocolError(BAD_MESSAGE, f"{_name(message)} with no episode under way (start one with init)")
            what = _name(message)
            sent: Any = message  # a Step or a Reset (by kind): their fields are read alike, without a cast
            reward = checked_reward(sent.reward, self.settings.max_abs_reward, f"{what}:")
            obs = None if sent.obs is None else self._observation(sent.obs, f"{what}:")
            if sent.action_taken is None:
                taken = None
            else:
                assert slot is not None  # admitted before its first init
                taken = slot.action_taken(sent.action_taken, what)
            message = sent._replace(reward=reward, obs=obs, action_taken=taken)
            self.episode_return += reward
            self.episode_length += 1
            if kind is Reset or sent.terminated or sent.truncated:
                self.state = READY
        self.awaiting_reply = True
        self.received_at = now
        return message

    def _observation(self, value: object, where: str) -> ObservationValue:
        """An observation checked against the slot's space and, for a float space, ``max_abs_observation``:
        an array, or for a dict space a map whose every key is checked against its own space."""
        slot = self.slot
        assert slot is not None  # admitted before its first init
        limit, keyed = self.settings.max_abs_observation, slot.obs_specs
        if keyed is None:
            spec = slot.obs_spec
            return bounded(spec, checked(spec, value, where), limit, "max_abs_observation", where)
        return checked_keys(keyed, value, limit, where)

    def metric_allowed(self, now: float) -> bool:
        """Whether a ``metrics`` message read at ``now`` is within ``max_metrics_per_second`` (the server
        drops it otherwise); while they come beyond it, each read takes little of this connection."""
        self._throttled = not self._metrics.take(now)
        return not self._throttled

    def quiet_for(self) -> float:
        """Seconds until a ``metrics`` message would be within the rate again (0.0: it would be now)."""
        return self._metrics.wait()

    @property
    def between_episodes(self) -> bool:
        """Whether no agent plays an episode of this connection now: none is under way, or its ``init``
        waits for an agent to take it."""
        return self.state == READY or type(self.pending) is Init

    def admit(self, slot: Slot) -> None:
        """The hello passed the server's checks: this connection plays ``slot`` from now on."""
        self.slot = slot
        self.state = READY

    def answered(self, now: float) -> None:
        """The server answered the request under way: the idle clock starts."""
        self.awaiting_reply = False
        self.last_heard = now

    def timed_out(self, now: float) -> Optional[str]:
        """Why the connection is past a timeout now, or None."""
        settings = self.settings
        if self.state == HANDSHAKE:
            if now - self.accepted_at > settings.handshake_timeout:
                return f"no hello within {settings.handshake_timeout:g} s"
            return None
        if not self.awaiting_reply and now - self.last_heard > settings.idle_timeout:
            return f"no request for {settings.idle_timeout:g} s"
        limit = settings.episode_timeout
        if self.state == EPISODE and limit is not None and now - self.episode_started > limit:
            return f"an episode longer than {limit:g} s"
        return None


def checked(spec: Spec, value: object, where: str) -> np.ndarray:
    """``value`` checked against ``spec`` (shape, dtype, finite, range) and converted to its dtype.

    Raises:
        ProtocolError: ``bad_message`` with the check's explanation.
    """
    try:
        return check_sample(spec, value, where)
    except ValueError as exc:
        raise ProtocolError(BAD_MESSAGE, str(exc)) from None


def checked_keys(specs: Mapping[str, Spec], value: object, limit: float, where: str) -> Dict[str, np.ndarray]:
    """``value``, a dict space's observation: a map with exactly the keys of ``specs``, each value
    checked against its spec and, for a float one, within ``[-limit, limit]``.

    Raises:
        ProtocolError: ``bad_message`` naming the missing or unknown keys, or the key whose value does not fit.
    """
    if not isinstance(value, dict):
        raise ProtocolError(BAD_MESSAGE, f"{where} 'obs': expected a map of keys {list(specs)}, got an array")
    if value.keys() != specs.keys():
        missing = [key for key in specs if key not in value]
        unknown = sorted(key for key in value if key not in specs)
        raise ProtocolError(
            BAD_MESSAGE, f"{where} 'obs': keys {list(specs)} expected, missing {missing}, unknown {unknown}"
        )
    return {
        key: bounded(spec, checked(spec, value[key], where), limit, "max_abs_observation", where)
        for key, spec in specs.items()
    }


def _name(message: object) -> str:
    return type(message).__name__.lower()
