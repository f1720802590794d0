"""parl.wire: plain data round-trips exactly; anything else is refused with a one-line ValueError."""

from __future__ import annotations

import pickle

import msgpack
import numpy as np
import pytest

from parl import wire
from parl.core.batch import Transition

ALLOWED = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
ALLOWED += ["float16", "float32", "float64"]


def same(a: object, b: object) -> bool:
    """Equal values of equal types, arrays by dtype, shape and contents, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) and b.flags.writeable
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a == b
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("dtype", ALLOWED)
def test_arrays_and_scalars_of_every_allowed_dtype_round_trip(dtype: str) -> None:
    values = np.arange(12).reshape(3, 4).astype(dtype)
    for value in (values, values[:, ::2], values[0], np.zeros((0, 5), dtype), values[0, 0], np.asarray(values[1, 1])):
        assert same(wire.unpack(wire.pack(value)), value)
    big_endian = values.astype(np.dtype(dtype).newbyteorder(">"))
    assert np.array_equal(wire.unpack(wire.pack(big_endian)), values)


def test_nested_plain_data_and_a_transition_round_trip() -> None:
    value = {
        "none": None,
        "flags": [True, False],
        "numbers": (0, -(2**63), 2**64 - 1, 1.5, float("inf")),
        "text": "héllo",
        "raw": b"\x00\xff",
        "nested": {"list": [[], (), {}], b"bytes key": ({"deep": [np.float32(2.5)]},), 7: None},
    }
    assert same(wire.unpack(wire.pack(value)), value)
    batch = Transition(
        inputs={"obs": np.ones((2, 4), np.float32)},
        actions={"action": np.array([[1], [0]], np.int64)},
        rewards={"reward": np.array([[1.0], [0.5]], np.float32)},
        next_inputs={"obs": np.zeros((2, 4), np.float32)},
        next_episode_end=np.array([[0.0], [1.0]], np.float32),
        states={},
        next_states={},
        sequence_lengths=(2,),
    )
    fields = wire.unpack(wire.pack(batch))
    assert type(fields) is tuple and same(Transition(*fields), batch)


@pytest.mark.parametrize(
    "value, message",
    [
        (np.array([object()]), "dtype object does not cross"),
        (np.zeros(2, np.complex64), "dtype complex64 does not cross"),
        (np.zeros(2, "datetime64[s]"), "dtype datetime64"),
        (object(), "builtins.object is not plain data"),
        ({"f": len}, "is not plain data"),
    ],
)
def test_what_is_not_plain_data_is_not_packed(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wire.pack(value)


def _frame(value: object) -> bytes:
    """A frame of ``value`` packed by plain msgpack, as a foreign sender could write it."""
    body = msgpack.packb(value, use_bin_type=True)
    return wire.HEADER.pack(wire.MAGIC, wire.VERSION, len(body)) + body


def _array_body(dtype: str, shape: list, data: bytes) -> bytes:
    """A frame holding an array marker with the given fields."""
    return _frame([msgpack.ExtType(1, b""), dtype, shape, data])


class Exploit:
    def __reduce__(self):
        return (print, ("unpickled",))


GOOD = wire.pack({"obs": np.ones(3, np.float32)})


@pytest.mark.parametrize(
    "frame, message",
    [
        (pickle.dumps(Exploit()), r"frame starts with b'\\x80.*not the magic b'PW'"),
        (GOOD[:-1], r"frame body has (\d+) bytes; its header announces (?!\1)\d+"),
        (GOOD[:5], "frame header of 5 bytes"),
        (GOOD + b"\x00", r"frame body has (\d+) bytes; its header announces (?!\1)\d+"),
        (wire.HEADER.pack(wire.MAGIC, wire.VERSION, 1) + b"\xc1", "does not decode"),
        (wire.HEADER.pack(wire.MAGIC, 9, 0), "frame format version 9"),
        (_array_body("|O", [1], b"\x00" * 8), "dtype '|O' is not allowed"),
        (_array_body("<c8", [1], b"\x00" * 8), "dtype '<c8' is not allowed"),
        (_array_body("<f4", [3], b"\x00" * 8), "needs 12 bytes, got 8"),
        (_array_body("<f4", [-1], b""), "non-negative ints"),
        (_frame([1, msgpack.ExtType(2, b"")]), "type marker outside the head of a list"),
        (_frame({(1, 2): 3}), "a map key of type list"),
    ],
)
def test_a_frame_that_is_not_whole_plain_data_is_refused_in_one_line(frame: bytes, message: str, capsys) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        wire.unpack(frame)
    assert "\n" not in str(caught.value)
    assert "unpickled" not in capsys.readouterr().out


def test_an_unknown_extension_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown extension type 42"):
        wire.unpack(_frame(msgpack.ExtType(42, b"code")))


def test_the_maximum_frame_size_holds_on_both_sides() -> None:
    value = np.zeros(1000, np.uint8)
    frame = wire.pack(value)
    with pytest.raises(ValueError, match="exceeds the maximum of 100 bytes"):
        wire.pack(value, max_bytes=100)
    with pytest.raises(ValueError, match="announces a body of .* more than the maximum of 100"):
        wire.unpack(frame, max_bytes=100)
    # The size is read from the header alone, before any body is read.
    huge = wire.HEADER.pack(wire.MAGIC, wire.VERSION, 2**32 - 1)
    with pytest.raises(ValueError, match="more than the maximum"):
        wire.body_size(huge)
