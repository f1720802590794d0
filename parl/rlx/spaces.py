"""The spaces a server announces in its ``welcome``: what observations it takes and actions it sends.

    space = spaces.describe(gymnasium.spaces.Discrete(2))    # DiscreteSpace(n=2, start=0)
    data = space.to_data()                                   # {"type": "discrete", "n": 2, "start": 0}
    assert spaces.from_data(data, "welcome: action_space") == space

Three kinds, as gymnasium names them: ``box`` (an array of ``shape`` and ``dtype`` between ``low`` and
``high``, which may hold infinities), ``discrete`` (an integer in ``[start, start + n)``) and, for
observations since protocol version 2, ``dict`` (a map of key -> a box or discrete space; its
values travel as a map of key -> value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Tuple, Union

import numpy as np

from parl.rlx.errors import BAD_MESSAGE, ProtocolError
from parl.rlx.framing import DTYPES, to_array


@dataclass(frozen=True, eq=False)
class BoxSpace:
    """Arrays of ``shape`` and ``dtype`` (a name of :data:`~parl.rlx.framing.DTYPES`) within ``low``
    and ``high`` (arrays of that shape)."""

    shape: Tuple[int, ...]
    dtype: str
    low: np.ndarray
    high: np.ndarray

    def to_data(self) -> dict:
        """As a ``welcome`` carries it."""
        return {"type": "box", "shape": list(self.shape), "dtype": self.dtype, "low": self.low, "high": self.high}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, BoxSpace)
            and (self.shape, self.dtype) == (other.shape, other.dtype)
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )

    def to_gymnasium(self) -> Any:
        """The same space as a ``gymnasium.spaces.Box`` (imports gymnasium)."""
        from gymnasium import spaces

        return spaces.Box(self.low, self.high, self.shape, np.dtype(self.dtype))


@dataclass(frozen=True)
class DiscreteSpace:
    """The integers ``start``, ..., ``start + n - 1``."""

    n: int
    start: int = 0

    def to_data(self) -> dict:
        """As a ``welcome`` carries it."""
        return {"type": "discrete", "n": self.n, "start": self.start}

    def to_gymnasium(self) -> Any:
        """The same space as a ``gymnasium.spaces.Discrete`` (imports gymnasium)."""
        from gymnasium import spaces

        return spaces.Discrete(self.n, start=self.start)


#: A space a ``dict`` space holds per key.
SimpleSpace = Union[BoxSpace, DiscreteSpace]


@dataclass(frozen=True)
class DictSpace:
    """Values that are maps of key -> a value of ``spaces[key]`` (a box or a discrete space), every key
    present. Keys are strings, and not exactly ``dtype``, ``shape`` and ``data`` (that map is an array)."""

    spaces: Dict[str, SimpleSpace]

    def to_data(self) -> dict:
        """As a ``welcome`` carries it."""
        return {"type": "dict", "spaces": {key: space.to_data() for key, space in self.spaces.items()}}

    def to_gymnasium(self) -> Any:
        """The same space as a ``gymnasium.spaces.Dict`` (imports gymnasium)."""
        from gymnasium import spaces

        return spaces.Dict({key: space.to_gymnasium() for key, space in self.spaces.items()})


Space = Union[BoxSpace, DiscreteSpace, DictSpace]
#: The keys of a map that is an array (framing's array maps): no dict space may have exactly these.
_ARRAY_KEYS = frozenset(("dtype", "shape", "data"))


def describe(space: Any) -> Space:
    """A gymnasium ``Box``, ``Discrete`` or ``Dict`` (of Box and Discrete spaces) space, read by its class
    name and attributes, as RLX describes it.

    Raises:
        ValueError: another kind of space, a Dict holding one, a Box of a dtype arrays do not travel in,
            or a Dict whose keys are not strings or are exactly ``dtype``, ``shape`` and ``data``.
    """
    if type(space).__name__ == "Dict":
        members = dict(space.spaces)
        if not members or not all(isinstance(key, str) for key in members) or set(members) == _ARRAY_KEYS:
            raise ValueError(
                f"a Dict space is served with string keys, not just dtype, shape and data: {list(members)}"
            )
        return DictSpace({key: _simple(member, f"Dict key {key!r}: ") for key, member in members.items()})
    return _simple(space, "")


def _simple(space: Any, where: str) -> SimpleSpace:
    kind = type(space).__name__
    if kind == "Discrete":
        return DiscreteSpace(int(space.n), int(getattr(space, "start", 0)))
    if kind == "Box":
        dtype = np.dtype(space.dtype)
        if dtype.name not in DTYPES:
            raise ValueError(f"{where}a Box of dtype {dtype} cannot be served; dtypes: {', '.join(DTYPES)}")
        shape = tuple(int(d) for d in space.shape)
        low, high = (np.broadcast_to(np.asarray(b, dtype), shape).copy() for b in (space.low, space.high))
        return BoxSpace(shape, dtype.name, low, high)
    raise ValueError(
        f"{where}RLX serves Box and Discrete spaces, got a {kind} space (observations: Dict spaces of them too)"
    )


def from_data(data: object, where: str) -> Space:
    """The space ``data`` (a ``welcome``'s ``observation_space`` or ``action_space``) describes.

    Raises:
        ProtocolError: ``bad_message`` naming ``where`` and what is wrong.
    """
    if isinstance(data, Mapping) and data.get("type") == "dict":
        members = data.get("spaces")
        if set(data) != {"type", "spaces"} or not isinstance(members, dict) or not members:
            raise ProtocolError(BAD_MESSAGE, f"{where}: a dict space is {{type, spaces: a map}}: {_shown(data)}")
        if set(members) == _ARRAY_KEYS:
            raise ProtocolError(BAD_MESSAGE, f"{where}: a dict space's keys cannot be just dtype, shape and data")
        return DictSpace({key: _simple_from_data(value, f"{where}.{key}") for key, value in members.items()})
    return _simple_from_data(data, where)


def action_from_data(data: object, where: str) -> SimpleSpace:
    """The action space ``data`` describes: a box or a discrete space.

    Raises:
        ProtocolError: as :func:`from_data`.
    """
    return _simple_from_data(data, where)


def _simple_from_data(data: object, where: str) -> SimpleSpace:
    if not isinstance(data, Mapping):
        raise ProtocolError(BAD_MESSAGE, f"{where}: expected a map, got {type(data).__name__}")
    kind = data.get("type")
    if kind == "discrete" and set(data) == {"type", "n", "start"}:
        n, start = data["n"], data["start"]
        if type(n) is int and type(start) is int and n >= 1:
            return DiscreteSpace(n, start)
    elif kind == "box" and set(data) == {"type", "shape", "dtype", "low", "high"}:
        shape, dtype = data["shape"], data["dtype"]
        if isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape) and dtype in DTYPES:
            low, high = (to_array(data[bound], f"{where}.{bound}") for bound in ("low", "high"))
            if low.shape == high.shape == tuple(shape):
                return BoxSpace(tuple(shape), dtype, low, high)
    raise ProtocolError(BAD_MESSAGE, f"{where}: not a box or discrete space: {_shown(data)}")


def _shown(data: Mapping[Any, Any]) -> str:
    return "{" + ", ".join(f"{k!r}: {type(v).__name__}" for k, v in list(data.items())[:8]) + "}"
