"""Checks for user-given settings: each raises :class:`ParameterError` naming the setting and the bad value."""

from __future__ import annotations

import numbers
from typing import Optional, Tuple, TypeVar, cast


class ParameterError(ValueError):
    """A setting with a bad value: ``"<name> must be <expected>, got <value!r>"``.

    Attributes:
        name: the setting, as the constructor that checked it calls it (``"gamma"``).
        expected: what it must be, as text (``"a number in [0.0, 1.0]"``, ``"an integer >= 1"``).
        value: the value given.

    A subclass of ValueError, so code that catches ValueError still does; robot
    configs use the attributes to report the setting by its key path.
    """

    def __init__(self, name: str, expected: str, value: object) -> None:
        super().__init__(f"{name} must be {expected}, got {value!r}")
        self.name = name
        self.expected = expected
        self.value = value

    def __reduce__(self) -> Tuple[type, Tuple[str, str, object]]:
        # Exceptions pickle through their args (here the message); rebuild from the attributes.
        return (type(self), (self.name, self.expected, self.value))


def check_positive(name: str, value: object) -> float:
    """``value`` as a float > 0."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not float(value) > 0:
        raise ParameterError(name, "a positive number", value)
    return float(value)


def check_range(name: str, value: object, low: float, high: float) -> float:
    """``value`` as a float in [low, high]."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not low <= float(value) <= high:
        raise ParameterError(name, f"a number in [{low}, {high}]", value)
    return float(value)


def check_int(name: str, value: object, minimum: int, maximum: Optional[int] = None) -> int:
    """``value`` as an int in [minimum, maximum]."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ParameterError(name, "an integer", value)
    if int(value) < minimum or (maximum is not None and int(value) > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ParameterError(name, f"an integer {bound}", value)
    return int(value)


_Choice = TypeVar("_Choice")


def check_choice(name: str, value: object, choices: Tuple[_Choice, ...]) -> _Choice:
    """``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ParameterError(name, f"one of {list(choices)}", value)
    return cast(_Choice, value)


def short_repr(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters: a value read from a damaged or forged file, named
    in a one-line message, may be of any length."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
