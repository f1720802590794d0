"""RLX frames: a 4-byte big-endian length, then that many bytes of one msgpack map.

    frame = framing.encode({"type": "init", "obs": np.zeros(4, np.float32)})
    reader = framing.FrameReader(max_frame_bytes=framing.MAX_FRAME_BYTES)
    for body in reader.feed(received_bytes):      # whole frames only; a partial one waits for more
        message = framing.decode(body)            # a dict; arrays still as {dtype, shape, data} maps
        obs = framing.to_array(message["obs"], "init: obs")

numpy arrays are written as maps ``{"dtype": "float32", "shape": [4], "data": <bin>}``: the
little-endian C-order bytes of one of the dtypes of :data:`DTYPES`; numpy scalars as plain numbers.
Nothing else that is not plain msgpack data is written, and nothing read can run code: a body
decodes to maps, lists, strings, bytes, numbers, booleans and nil only. docs/rlx.md gives the
frames byte by byte.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Mapping, Union

import msgpack
import numpy as np

from parl import wire
from parl.rlx.errors import BAD_FRAME, BAD_MESSAGE, ProtocolError

#: The frame header: the body's length, a big-endian unsigned 32-bit integer.
HEADER = struct.Struct(">I")
#: The largest body read or written unless a server says otherwise (1 MiB).
MAX_FRAME_BYTES = 1 << 20
#: The dtypes arrays travel in, by name (the data is little-endian).
DTYPES: Dict[str, np.dtype] = {np.dtype(s).name: np.dtype(s) for s in sorted(wire.DTYPES)}
_ARRAY_KEYS = frozenset(("dtype", "shape", "data"))


def encode(message: Mapping[str, object]) -> bytes:
    """``message`` as one frame (header and body).

    Raises:
        ValueError: it holds what is not plain data (naming the type), or an array of another dtype
            than those of :data:`DTYPES`.
    """
    try:
        body = msgpack.packb(message, default=_plain, use_bin_type=True)
    except (TypeError, OverflowError) as exc:
        raise ValueError(f"message does not encode: {exc}") from None
    return HEADER.pack(len(body)) + body


def _plain(value: object) -> object:
    """What msgpack cannot write by itself: numpy arrays (as array maps) and numpy scalars."""
    if isinstance(value, np.ndarray):
        dtype = value.dtype.newbyteorder("<")
        if dtype.name not in DTYPES or value.dtype.kind not in "biuf":
            raise ValueError(f"an array of dtype {value.dtype} does not travel; dtypes: {', '.join(DTYPES)}")
        data = np.ascontiguousarray(value, dtype=dtype).tobytes()
        return {"dtype": dtype.name, "shape": list(value.shape), "data": data}
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__module__}.{type(value).__qualname__} is not plain data")


def decode(body: bytes) -> Dict[str, Any]:
    """The message in a frame's body: a map with string keys.

    Raises:
        ProtocolError: ``bad_frame``: the body is not exactly one msgpack map with string keys.
    """
    try:
        value = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # noqa: BLE001 - msgpack raises ValueError, ExtraData, StackError, ...
        raise ProtocolError(
            BAD_FRAME, f"body does not decode as msgpack: {type(exc).__name__}: {_short(exc)}"
        ) from None
    if not isinstance(value, dict):
        raise ProtocolError(BAD_FRAME, f"body is a msgpack {type(value).__name__}, not a map")
    return value


def to_array(value: object, where: str) -> np.ndarray:
    """``value`` as a numpy array: an array map, a number, or a (nested) list of numbers.

    Raises:
        ProtocolError: ``bad_message`` naming ``where``: another type, an array map with other keys,
            a dtype not in :data:`DTYPES`, data that does not fill the shape, a ragged list.
    """
    if isinstance(value, dict):
        if value.keys() != _ARRAY_KEYS:
            raise ProtocolError(BAD_MESSAGE, f"{where}: an array map has keys dtype, shape, data; got {_keys(value)}")
        return _from_array_map(value, where)
    if isinstance(value, (bool, int, float, list)):
        try:
            array = np.asarray(value)
        except (ValueError, OverflowError) as exc:
            raise ProtocolError(BAD_MESSAGE, f"{where}: not an array of numbers: {_short(exc)}") from None
        if array.dtype.kind not in "biuf":
            raise ProtocolError(BAD_MESSAGE, f"{where}: a list that is not all numbers (numpy reads {array.dtype})")
        return array
    raise ProtocolError(
        BAD_MESSAGE, f"{where}: expected an array map, a number or a list of numbers, got {type(value).__name__}"
    )


def to_observation(value: object, where: str) -> Union[np.ndarray, Dict[str, np.ndarray]]:
    """``value`` as an array (as :func:`to_array` reads one), or, when it is a map that is not an array
    map, as a map of its string keys -> arrays (a dict space's observation).

    Raises:
        ProtocolError: ``bad_message`` as :func:`to_array`, naming ``where.key`` for a map's value, or a
            map's key that is not a string.
    """
    if type(value) is dict:
        if value.keys() == _ARRAY_KEYS:
            return _from_array_map(value, where)
        if not all(isinstance(key, str) for key in value):
            raise ProtocolError(BAD_MESSAGE, f"{where}: a map's keys must be strings, got {_keys(value)}")
        return {key: to_array(item, f"{where}.{key}") for key, item in value.items()}
    return to_array(value, where)


def _from_array_map(value: Dict[str, Any], where: str) -> np.ndarray:
    """The array of an array map (its keys already checked)."""
    dtype = DTYPES.get(value["dtype"]) if isinstance(value["dtype"], str) else None
    if dtype is None:
        raise ProtocolError(BAD_MESSAGE, f"{where}: dtype {value['dtype']!r} is not one of {', '.join(DTYPES)}")
    try:
        return wire.array_from(dtype, value["shape"], value["data"])
    except ValueError as exc:
        raise ProtocolError(BAD_MESSAGE, f"{where}: {exc}") from None


class FrameReader:
    """Cuts a byte stream into frame bodies, refusing a frame longer than ``max_frame_bytes`` as soon
    as its header arrives (nothing more of it is kept)."""

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()

    def feed(self, data: bytes) -> List[bytes]:
        """The bodies of the frames completed by ``data``, in order.

        Raises:
            ProtocolError: ``bad_frame``: a header announces 0 bytes or more than ``max_frame_bytes``.
        """
        buffer = self._buffer
        if not buffer and len(data) > HEADER.size:  # the common case: whole frames in one read
            size = self._size(data)
            if len(data) == HEADER.size + size:
                return [data[HEADER.size :]]
        buffer += data
        bodies = []
        while len(buffer) >= HEADER.size:
            size = self._size(buffer)
            end = HEADER.size + size
            if len(buffer) < end:
                break
            bodies.append(bytes(buffer[HEADER.size : end]))
            del buffer[:end]
        return bodies

    @property
    def buffered(self) -> int:
        """Bytes received of a frame not yet complete."""
        return len(self._buffer)

    def _size(self, data: Union[bytes, bytearray]) -> int:
        (size,) = HEADER.unpack_from(data)
        if not 0 < size <= self.max_frame_bytes:
            raise ProtocolError(
                BAD_FRAME, f"a frame announces {size} bytes; frames hold 1 to {self.max_frame_bytes} bytes"
            )
        return size


def _keys(mapping: Mapping[object, object]) -> List[str]:
    return sorted(str(key) for key in mapping)


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160]
