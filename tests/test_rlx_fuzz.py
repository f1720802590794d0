"""Hostile frames against a live RLX server: random bytes, truncated frames, oversize lengths, bodies that
are not maps, wrong dtypes and shapes, unknown types and fields, mutations of valid frames, every field of
every message at the edges of its type (1e308, 3.4e38, NaN, infinities, 2**63, 2**64 - 1, -1, wrong
types, strings as long as a frame), a flood of metrics and more silent connections than the server
waits for. Each ends its own connection (with an error frame and a log line where the server could
read enough to say why) and nothing else: a well-behaved client plays on throughout with every answer
right, no agent fails, no update is skipped, and the server takes new clients afterwards."""

from __future__ import annotations

import logging
import random
import struct
import threading
from typing import Callable, Dict, List, Optional, Tuple

import msgpack
import numpy as np
import pytest

import parl.rlx
from parl.rlx.errors import BAD_FRAME, BAD_MESSAGE, BUSY, TIMEOUT, VERSION
from parl.rlx.framing import encode

from toys import RawConnection, rlx_obs, wait_for

HELLO = encode({"type": "hello", "version": 1})
INIT = encode({"type": "init", "obs": np.array([1.0, 2.0], np.float32)})
BYE = encode({"type": "bye"})
STEP = encode({"type": "step", "reward": 1.0, "obs": np.array([1.0, 2.0], np.float32)})


def frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def array(dtype: str, shape: list, data: bytes) -> Dict[str, object]:
    return {"dtype": dtype, "shape": shape, "data": data}


def init_with(obs: object) -> bytes:
    return frame(msgpack.packb({"type": "init", "obs": obs}, use_bin_type=True))


