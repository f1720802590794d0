"""The RLX protocol (parl.rlx): frames, arrays, messages and spaces round-trip, anything else is refused
with a ProtocolError naming it, and the byte-level test vectors of docs/rlx.md are what the code writes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict

import msgpack
import numpy as np
import pytest

from parl.rlx import spaces
from parl.rlx.address import is_loopback, split_address
from parl.rlx.errors import BAD_FRAME, BAD_MESSAGE, ProtocolError
from parl.rlx.framing import DTYPES, FrameReader, decode, encode, to_array
from parl.rlx.messages import (
    Action,
    Bye,
    Done,
    Error,
    Hello,
    Init,
    Metrics,
    Reset,
    Step,
    Welcome,
    parse_client,
    parse_server,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "rlx.md"
OBS = np.array([0.25, 2.0], np.float32)

#: The messages of docs/rlx.md's test vectors, by name.
VECTORS = {
    "hello": Hello(1, None, ""),
    "hello-token": Hello(1, b"0123456789abcdef0123456789abcdef", "node"),
    "welcome": Welcome(
        1,
        spaces.BoxSpace((2,), "float32", np.array([-1, -1], np.float32), np.array([1, 1], np.float32)),
        spaces.DiscreteSpace(2),
        {"max_frame_bytes": 1048576, "idle_timeout": 60.0, "episode_timeout": None},
        0,
        0,
    ),
    "init": Init(np.array([0.5, -1.0], np.float32)),
    "action": Action(1, 3),
    "step": Step(1.0, OBS),
    "step-terminated": Step(1.0, OBS, terminated=True),
    "reset": Reset(1.0),
    "reset-truncated": Reset(0.5, truncated=True, obs=OBS),
    "done": Done(12.0, 12),
    "metrics": Metrics("act_latency_ms", 0.25),
    "bye": Bye(),
    "error": Error("busy", "all 8 slots are taken"),
}
SERVER_MESSAGES = (Welcome, Action, Done, Error)


def docs_vectors() -> Dict[str, bytes]:
    """The frames of the ``rlx-vectors`` block of docs/rlx.md, by name."""
    block = re.search(r"```rlx-vectors\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S)
    assert block, "docs/rlx.md has no rlx-vectors block"
    vectors: Dict[str, bytes] = {}
    name = None
    for line in block.group(1).splitlines():
        if line and not line.startswith(" "):
            name = line.rstrip(":")
            vectors[name] = b""
        elif line.strip():
            vectors[name] += bytes.fromhex(line)
    return vectors


def same(a: object, b: object) -> bool:
    """Equal messages, arrays compared by dtype, shape and values."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_the_docs_vectors_are_what_the_code_writes_and_reads() -> None:
    vectors = docs_vectors()
    assert sorted(vectors) == sorted(VECTORS)
    for name, message in VECTORS.items():
        frame = vectors[name]
        assert encode(message.to_data()) == frame, name
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        parse = parse_server if isinstance(message, SERVER_MESSAGES) else parse_client
        assert same(parse(frame[4:]), message), name


def test_other_valid_encodings_are_read_the_same() -> None:
    # What another language's msgpack may write: keys in another order, float32 numbers, wide integers.
    body = msgpack.packb({"obs": [0.25, 2.0], "reward": 1, "type": "step"})
    message = parse_client(body)
    assert message.reward == 1.0 and message.obs.tolist() == [0.25, 2.0]
    packer = msgpack.Packer(use_single_float=True)
    assert parse_client(packer.pack({"type": "reset", "reward": 0.5})) == Reset(0.5)
    wide = b"\x82\xa4type\xa5hello\xa7version\xcf" + (1).to_bytes(8, "big")
    assert parse_client(wide) == Hello(1)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_arrays_of_every_dtype_round_trip(dtype: str) -> None:
    values = np.arange(6).reshape(2, 3).astype(dtype)
    for array in (values, values[:, ::2], np.asarray(values[0, 0]), np.zeros((0, 4), dtype)):
        (body,) = FrameReader().feed(encode({"a": array}))
        back = to_array(decode(body)["a"], "a")
        assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array)
    big_endian = values.astype(np.dtype(dtype).newbyteorder(">"))
    assert np.array_equal(to_array(decode(encode({"a": big_endian})[4:])["a"], "a"), values)


