"""The sockets of an RLX server: the listener, every connection, and a wake-up pair; the scheduler
thread of placement ``"rlx"`` polls them between prediction batches.

    server = RlxServer(settings, slots, weights_version, env_steps)
    host, port = server.open()            # listening (port 0: a free one)
    served = server.poll(timeout)         # accepts, reads, answers hellos, hands requests to slots
    server.wake()                         # any thread: ends a poll that waits
    server.close()                        # every client gets error shutdown

Admission (:mod:`parl.runtime.rlx.admission`): a new connection gets ``error busy`` and is closed at
once when its address has ``max_connections_per_address`` connections open, every slot is taken,
or the machine's available memory is below ``min_free_memory``; nothing else changes. Otherwise it
waits for its hello holding no slot, one of at most ``max_handshakes`` such connections (a new one
beyond them ends the oldest, of the address with the most waiting, with ``error timeout``), for
``handshake_timeout`` at most. Each poll reads first and then takes at most ``max_handshakes`` new
connections, so a connection is never ended for room in the poll that took it, and a hello it sent
at once is read before room is made again. A hello that passes the version and token check takes
a free slot, or gets ``error busy`` when none is free. A connection that breaks the protocol (a bad
frame or message, a wrong token or version) or passes a timeout gets its ``error`` and is closed,
with one line on the ``parl.rlx`` logger; the other connections and the robot go on.

Metrics: a connection's ``metrics`` beyond ``max_metrics_per_second`` are dropped (and counted), and
the connection is not read until one would be within the rate again, then a little at a time, so a
client flooding metrics costs the others little; TCP's flow control makes its sender wait.
"""

from __future__ import annotations

import hmac
import logging
import selectors
import socket
from time import perf_counter
from typing import Callable, Dict, List, Optional, Set, Tuple, cast

from parl.rlx.address import split_address
from parl.rlx.errors import BUSY, SERVER_ERROR, SHUTDOWN, TIMEOUT, UNAUTHORIZED, VERSION, ProtocolError
from parl.rlx.framing import encode
from parl.rlx.messages import (
    DICT_SPACES_SINCE,
    Bye,
    ClientMessage,
    Error,
    Hello,
    Metrics,
    ServerMessage,
    Welcome,
    parse_client,
)
from parl.rlx.messages import VERSIONS as PROTOCOL_VERSIONS
from parl.rlx.spaces import DictSpace
from parl.runtime.errors import PlacementStartError
from parl.runtime.rlx.admission import Admission
from parl.runtime.rlx.connection import ClosedByPeer, Connection
from parl.runtime.rlx.log_text import escaped
from parl.runtime.rlx.remote_env import RemoteEnv
from parl.runtime.rlx.settings import ServerSettings
from parl.runtime.rlx.stats import ServerStats

logger = logging.getLogger("parl.rlx")

#: Seconds between two looks at the connections' timeouts.
SWEEP_SECONDS = 0.1
#: New connections taken per poll at most, and never more than ``max_handshakes`` (the rest wait for the
#: next poll).
ACCEPTS_PER_POLL = 64
_LISTENER, _WAKE = "listener", "wake"
#: How loud the line about an ended connection is, by its ServerStats counter (a client that leaves: debug).
_LOG_LEVELS: Dict[Optional[str], int] = {"errors": logging.WARNING, "timeouts": logging.INFO, "refused": logging.INFO}
_READ = selectors.EVENT_READ


class ListenError(PlacementStartError, OSError):
    """The server's address cannot be listened on; the message names it and why."""

    usage = True


