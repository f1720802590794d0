"""Checks for user-given settings: each raises ValueError naming the setting and the bad value."""

from __future__ import annotations

import numbers
from typing import Optional


def check_positive(name: str, value: object) -> float:
    """``value`` as a float > 0."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def check_range(name: str, value: object, low: float, high: float) -> float:
    """``value`` as a float in [low, high]."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    return float(value)


def check_int(name: str, value: object, minimum: int, maximum: Optional[int] = None) -> int:
    """``value`` as an int in [minimum, maximum]."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def check_choice(name: str, value: object, choices: tuple) -> object:
    """``value`` if it is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value