#: Hostile inputs (sent after a hello unless named "raw ..."), and the error code each must get (None: the
#: server may say nothing, as when the frame never completes and the client leaves).
CASES: Dict[str, tuple] = {
    "raw random bytes": (lambda rng: bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 600))), "any"),
    "raw oversize length": (lambda rng: struct.pack(">I", 0x7FFFFFFF) + b"\0" * 64, BAD_FRAME),
    "raw 2**32-1 length": (lambda rng: b"\xff\xff\xff\xff", BAD_FRAME),
    "raw zero length": (lambda rng: b"\0\0\0\0", BAD_FRAME),
    "raw http request": (lambda rng: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", BAD_FRAME),
    "raw pickle": (lambda rng: frame(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01."), BAD_FRAME),
    "raw truncated hello, then leaving": (lambda rng: HELLO[: rng.randrange(1, len(HELLO))], None),
    "truncated init, then leaving": (lambda rng: INIT[: rng.randrange(1, len(INIT))], None),
    "not msgpack": (lambda rng: frame(b"\xc1\xc1"), BAD_FRAME),
    "a list, not a map": (lambda rng: frame(msgpack.packb([1, 2, 3])), BAD_FRAME),
    "trailing bytes": (lambda rng: frame(msgpack.packb({"type": "bye"}) + b"\0"), BAD_FRAME),
    "nested 100,000 deep": (lambda rng: frame(b"\x91" * 100_000 + b"\x00"), BAD_FRAME),
    "integer keys": (lambda rng: frame(msgpack.packb({1: "hello"})), BAD_FRAME),
    "unknown type": (lambda rng: frame(msgpack.packb({"type": "exec", "code": "import os"})), BAD_MESSAGE),
    "unknown field": (lambda rng: frame(msgpack.packb({"type": "init", "obs": [1.0, 2.0], "x": 1})), BAD_MESSAGE),
    "missing obs": (lambda rng: frame(msgpack.packb({"type": "init"})), BAD_MESSAGE),
    "ext type": (lambda rng: frame(msgpack.packb({"type": "init", "obs": msgpack.ExtType(5, b"xx")})), BAD_MESSAGE),
    "complex dtype": (lambda rng: init_with(array("complex64", [2], b"\0" * 16)), BAD_MESSAGE),
    "object dtype": (lambda rng: init_with(array("object", [2], b"\0" * 16)), BAD_MESSAGE),
    "big-endian name": (lambda rng: init_with(array(">f4", [2], b"\0" * 8)), BAD_MESSAGE),
    "short data": (lambda rng: init_with(array("float32", [2], b"\0" * 7)), BAD_MESSAGE),
    "huge shape": (lambda rng: init_with(array("float32", [2**40, 2**40], b"\0" * 8)), BAD_MESSAGE),
    "negative shape": (lambda rng: init_with(array("float32", [-2], b"")), BAD_MESSAGE),
    "wrong shape": (lambda rng: init_with(array("float32", [3], b"\0" * 12)), BAD_MESSAGE),
    "wrong rank": (lambda rng: init_with(array("float32", [1, 2], b"\0" * 8)), BAD_MESSAGE),
    "strings": (lambda rng: init_with(["1.0", "2.0"]), BAD_MESSAGE),
    "ragged list": (lambda rng: init_with([1.0, [2.0]]), BAD_MESSAGE),
    "infinity": (lambda rng: init_with(array("float64", [2], np.array([np.inf, 0.0]).tobytes())), BAD_MESSAGE),
    "int too big for float32": (lambda rng: init_with([2**64 - 1, 0]), None),
    "a second request before the answer": (lambda rng: INIT + INIT, BAD_MESSAGE),
    "a step with no episode": (lambda rng: STEP, BAD_MESSAGE),
    "a mutated valid frame": (lambda rng: mutated(INIT, rng), "any"),
    "a mutated valid step": (lambda rng: INIT + mutated(STEP, rng), "any"),
}


#: Random mutations of valid conversations per seed, each on a connection of its own.
MUTATION_ROUNDS = 150


def mutated(valid: bytes, rng: random.Random) -> bytes:
    """``valid`` with a few random bytes of its body changed (its length kept)."""
    data = bytearray(valid)
    for _ in range(rng.randrange(1, 4)):
        data[rng.randrange(4, len(data))] = rng.getrandbits(8)
    return bytes(data)


def attack(address: str, payload: bytes, with_hello: bool, leave: bool) -> Tuple[List[dict], bool]:
    """Send ``payload`` on a new connection (after a hello when ``with_hello``); every message the server
    sent, and whether it closed the connection within 5 s of the last one (``leave``: the client closes
    at once)."""
    raw = RawConnection(address, timeout=5.0)
    messages: List[dict] = []
    try:
        if with_hello:
            assert raw.hello()["type"] == "welcome"
        raw.send_bytes(payload)
        if leave:
            return messages, True
        while True:
            message = raw.read()
            if message is None:
                return messages, True
            messages.append(message)
    except TimeoutError:
        return messages, False
    except OSError:  # the server closed while the payload was being sent
        return messages, True
    finally:
        raw.close()


class GoodClient(threading.Thread):
    """Plays CartPole-like echo episodes until told to stop; counts steps and wrong answers."""

    def __init__(self, address: str) -> None:
        super().__init__(name="good-client", daemon=True)
        self.address = address
        self.stop = threading.Event()
        self.steps = 0
        self.wrong = 0
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            with parl.rlx.Client(self.address) as client:
                while not self.stop.is_set():
                    self.wrong += client.init(rlx_obs(9, 0)) != 9000
                    for step in range(1, 20):
                        self.wrong += client.send(1.0, rlx_obs(9, step)) != 9000 + step
                    client.reset(1.0)
                    self.steps += 20
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hostile_frames_end_their_own_connection_only(rlx_server, seed: int, caplog: pytest.LogCaptureFixture) -> None:
    manager, address = rlx_server(slots=3, handshake_timeout=2.0)
    good = GoodClient(address)
    good.start()
    rng = random.Random(seed)
    caplog.set_level(logging.INFO, logger="parl.rlx")
    outcomes = {}
    steps_before = 0
    for name, (make, expected) in CASES.items():
        payload = make(rng)
        raw = name.startswith("raw ")
        replies, closed = attack(address, payload, with_hello=not raw, leave=expected is None)
        assert closed, f"{name}: the server did not close the connection: {replies}"
        errors = [r for r in replies if r.get("type") == "error"]
        if expected not in (None, "any"):
            assert [e["code"] for e in errors] == [expected], f"{name}: {replies}"
        outcomes[name] = errors[0]["code"] if errors else None
        assert good.error is None and good.is_alive(), f"{name}: the good client failed: {good.error!r}"
        steps_before = good.steps
    for round_ in range(MUTATION_ROUNDS):  # then many random mutations of valid conversations
        payload = rng.choice([mutated(HELLO, rng), HELLO + mutated(INIT, rng), HELLO + INIT + mutated(STEP, rng)])
        # A bye after it: a mutation that leaves the conversation valid is answered, then closed.
        _, closed = attack(address, payload + BYE, with_hello=False, leave=False)
        assert closed, f"mutation {round_}: {payload.hex()}: the server did not close the connection"
    assert good.error is None and good.steps > steps_before
    good.stop.set()
    good.join(5.0)
    assert good.error is None and good.wrong == 0 and good.steps > 0
    assert manager.errors == []
    errors_logged = [r for r in caplog.records if r.levelno == logging.WARNING and "ended (" in r.getMessage()]
    assert len(errors_logged) >= sum(code in (BAD_FRAME, BAD_MESSAGE) for code in outcomes.values())
    with parl.rlx.Client(address) as client:  # still taking clients
        assert client.init(rlx_obs(1, 0)) == 1000


def test_a_frame_that_never_completes_times_out(rlx_server) -> None:
    _, address = rlx_server(slots=1, idle_timeout=0.3)
    raw = RawConnection(address)
    raw.hello()
    raw.send_bytes(INIT[:-3])
    assert raw.read_all() == [{"type": "error", "code": TIMEOUT, "message": "no request for 0.3 s"}]


def test_a_client_that_does_not_read_its_answers_is_closed_once_four_frames_wait() -> None:
    import socket

    from parl.runtime.rlx.connection import Connection
    from parl.runtime.rlx.settings import ServerSettings

    server_end, client_end = socket.socketpair()
    server_end.setblocking(False)
    conn = Connection(server_end, "peer", settings=ServerSettings(max_frame_bytes=1024), now=0.0)
    answer = parl.rlx.messages.Error("busy", "x" * 900)
    with pytest.raises(OSError, match=r"the client does not read: \d+ bytes wait for it"):
        for _ in range(100_000):
            conn.send(answer)
    assert conn.wants_to_write
    conn.close()
    client_end.close()


# -- every field at the edges of its type, floods and silent connections, beside an honest client ------------

#: Numbers at the edges of their types: finite as float64 but not as float32 (1e308), float32's largest
#: (3.4e38), the non-finite floats, int64's and uint64's ends and -1.
EDGES = [1e308, -1e308, 3.4e38, -3.4e38, float("nan"), float("inf"), float("-inf"), 2**63, 2**64 - 1, -1]
#: Values of the wrong type for every field.
WRONG_TYPES = ["x", None, [], {}, b"\x00"]
#: A string as long as a frame takes (the largest frame is 1 MiB).
HUGE = "x" * ((1 << 20) - 200)


#: Each field a client sends: the setup its message needs, the message with the field set to a value, and
#: the values of EDGES and WRONG_TYPES it takes (every other one is refused with ``bad_message``).
A_STEP = {"type": "step", "reward": 1.0, "obs": [1.0, 2.0]}
FIELDS: Dict[str, Tuple[str, Callable[[object], dict], tuple]] = {
    "init obs": ("hello", lambda v: {"type": "init", "obs": [v, 0.0]}, (-1,)),
    "step obs": ("episode", lambda v: {**A_STEP, "obs": [v, 0.0]}, (-1,)),
    "step reward": ("episode", lambda v: {**A_STEP, "reward": v}, (-1,)),
    "step terminated": ("episode", lambda v: {**A_STEP, "terminated": v}, ()),
    "step truncated": ("episode", lambda v: {**A_STEP, "truncated": v}, ()),
    "step action_taken": ("episode", lambda v: {**A_STEP, "action_taken": v}, ()),
    "reset reward": ("episode", lambda v: {"type": "reset", "reward": v}, (-1,)),
    "reset truncated": ("episode", lambda v: {"type": "reset", "reward": 1.0, "truncated": v}, ()),
    "reset obs": ("episode", lambda v: {"type": "reset", "reward": 1.0, "obs": [v, 0.0]}, (-1,)),
    "reset action_taken": ("episode", lambda v: {"type": "reset", "reward": 1.0, "action_taken": v}, ()),
    "metrics name": ("hello", lambda v: {"type": "metrics", "name": v, "value": 1.0}, ("x",)),
    "metrics value": (
        "hello",
        lambda v: {"type": "metrics", "name": "x", "value": v},
        (3.4e38, -3.4e38, 2**63, 2**64 - 1, -1),
    ),
    "metrics step": ("hello", lambda v: {"type": "metrics", "name": "x", "value": 1.0, "step": v}, ()),
    "hello version": ("raw", lambda v: {"type": "hello", "version": v}, ()),
    "hello token": ("raw", lambda v: {"type": "hello", "version": 1, "token": v}, ("x", b"\x00")),  # no token asked
    "hello client": ("raw", lambda v: {"type": "hello", "version": 1, "client": v}, ("x",)),
}


def edge_cases() -> List[Tuple[str, str, dict, str]]:
    """``(name, setup, message, code)``: a message with one field at an edge, sent on a new connection
    once ``setup`` (``"raw"``: nothing, ``"hello"``: a welcome, ``"episode"``: an init's action) is done,
    and the error code it must get."""
    cases = []
    for name, (setup, message, taken) in FIELDS.items():
        for value in EDGES + WRONG_TYPES:
            if not any(value is t or (type(value) is type(t) and value == t) for t in taken):
                # a whole number >= 0 is a version, another one than the server's
                code = VERSION if name == "hello version" and value in (2**63, 2**64 - 1) else BAD_MESSAGE
                cases.append((name, setup, message(value), code))
        if name in ("hello client", "hello token", "metrics name"):  # as long as a frame takes
            cases.append((f"{name} of a frame's length", setup, message(HUGE), BAD_MESSAGE))
    cases.append(("a frame beyond the limit", "hello", FIELDS["metrics name"][1](HUGE + "x" * 300), BAD_FRAME))
    return cases


def hostile(address: str, setup: str, message: dict) -> List[dict]:
    """Send ``message`` on a new connection once ``setup`` is done; what the server sent after the setup."""
    raw = RawConnection(address, timeout=5.0)
    try:
        if setup != "raw":
            assert raw.hello()["type"] == "welcome"
        if setup == "episode":
            raw.send({"type": "init", "obs": [1.0, 2.0]})
            assert raw.read()["type"] == "action"
        try:
            raw.send(message)
        except OSError:  # closed while the frame was sent (one beyond the limit)
            pass
        return raw.read_all()
    finally:
        raw.close()


class MetricsFlood(threading.Thread):
    """A client that says hello, then sends metrics as fast as the server takes them until told to stop."""

    def __init__(self, address: str) -> None:
        super().__init__(name="metrics-flood", daemon=True)
        self.raw = RawConnection(address, timeout=0.2)
        assert self.raw.hello()["type"] == "welcome"
        self.stop = threading.Event()
        self.sent = 0

    def run(self) -> None:
        chunk = b"".join(encode({"type": "metrics", "name": "flood", "value": 1.0, "step": i}) for i in range(500))
        while not self.stop.is_set():
            try:
                self.raw.send_bytes(chunk)
                self.sent += 500
            except TimeoutError:  # the server reads it no faster than its rate: TCP holds the sender back
                pass


def test_values_at_the_edges_of_their_types_floods_and_silent_connections_end_their_own_only(rlx_server) -> None:
    manager, address = rlx_server(slots=3, handshake_timeout=0.5, max_handshakes=8)
    good = GoodClient(address)
    good.start()
    assert wait_for(lambda: good.steps > 0)
    for name, setup, message, code in edge_cases():  # every hostile connection gets its error
        replies = hostile(address, setup, message)
        assert [r.get("code") for r in replies] == [code], f"{name} = {str(message)[:80]}: {replies}"
        assert good.error is None, f"{name}: the good client failed: {good.error!r}"
    flood = MetricsFlood(address)  # a flood of metrics beside the good client: dropped, counted, no one slowed
    flood.start()
    steps = good.steps
    assert wait_for(lambda: good.steps >= steps + 200), "the good client was held up by the flood"
    flood.stop.set()
    flood.join(5.0)
    flood.raw.close()
    assert flood.sent > 1000 and manager.runner.stats.throttled_metrics > 0
    silent = [RawConnection(address, timeout=5.0) for _ in range(30)]  # more than max_handshakes
    with parl.rlx.Client(address) as newcomer:  # says hello at once: never the one ended to make room
        assert newcomer.init(rlx_obs(2, 0)) == 2000
    for raw in silent:
        assert [r["code"] for r in raw.read_all()] in ([TIMEOUT], [BUSY])
        raw.close()
    good.stop.set()
    good.join(5.0)
    assert good.error is None and good.wrong == 0
    assert manager.errors == [] and manager.tasks["T"].skipped_updates == 0
    stored = [t for agent in manager.agents for t, _ in agent.helpers["T"].stored]
    assert all(np.isfinite(t.rewards["reward"]).all() and np.abs(t.inputs["obs"]).max() <= 1e6 for t in stored)
