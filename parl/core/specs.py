"""Data specs: the contract between agents and the wrapper.

A spec list is ``[(name, {"shape": [...], "dtype": "float32"}), ...]``; shapes
are per sample (no batch axis). An integer spec may also declare the values it
takes, ``"range": [low, high]`` (``low <= value < high``, as Python's ``range``):
a discrete action's ``[0, num_actions]``.

Samples are checked where they enter (in the agent's thread, by
:func:`check_sample`) and packed into batches by name. Besides shape and dtype,
the check refuses a float sample holding NaN or infinity and an integer sample
outside its spec's range, so one agent's bad value fails that agent alone and
never reaches a batch, a normalizer or a replay buffer.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, cast

import numpy as np
from numpy.typing import DTypeLike

SpecList = List[Tuple[str, Dict[str, object]]]

# A spec of this kind accepts values of these kinds (numpy dtype.kind letters).
_ACCEPTED_KINDS = {"f": "fiub", "i": "iub", "u": "ub", "b": "b"}


class Spec:
    """One named entry: per-sample shape and dtype, and for an integer spec optionally the range
    ``[low, high)`` of its values.

    Attributes:
        floating: whether samples are floats (and so checked to be finite).
    """

    __slots__ = ("name", "shape", "dtype", "value_range", "floating")

    def __init__(
        self, name: str, shape: Sequence[int], dtype: str, value_range: Optional[Tuple[int, int]] = None
    ) -> None:
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.value_range = None if value_range is None else (int(value_range[0]), int(value_range[1]))
        self.floating = self.dtype.kind == "f"

    def __repr__(self) -> str:
        extra = "" if self.value_range is None else f", range={list(self.value_range)}"
        return f"Spec({self.name!r}, shape={list(self.shape)}, dtype={self.dtype.name}{extra})"


def normalize_specs(specs: SpecList, owner: str) -> List[Spec]:
    """Check a model's spec list and turn it into :class:`Spec` objects.

    Raises:
        ValueError: an entry is not ``(name, dict(shape=..., dtype=...))``.
    """
    if not isinstance(specs, (list, tuple)):
        raise ValueError(f"{owner}: expected a list of (name, dict(shape=..., dtype=...)), got {specs!r}")
    out: List[Spec] = []
    for entry in specs:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[1], Mapping)):
            raise ValueError(f"{owner}: expected (name, dict(shape=..., dtype=...)), got {entry!r}")
        name, fields = entry
        if not isinstance(name, str) or not name:
            raise ValueError(f"{owner}: spec names must be non-empty strings, got {name!r}")
        if any(s.name == name for s in out):
            raise ValueError(f"{owner}: spec {name!r} is declared twice")
        unknown = set(fields) - {"shape", "dtype", "range"}
        if unknown or "shape" not in fields:
            raise ValueError(
                f"{owner}: spec {name!r} needs 'shape' and optional 'dtype' and 'range', got {dict(fields)!r}"
            )
        shape = fields["shape"]
        if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape
        ):
            raise ValueError(f"{owner}: spec {name!r} shape must be a list of positive ints, got {shape!r}")
        dtype = fields.get("dtype", "float32")
        try:
            if dtype is None:  # np.dtype(None) would silently mean float64
                raise TypeError
            dt = np.dtype(cast(DTypeLike, dtype))  # checked here: a TypeError is reported below
        except TypeError:
            raise ValueError(f"{owner}: spec {name!r} has unknown dtype {dtype!r}") from None
        if dt.kind not in _ACCEPTED_KINDS:
            raise ValueError(f"{owner}: spec {name!r} dtype must be numeric or bool, got {dtype!r}")
        out.append(Spec(name, shape, dt.name, _value_range(owner, name, dt, fields.get("range"))))
    return out


def _value_range(owner: str, name: str, dtype: np.dtype, value_range: object) -> Optional[Tuple[int, int]]:
    """A spec's declared ``range`` as ``(low, high)``, None when it declares none.

    Raises:
        ValueError: the range is not two ints ``low < high``, or the spec is not of an integer dtype.
    """
    if value_range is None:
        return None
    if dtype.kind not in "iu":
        raise ValueError(f"{owner}: spec {name!r} declares a range but its dtype is {dtype.name}, not an integer")
    if not (
        isinstance(value_range, (list, tuple))
        and len(value_range) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value_range)
        and value_range[0] < value_range[1]
    ):
        raise ValueError(f"{owner}: spec {name!r} range must be [low, high] with ints low < high, got {value_range!r}")
    return int(value_range[0]), int(value_range[1])


#: Specs as ``(name, shape, dtype)`` tuples, for :func:`fits` on hot paths.
Layout = List[Tuple[str, Tuple[int, ...], np.dtype]]


def layout(specs: Sequence[Spec]) -> Layout:
    """``specs`` as the tuples :func:`fits` reads."""
    return [(s.name, s.shape, s.dtype) for s in specs]


def fits(specs: Layout, values: object) -> bool:
    """Whether ``values`` is a dict holding, for each spec and nothing else, a numpy array of exactly
    its shape and dtype: the check that lets a transport take a sample as it is (a sample that does
    not fit goes through :func:`check_dict`, which converts it or names the problem)."""
    if type(values) is not dict or len(values) != len(specs):
        return False
    for name, shape, dtype in specs:
        value = values.get(name)
        if type(value) is not np.ndarray or value.dtype is not dtype or value.shape != shape:
            return False
    return True


def check_sample(spec: Spec, value: object, what: str) -> np.ndarray:
    """One sample (no batch axis) of ``spec`` as an array of the spec's dtype, with usable values.

    A scalar is accepted for shape ``[1]``. Values of a narrower kind are
    cast (an int reward for a float spec); a float for an int spec is not.
    A float sample must be finite, and an integer sample of a spec with a
    range must lie in it.

    Raises:
        ValueError: naming ``what``, the spec, and the expected and actual shape or dtype, or the
            bad value and where it sits.
    """
    if type(value) is np.ndarray and value.dtype == spec.dtype and value.shape == spec.shape:
        arr = value  # the common case: taken as it is, its values checked below
    else:
        arr = np.asarray(value)
        if arr.dtype.kind not in _ACCEPTED_KINDS[spec.dtype.kind]:
            raise ValueError(f"{what} {spec.name!r}: expected dtype {spec.dtype.name}, got {arr.dtype.name}")
        if arr.shape != spec.shape:
            if arr.size == 1 and spec.shape == (1,):
                arr = arr.reshape(1)
            else:
                raise ValueError(f"{what} {spec.name!r}: expected shape {list(spec.shape)}, got {list(arr.shape)}")
        arr = arr.astype(spec.dtype, copy=False)
    if spec.floating:
        if not all_finite(arr):
            raise ValueError(_bad_value(what, spec, arr, ~np.isfinite(arr), "not finite"))
    elif spec.value_range is not None:
        low, high = spec.value_range
        if not (low <= arr.item() < high if arr.size == 1 else low <= arr.min() and arr.max() < high):
            outside = (arr < low) | (arr >= high)
            raise ValueError(_bad_value(what, spec, arr, outside, f"outside its range [{low}, {high})"))
    return arr


def all_finite(values: np.ndarray) -> bool:
    """Whether a float array holds no NaN and no infinity."""
    if values.size <= _SMALL:  # an observation vector, a reward: a third of the array test's cost
        return all(map(math.isfinite, values.ravel().tolist()))
    return bool(np.isfinite(values).all())


#: Arrays of at most this many values are tested in Python (faster than numpy's calls there).
_SMALL = 16


def _bad_value(what: str, spec: Spec, arr: np.ndarray, bad: np.ndarray, reason: str) -> str:
    """The message for a sample refused for the value at the first True of ``bad``."""
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    if arr.size == 1:
        return f"{what} {spec.name!r} is {arr[index]} ({reason})"
    return f"{what} {spec.name!r} holds {arr[index]} at index {index} ({reason})"


def check_dict(specs: Sequence[Spec], values: Mapping[str, object], what: str) -> Dict[str, np.ndarray]:
    """Check a dict holding one sample per spec; extra or missing names raise ValueError."""
    if type(values) is not dict and not isinstance(values, Mapping):
        raise ValueError(f"{what}: expected a dict with keys {[s.name for s in specs]}, got {type(values).__name__}")
    if not specs and not values:
        return {}
    out = {}
    for spec in specs:
        if spec.name not in values:
            break
        out[spec.name] = check_sample(spec, values[spec.name], what)
    if len(out) != len(specs) or len(values) != len(specs):
        raise ValueError(f"{what}: expected keys {sorted(s.name for s in specs)}, got {sorted(values)}")
    return out


def zeros(specs: Sequence[Spec], batch_size: int) -> Dict[str, np.ndarray]:
    """A zero batch for each spec (initial recurrent states, warm-up inputs)."""
    return {s.name: np.zeros((batch_size,) + s.shape, dtype=s.dtype) for s in specs}


def stack(samples: Sequence[Mapping[str, np.ndarray]], specs: Sequence[Spec]) -> Dict[str, np.ndarray]:
    """Pack per-sample dicts into one batch dict."""
    return {s.name: np.stack([sample[s.name] for sample in samples]) for s in specs}