class RlxServer:
    """The network side of an RLX server (see the module docstring). Every method but :meth:`wake`
    runs in the scheduler thread, where the slots' agents are greenlets.

    Args:
        settings: address, token, limits and timeouts.
        slots: the slots connections play (the list may grow until :meth:`open`).
        weights_version: the updates of the robot's tasks so far (sent with every action).
        env_steps: the robot's env steps so far (sent in every welcome).
    """

    def __init__(
        self,
        settings: ServerSettings,
        slots: List[RemoteEnv],
        weights_version: Callable[[], int],
        env_steps: Callable[[], int],
    ) -> None:
        self.settings = settings
        self.slots = slots
        self.weights_version = weights_version
        self._env_steps = env_steps
        self.stats = ServerStats()
        self.address: Optional[Tuple[str, int]] = None
        self._selector: Optional[selectors.BaseSelector] = None
        self._listener: Optional[socket.socket] = None
        self._wake_reader: Optional[socket.socket] = None
        self._wake_writer: Optional[socket.socket] = None
        self._connections: Set[Connection] = set()
        self._muted: Dict[Connection, float] = {}  # connection -> when it is read again (metrics beyond its rate)
        self._admission = Admission(settings.max_handshakes, settings.max_connections_per_address)
        self._next_sweep = 0.0

    def open(self) -> Tuple[str, int]:
        """Listen on ``settings.bind``; returns the address listened on (its port when 0 was asked).

        Raises:
            ListenError: the address cannot be listened on (taken, not this machine's, not resolved).
        """
        host, port = split_address(self.settings.bind)
        listener = None
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            listener = socket.socket(family, kind, proto)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(128)
            listener.setblocking(False)
        except OSError as exc:
            if listener is not None:
                listener.close()
            raise ListenError(f"cannot listen on {self.settings.bind}: {exc.strerror or exc}") from None
        self._listener = listener
        self._wake_reader, self._wake_writer = socket.socketpair()
        for sock in (self._wake_reader, self._wake_writer):
            sock.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, _READ, _LISTENER)
        self._selector.register(self._wake_reader, _READ, _WAKE)
        self.address = tuple(listener.getsockname()[:2])
        return self.address

    # -- polling (the scheduler thread) ------------------------------------------------------------
    def poll(self, timeout: float) -> bool:
        """Handle what the sockets have, waiting up to ``timeout`` seconds for something; whether
        anything came (a request handed to a slot runs its agent until it parks again)."""
        if self._muted:
            timeout = max(0.0, min(timeout, min(self._muted.values()) - perf_counter()))
        selector = self._selector
        assert selector is not None  # made by start
        events = selector.select(timeout)
        now = perf_counter()
        listening = False
        for key, mask in events:
            target = key.data
            if target is _LISTENER:
                listening = True  # accepted after the reads: a hello already in counts before room is made
            elif target is _WAKE:
                _drain(cast(socket.socket, self._wake_reader))  # what start made it
            else:
                if mask & selectors.EVENT_WRITE and target.open:
                    self._flush(target)
                if mask & selectors.EVENT_READ and target.open:
                    self._read(target, now)
        if listening:
            self._accept(now)
        if self._muted:
            self._unmute(now)
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_SECONDS
            for conn, reason in [(c, c.timed_out(now)) for c in self._connections]:
                if reason is not None:
                    self.end(conn, TIMEOUT, reason, counter="timeouts")
        return bool(events)

    def wake(self) -> None:
        """End a :meth:`poll` that waits (any thread; nothing once closed)."""
        writer = self._wake_writer
        if writer is not None:
            try:
                writer.send(b"\x01")
            except OSError:  # full (a wake-up is pending anyway) or closed
                pass

    def answer(self, conn: Connection, message: ServerMessage, *, act: bool) -> None:
        """Send the answer to ``conn``'s request under way (an ``act`` counts the server's act latency)."""
        if not conn.open:
            return
        now = perf_counter()
        try:
            conn.send(message)
        except OSError as exc:
            self.end(conn, None, f"cannot write to it: {exc}")
            return
        if conn.wants_to_write:
            self._watch(conn)
        if act:
            self.stats.act_latency.book(1, now - conn.received_at)
        conn.answered(now)

    def end(self, conn: Connection, code: Optional[str], reason: str, *, counter: Optional[str] = None) -> None:
        """Close ``conn``, after an ``error`` of ``code`` (None: none) saying ``reason``; its slot is free
        and an episode it played ends. ``counter``: the :class:`ServerStats` count it adds to."""
        if not conn.open:
            return
        if code is not None:
            try:
                conn.send(Error(code, reason))
            except OSError:
                pass
        self._muted.pop(conn, None)
        selector = self._selector
        assert selector is not None  # made by start
        if conn.sock in selector.get_map():  # a muted connection with nothing to write is not in it
            selector.unregister(conn.sock)
        conn.close()
        self._connections.discard(conn)
        self._admission.closed(conn)
        self.stats.clients -= 1
        if counter is not None:
            setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        level = _LOG_LEVELS.get(counter, logging.DEBUG)
        logger.log(level, "rlx: %r ended%s: %s", conn, f" ({code})" if code else "", escaped(reason))
        if conn.slot is not None:
            conn.slot.connection_closed(conn)

    def close(self) -> None:
        """Tell every client the server stops (``error shutdown``) and close every socket."""
        for conn in list(self._connections):
            try:
                conn.send(Error(SHUTDOWN, "the server is stopping"))
            except OSError:
                pass
            conn.close()
        self._connections.clear()
        self._muted.clear()
        self._admission = Admission(self.settings.max_handshakes, self.settings.max_connections_per_address)
        self.stats.clients = 0
        for sock in (self._listener, self._wake_reader, self._wake_writer):
            if sock is not None:
                sock.close()
        self._wake_writer = None
        if self._selector is not None:
            self._selector.close()

    # -- what polling does ---------------------------------------------------------------------------
    def _accept(self, now: float) -> None:
        # At most max_handshakes a poll: none taken in this poll is ended to make room in the same poll,
        # and the reads of the next come first (a hello already sent is read before room is made again).
        listener, selector = self._listener, self._selector
        assert listener is not None and selector is not None  # made by start
        for _ in range(min(ACCEPTS_PER_POLL, self.settings.max_handshakes)):
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors, say: the client waits in the backlog
                logger.warning("rlx: cannot accept a connection: %s", exc)
                return
            host, peer = _host(address), _peer(address)
            reason = self._admission.refusal(host) or self._refusal(self.free_slot())
            if reason is not None:
                self._refuse(sock, peer, reason)
                continue
            if self._admission.full():  # the oldest waiting, of the address with the most waiting, makes room
                self.end(
                    cast(Connection, self._admission.oldest_waiting()),
                    TIMEOUT,
                    "no hello before newer connections came",
                    counter="timeouts",
                )
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(sock, peer, self.settings, now)
            selector.register(sock, _READ, conn)
            self._connections.add(conn)
            self._admission.opened(conn, host)
            self.stats.accepted += 1
            self.stats.clients += 1

    def _refuse(self, sock: socket.socket, peer: str, reason: str) -> None:
        """Close a new connection after ``error busy`` saying ``reason`` (counted and logged)."""
        self.stats.refused += 1
        logger.info("rlx: client %s refused (busy): %s", peer, reason)
        try:
            sock.setblocking(False)
            sock.send(encode(Error(BUSY, reason).to_data()))
        except OSError:
            pass
        sock.close()

    def free_slot(self) -> Optional[RemoteEnv]:
        """A slot no connection plays and whose agent plays on (None: none)."""
        return next((s for s in self.slots if s.connection is None and not s.retired), None)

    def _refusal(self, slot: Optional[RemoteEnv]) -> Optional[str]:
        """Why a client is refused now, with ``slot`` the free slot it would play (None: it is not)."""
        if slot is None:
            if not self.slots:
                return "this robot plays no remote environment"
            return f"all {len(self.slots)} slots are taken"
        floor = self.settings.min_free_memory
        available = available_memory() if floor else None
        if available is not None and available < floor:
            return f"{available >> 20} MiB of memory available, below the floor of {floor >> 20} MiB"
        return None

    def _read(self, conn: Connection, now: float) -> None:
        try:
            for body in conn.receive():
                self._handle(conn, conn.accept(parse_client(body), now), now)
                if not conn.open:
                    return
        except ProtocolError as exc:
            self.end(conn, exc.code, exc.message, counter="errors")
        except ClosedByPeer:
            self.end(conn, None, "closed by the client")
        except OSError as exc:
            self.end(conn, None, f"socket error: {exc}")
        except Exception:  # noqa: BLE001 - a fault of the server's own ends this connection only
            logger.exception("rlx: %r: the server failed on its request", conn)
            self.end(conn, SERVER_ERROR, "the server failed on this request", counter="errors")

    def _handle(self, conn: Connection, message: ClientMessage, now: float) -> None:
        kind = type(message)
        if kind is Hello:
            self._hello(conn, cast(Hello, message))
        elif kind is Metrics:
            if conn.metric_allowed(now):
                metric = cast(Metrics, message)
                self.stats.client_metric(metric.step, metric.name, metric.value)
            else:
                self.stats.throttled_metrics += 1
                self._muted[conn] = now + conn.quiet_for()
                self._watch(conn)
        elif kind is Bye:
            self.end(conn, None, "said bye")
        else:
            slot = conn.slot
            assert slot is not None  # admitted at its hello
            slot.offer(conn, message)

    def _hello(self, conn: Connection, hello: Hello) -> None:
        if hello.version not in PROTOCOL_VERSIONS:
            speaks = f"versions {PROTOCOL_VERSIONS[0]} to {PROTOCOL_VERSIONS[-1]}"
            reason = f"this server speaks RLX {speaks}, the client version {hello.version}"
            self.end(conn, VERSION, reason, counter="errors")
            return
        token = self.settings.token
        if token is not None and (hello.token is None or not hmac.compare_digest(hello.token, token)):
            self.end(conn, UNAUTHORIZED, "the token is missing or wrong", counter="errors")
            return
        slot = self.free_slot()
        refusal = self._refusal(slot)
        if refusal is not None:
            self.end(conn, BUSY, refusal, counter="refused")
            return
        assert slot is not None  # refused above when there is none
        if hello.version < DICT_SPACES_SINCE and isinstance(slot.described_observation, DictSpace):
            reason = f"this robot's observations are a dict space, carried since RLX version {DICT_SPACES_SINCE}"
            self.end(conn, VERSION, f"{reason}; the client speaks version {hello.version}", counter="errors")
            return
        conn.admit(slot)
        slot.attach(conn)
        self._admission.admitted(conn)
        limits = self.settings.limits()
        welcome = Welcome(
            hello.version, slot.described_observation, slot.described_action, limits, self._env_steps(), slot.index
        )
        self.answer(conn, welcome, act=False)

    def _flush(self, conn: Connection) -> None:
        try:
            conn.flush()
        except OSError as exc:
            self.end(conn, None, f"cannot write to it: {exc}")
            return
        if not conn.wants_to_write:
            self._watch(conn)

    def _watch(self, conn: Connection) -> None:
        """Have the selector watch ``conn`` for what it needs now: reading unless muted, writing while its
        outbox holds frames (a connection that needs neither is not registered)."""
        events = (0 if conn in self._muted else _READ) | (selectors.EVENT_WRITE if conn.wants_to_write else 0)
        selector = self._selector
        assert selector is not None  # made by start
        key = selector.get_map().get(conn.sock)
        if key is None:
            if events:
                selector.register(conn.sock, events, conn)
        elif not events:
            selector.unregister(conn.sock)
        elif key.events != events:
            selector.modify(conn.sock, events, conn)

    def _unmute(self, now: float) -> None:
        """Read again the muted connections whose time has come."""
        for conn in [c for c, until in self._muted.items() if until <= now]:
            del self._muted[conn]
            self._watch(conn)


def available_memory() -> Optional[int]:
    """Bytes of memory available to new work (Linux's ``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass


def _host(address: object) -> str:
    """The host part of a socket address (what the per-address limit counts by)."""
    return str(address[0]) if isinstance(address, tuple) and address else str(address)


def _peer(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host = address[0]
        return f"[{host}]:{address[1]}" if ":" in str(host) else f"{host}:{address[1]}"
    return str(address)
