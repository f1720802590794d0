"""The spaces a server announces in its ``welcome``: what observations it takes and actions it sends.

    space = spaces.describe(gymnasium.spaces.Discrete(2))    # DiscreteSpace(n=2, start=0)
    data = space.to_data()                                   # {"type": "discrete", "n": 2, "start": 0}
    assert spaces.from_data(data, "welcome: action_space") == space

Two kinds, as gymnasium names them: ``box`` (an array of ``shape`` and ``dtype`` between ``low`` and
``high``, which may hold infinities) and ``discrete`` (an integer in ``[start, start + n)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Tuple, Union

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


Space = Union[BoxSpace, DiscreteSpace]


def describe(space: Any) -> Space:
    """A gymnasium ``Box`` or ``Discrete`` space (read by its class name and attributes) as RLX describes it.

    Raises:
        ValueError: another kind of space, or a Box of a dtype arrays do not travel in.
    """
    kind = type(space).__name__
    if kind == "Discrete":
        return DiscreteSpace(int(space.n), int(getattr(space, "start", 0)))
    if kind == "Box":
        dtype = np.dtype(space.dtype)
        if dtype.name not in DTYPES:
            raise ValueError(f"a Box of dtype {dtype} cannot be served; dtypes: {', '.join(DTYPES)}")
        shape = tuple(int(d) for d in space.shape)
        low, high = (np.broadcast_to(np.asarray(b, dtype), shape).copy() for b in (space.low, space.high))
        return BoxSpace(shape, dtype.name, low, high)
    raise ValueError(f"RLX serves Box and Discrete spaces, got a {kind} space")


def from_data(data: object, where: str) -> Space:
    """The space ``data`` (a ``welcome``'s ``observation_space`` or ``action_space``) describes.

    Raises:
        ProtocolError: ``bad_message`` naming ``where`` and what is wrong.
    """
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