def test_numbers_and_lists_are_arrays_too() -> None:
    assert to_array(3, "x").tolist() == 3 and to_array([[1, 2], [3, 4.5]], "x").dtype == np.float64
    assert to_array(True, "x").dtype == np.bool_


@pytest.mark.parametrize(
    "value, message",
    [
        ({"dtype": "float32", "shape": [2]}, "x: an array map has keys dtype, shape, data; got ['dtype', 'shape']"),
        ({"dtype": "complex64", "shape": [1], "data": b"\0" * 8}, "x: dtype 'complex64' is not one of"),
        ({"dtype": "float32", "shape": [3], "data": b"\0" * 8}, "needs 12 bytes, got 8"),
        ({"dtype": "float32", "shape": [-1], "data": b""}, "is not a list of non-negative ints"),
        ({"dtype": "float32", "shape": [1] * 40, "data": b"\0" * 4}, "is not a list of at most 32 ints"),
        ({"dtype": "float32", "shape": 2, "data": b"\0" * 8}, "shape 2 is not a list"),
        ([1, [2, 3]], "x: not an array of numbers"),
        (["a", "b"], "x: a list that is not all numbers"),
        ([2**70], "x: a list that is not all numbers"),
        ("1.0", "x: expected an array map, a number or a list of numbers, got str"),
        (None, "got NoneType"),
    ],
)
def test_what_is_not_an_array_is_refused_naming_it(value: object, message: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(message)) as info:
        to_array(value, "x")
    assert info.value.code == BAD_MESSAGE


def test_numpy_values_that_do_not_travel_are_refused_when_written() -> None:
    with pytest.raises(ValueError, match="an array of dtype complex64 does not travel"):
        encode({"a": np.zeros(2, np.complex64)})
    with pytest.raises(ValueError, match="is not plain data"):
        encode({"a": object()})
    assert decode(encode({"a": np.float32(1.5), "b": np.int64(3)})[4:]) == {"a": 1.5, "b": 3}


def test_the_reader_cuts_a_stream_into_frames_wherever_it_is_split() -> None:
    frames = [encode(m.to_data()) for m in VECTORS.values()]
    stream = b"".join(frames)
    for chunk in (1, 3, 7, 64, len(stream)):
        reader = FrameReader()
        bodies = []
        for start in range(0, len(stream), chunk):
            bodies += reader.feed(stream[start : start + chunk])
        assert bodies == [f[4:] for f in frames] and reader.buffered == 0
    reader = FrameReader()
    assert reader.feed(frames[0][:-1]) == [] and reader.buffered == len(frames[0]) - 1


@pytest.mark.parametrize("size", [0, 1025, 2**32 - 1])
def test_a_header_announcing_no_body_or_too_much_is_refused_at_once(size: int) -> None:
    with pytest.raises(ProtocolError, match=f"a frame announces {size} bytes; frames hold 1 to 1024 bytes") as info:
        FrameReader(max_frame_bytes=1024).feed(size.to_bytes(4, "big"))
    assert info.value.code == BAD_FRAME


