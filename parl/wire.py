"""Framed plain data on msgpack: what crosses a pipe or a socket, and cannot run code when read.

    frame = wire.pack({"kind": "learn", "batch": (np.zeros((4, 2), np.float32), None)})
    value = wire.unpack(frame)                         # the same nested data back, arrays as arrays
    size = wire.body_size(frame[: wire.HEADER.size])   # reading from a stream: the header first

A frame is an 8-byte header (the magic ``b"PW"``, the format version, a zero
byte, the body's length as a little-endian uint32) and a msgpack body. The
body holds nested dicts (keys str, bytes, int, float, bool or None), lists and tuples of None, bool,
int, float, str, bytes, numpy arrays and numpy scalars. msgpack has no tuple
or array type, so each of those is a msgpack list whose first element is an
extension marker (ext type with an empty payload):

- tuple: ``[ext 2, item, ...]`` (a NamedTuple crosses as a plain tuple);
- array: ``[ext 1, dtype, shape, data]``, ``dtype`` as numpy's little-endian
  ``dtype.str`` (``"<f4"``), ``shape`` a list of ints, ``data`` the C-order
  bytes as msgpack bin;
- numpy scalar: ``[ext 3, dtype, data]``.

Only the dtypes of :data:`DTYPES` cross (bool, int8-64, uint8-64, float16/32/64).
:func:`unpack` refuses anything else with a one-line ``ValueError`` naming what
was wrong: another magic (a pickle, say), a body larger than ``max_bytes``
(checked from the header, before the body is read), a truncated or trailing
body, an unknown extension type, a marker out of its place, an array whose
dtype is not allowed or whose data does not match its shape. Decoded arrays are
writable copies. This module imports nothing of parl.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Tuple, Union

import msgpack
import numpy as np

#: The header: magic, version, a zero byte, the body's length.
HEADER = struct.Struct("<2sBxI")
MAGIC = b"PW"
VERSION = 1
#: Largest body :func:`pack` writes and :func:`unpack` reads, unless told otherwise (256 MiB).
MAX_FRAME_BYTES = 256 << 20
#: The dtypes that cross, by numpy's little-endian ``dtype.str``.
DTYPES = frozenset(
    np.dtype(name).newbyteorder("<").str
    for name in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
)
#: Most dimensions of an array that crosses.
MAX_DIMS = 32

_ARRAY, _TUPLE, _SCALAR = 1, 2, 3
_MARKERS = {code: msgpack.ExtType(code, b"") for code in (_ARRAY, _TUPLE, _SCALAR)}


# -- encoding ---------------------------------------------------------------------------------


def pack(value: object, *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """``value`` as one frame (header and body).

    Raises:
        ValueError: ``value`` holds something that does not cross (naming its type or dtype), or
            its body would be larger than ``max_bytes``.
    """
    return b"".join(pack_parts(value, max_bytes=max_bytes))


def pack_parts(value: object, *, max_bytes: int = MAX_FRAME_BYTES) -> Tuple[bytes, bytes]:
    """``value`` as a frame's header and body, for writing one after the other without joining them.

    Raises:
        ValueError: as :func:`pack`.
    """
    try:
        body = msgpack.packb(value, default=_default, use_bin_type=True, strict_types=True)
    except (TypeError, OverflowError) as exc:
        raise ValueError(f"value does not cross the wire: {exc}") from None
    if len(body) > max_bytes:
        raise ValueError(f"frame body of {len(body)} bytes exceeds the maximum of {max_bytes} bytes")
    return HEADER.pack(MAGIC, VERSION, len(body)), body


#: Types msgpack packs by itself; an instance of a subclass is packed as its plain value.
_PLAIN_TYPES: Tuple[type, ...] = (bool, int, float, str, bytes, dict, list)


def _default(obj: object) -> object:
    """What msgpack cannot pack by itself: tuples, arrays, numpy scalars, subclasses of plain types."""
    if isinstance(obj, np.ndarray):
        array = obj if obj.flags.c_contiguous else obj.copy(order="C")  # 0-d stays 0-d
        dtype = _dtype_out(array.dtype)
        if array.dtype != dtype:
            array = array.astype(dtype)
        return [_MARKERS[_ARRAY], dtype.str, list(array.shape), array.reshape(-1).view(np.uint8).data]
    if isinstance(obj, tuple):
        return [_MARKERS[_TUPLE], *obj]
    if isinstance(obj, np.generic):
        dtype = _dtype_out(obj.dtype)
        return [_MARKERS[_SCALAR], dtype.str, np.asarray(obj, dtype).tobytes()]
    for plain in _PLAIN_TYPES:
        if isinstance(obj, plain):  # a subclass (an IntEnum, an OrderedDict): its plain value
            return plain(obj)
    raise TypeError(f"{type(obj).__module__}.{type(obj).__qualname__} is not plain data")


def _dtype_out(dtype: np.dtype) -> np.dtype:
    little = dtype.newbyteorder("<")
    if little.str not in DTYPES:
        raise ValueError(f"dtype {dtype} does not cross the wire; allowed: {_allowed()}")
    return little


def _allowed() -> str:
    return ", ".join(sorted(np.dtype(d).name for d in DTYPES))


# -- decoding ---------------------------------------------------------------------------------


def body_size(header: Union[bytes, bytearray], *, max_bytes: int = MAX_FRAME_BYTES) -> int:
    """The body length a frame's header announces.

    Raises:
        ValueError: the header is short, has another magic or version, or announces more than
            ``max_bytes``.
    """
    if len(header) != HEADER.size:
        raise ValueError(f"frame header of {len(header)} bytes; expected {HEADER.size}")
    magic, version, size = HEADER.unpack(header)
    if magic != MAGIC:
        raise ValueError(f"frame starts with {bytes(header[:4])!r}, not the magic {MAGIC!r}")
    if version != VERSION:
        raise ValueError(f"frame format version {version}; this side reads version {VERSION}")
    if size > max_bytes:
        raise ValueError(f"frame announces a body of {size} bytes, more than the maximum of {max_bytes}")
    return size


def unpack(frame: Union[bytes, memoryview], *, max_bytes: int = MAX_FRAME_BYTES) -> Any:
    """The value of one whole frame.

    Raises:
        ValueError: the frame is not one whole frame of plain data (see the module docstring).
    """
    size = body_size(bytes(frame[: HEADER.size]), max_bytes=max_bytes)
    body = memoryview(frame)[HEADER.size :]
    if len(body) != size:
        raise ValueError(f"frame body has {len(body)} bytes; its header announces {size}")
    return unpack_body(body)


def unpack_body(body: Union[bytes, bytearray, memoryview]) -> Any:
    """The value of a frame's body (its header already checked by :func:`body_size`).

    Raises:
        ValueError: the body is truncated, has trailing bytes, or holds what does not cross.
    """
    markers: List[int] = [0, 0]  # made by ext_hook, taken by list_hook
    ext_hook, list_hook = _hooks(markers)
    try:
        value = msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=False,
            object_pairs_hook=_mapping,
            use_list=True,
            ext_hook=ext_hook,
            list_hook=list_hook,
        )
    except ValueError as exc:
        raise ValueError(f"frame body does not decode: {_one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - msgpack's OutOfData and others are not ValueErrors
        raise ValueError(f"frame body does not decode: {type(exc).__name__}: {_one_line(exc)}") from None
    if markers[0] != markers[1]:
        raise ValueError("frame body has a type marker outside the head of a list")
    return value


_KEY_TYPES = (str, bytes, int, float, bool, type(None))


def _mapping(pairs: List[Tuple[object, object]]) -> dict:
    for key, _ in pairs:
        if not isinstance(key, _KEY_TYPES):
            raise ValueError(f"a map key of type {type(key).__name__}; keys are str, bytes, int, float, bool or None")
    return dict(pairs)


class _Marker:
    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code


_SENTINELS = {code: _Marker(code) for code in _MARKERS}


def _hooks(markers: List[int]) -> Tuple[Callable[[int, bytes], object], Callable[[list], object]]:
    def ext_hook(code: int, data: bytes) -> object:
        sentinel = _SENTINELS.get(code)
        if sentinel is None or data:
            raise ValueError(f"unknown extension type {code} with {len(data)} bytes")
        markers[0] += 1
        return sentinel

    def list_hook(items: list) -> object:
        head = items[0] if items else None
        if not isinstance(head, _Marker):
            return items
        markers[1] += 1
        if head.code == _TUPLE:
            return tuple(items[1:])
        if head.code == _ARRAY:
            return _array(items)
        return _scalar(items)

    return ext_hook, list_hook


def _array(items: list) -> np.ndarray:
    if len(items) != 4:
        raise ValueError(f"array of {len(items) - 1} fields; expected dtype, shape, data")
    _, dtype_str, shape, data = items
    return array_from(_dtype_in(dtype_str), shape, data)


def array_from(dtype: np.dtype, shape: object, data: object) -> np.ndarray:
    """A writable array in native byte order from ``data``, the C-order bytes of an array of ``dtype``
    (an allowed one, in the byte order it names) and ``shape``: how every format that carries arrays
    as dtype, shape and bytes reads them.

    Raises:
        ValueError: ``shape`` is not a list of at most :data:`MAX_DIMS` non-negative ints, or ``data``
            is not bytes of exactly the size they make.
    """
    if not isinstance(shape, list) or len(shape) > MAX_DIMS:
        raise ValueError(f"array shape {shape!r} is not a list of at most {MAX_DIMS} ints")
    count = 1
    for dim in shape:
        if type(dim) is not int or dim < 0:
            raise ValueError(f"array shape {shape!r} is not a list of non-negative ints")
        count *= dim
    if not isinstance(data, bytes) or len(data) != count * dtype.itemsize:
        got = len(data) if isinstance(data, bytes) else type(data).__name__
        raise ValueError(f"array of dtype {dtype} and shape {shape} needs {count * dtype.itemsize} bytes, got {got}")
    array = np.frombuffer(data, dtype=dtype).reshape(shape).copy()
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


def _scalar(items: list) -> np.generic:
    if len(items) != 3:
        raise ValueError(f"numpy scalar of {len(items) - 1} fields; expected dtype, data")
    _, dtype_str, data = items
    dtype = _dtype_in(dtype_str)
    if not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise ValueError(f"numpy scalar of dtype {dtype} needs {dtype.itemsize} bytes")
    return np.frombuffer(data, dtype=dtype)[0].astype(dtype.newbyteorder("="))


_DTYPE_OF: Dict[str, np.dtype] = {s: np.dtype(s) for s in DTYPES}


def _dtype_in(name: object) -> np.dtype:
    dtype = _DTYPE_OF.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ValueError(f"dtype {name!r} is not allowed; allowed: {sorted(DTYPES)}")
    return dtype


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]