@pytest.mark.parametrize(
    "body, message",
    [
        (b"\xc1", "body does not decode as msgpack"),
        (msgpack.packb([1, 2]), "body is a msgpack list, not a map"),
        (msgpack.packb({"type": "hello"}) + b"\x00", "body does not decode as msgpack: ExtraData"),
        (msgpack.packb({1: 2}), "body does not decode as msgpack"),
        (b"\x91" * 5000, "body does not decode as msgpack"),
    ],
)
def test_a_body_that_is_not_one_msgpack_map_is_a_bad_frame(body: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        parse_client(body)
    assert info.value.code == BAD_FRAME


@pytest.mark.parametrize(
    "data, message",
    [
        ({"type": "jump"}, "unknown message type 'jump'; expected one of ['hello', 'init', 'step', 'reset'"),
        ({"type": 3}, "unknown message type 3"),
        ({"obs": [1.0]}, "unknown message type None"),
        ({"type": "welcome"}, "unknown message type 'welcome'"),
        ({"type": "hello"}, "hello: version is missing"),
        ({"type": "hello", "version": -1}, "hello: version must be an integer >= 0, got -1"),
        ({"type": "hello", "version": 1, "token": 5}, "hello: token must be a string or bytes"),
        ({"type": "hello", "version": 1, "token": "x" * 5000}, "of at most 4096 bytes"),
        ({"type": "init"}, "init: obs is missing"),
        ({"type": "init", "obs": [1.0], "extra": 1}, "init: unknown field ['extra']"),
        ({"type": "step", "obs": [1.0]}, "step: reward is missing"),
        ({"type": "step", "reward": "1", "obs": [1.0]}, "step: reward must be a finite number, got '1'"),
        ({"type": "step", "reward": float("nan"), "obs": [1.0]}, "step: reward must be a finite number, got nan"),
        ({"type": "step", "reward": float("-inf"), "obs": [1.0]}, "step: reward must be a finite number, got -inf"),
        ({"type": "step", "reward": True, "obs": [1.0]}, "step: reward must be a finite number, got True"),
        ({"type": "step", "reward": 1, "obs": [1.0], "terminated": 1}, "step: terminated must be true or false"),
        ({"type": "step", "reward": 1, "obs": [1.0], "action_taken": "left"}, "step: action_taken: expected an"),
        ({"type": "reset", "reward": 1, "truncated": "yes"}, "reset: truncated must be true or false"),
        ({"type": "metrics", "name": "a b", "value": 1}, "metrics: name must be a string matching"),
        ({"type": "metrics", "name": "x" * 129, "value": 1}, "metrics: name must be a string matching"),
        (
            {"type": "metrics", "name": "loss", "value": 1, "step": -2},
            "metrics: step must be an integer in [0, 2**63 - 1]",
        ),
        (
            {"type": "metrics", "name": "loss", "value": 1, "step": 2**64 - 1},
            "metrics: step must be an integer in [0, 2**63 - 1]",
        ),
        ({"type": "bye", "now": True}, "bye: unknown field ['now']"),
    ],
)
def test_a_malformed_client_message_is_refused_naming_its_field(data: dict, message: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(message)) as info:
        parse_client(msgpack.packb(data))
    assert info.value.code == BAD_MESSAGE


@pytest.mark.parametrize(
    "data, message",
    [
        ({"type": "error", "code": "oops", "message": "x"}, "error: code must be one of"),
        ({"type": "action", "action": 1}, "action: weights_version is missing"),
        ({"type": "welcome", "version": 1}, "welcome: observation_space is missing"),
    ],
)
def test_a_malformed_server_message_is_refused(data: dict, message: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(message)):
        parse_server(msgpack.packb(data))


def test_gymnasium_spaces_are_described_and_read_back() -> None:
    import gymnasium

    box = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    described = spaces.describe(box)
    assert described.shape == (3,) and described.dtype == "float32" and np.isinf(described.high).all()
    for space in (described, spaces.describe(gymnasium.spaces.Discrete(4, start=1))):
        data = decode(encode({"s": space.to_data()})[4:])["s"]
        assert spaces.from_data(data, "s") == space
    assert spaces.describe(gymnasium.spaces.Discrete(4, start=1)).to_gymnasium() == gymnasium.spaces.Discrete(
        4, start=1
    )
    assert described.to_gymnasium() == box
    with pytest.raises(ValueError, match="RLX serves Box and Discrete spaces, got a MultiBinary space"):
        spaces.describe(gymnasium.spaces.MultiBinary(3))
    with pytest.raises(ProtocolError, match="s: not a box or discrete space"):
        spaces.from_data({"type": "discrete", "n": 0, "start": 0}, "s")


@pytest.mark.parametrize(
    "address, parts",
    [("127.0.0.1:7070", ("127.0.0.1", 7070)), ("[::1]:0", ("::1", 0)), ("robot.lan:65535", ("robot.lan", 65535))],
)
def test_addresses_are_split(address: str, parts: tuple) -> None:
    assert split_address(address) == parts


@pytest.mark.parametrize("address", ["7070", ":7070", "host:", "host:70000", "host:-1", 7070])
def test_an_address_without_host_or_port_is_refused(address: object) -> None:
    with pytest.raises(ValueError, match="expected an address host:port"):
        split_address(address)


def test_loopback_hosts() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost")] == [True] * 4
    assert [is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "robot.lan")] == [False] * 4
