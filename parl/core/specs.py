"""Data specs: the contract between agents and the wrapper.

A spec list is ``[(name, {"shape": [...], "dtype": "float32"}), ...]``; shapes
are per sample (no batch axis). Samples are checked where they enter (in the
agent's thread) and packed into batches by name.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

SpecList = List[Tuple[str, Dict[str, object]]]

# A spec of this kind accepts values of these kinds (numpy dtype.kind letters).
_ACCEPTED_KINDS = {"f": "fiub", "i": "iub", "u": "ub", "b": "b"}


class Spec:
    """One named entry: per-sample shape and dtype."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name: str, shape: Sequence[int], dtype: str) -> None:
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)

    def __repr__(self) -> str:
        return f"Spec({self.name!r}, shape={list(self.shape)}, dtype={self.dtype.name})"


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
        unknown = set(fields) - {"shape", "dtype"}
        if unknown or "shape" not in fields:
            raise ValueError(f"{owner}: spec {name!r} needs 'shape' and optional 'dtype', got {dict(fields)!r}")
        shape = fields["shape"]
        if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape
        ):
            raise ValueError(f"{owner}: spec {name!r} shape must be a list of positive ints, got {shape!r}")
        dtype = fields.get("dtype", "float32")
        try:
            if dtype is None:  # np.dtype(None) would silently mean float64
                raise TypeError
            dt = np.dtype(dtype)
        except TypeError:
            raise ValueError(f"{owner}: spec {name!r} has unknown dtype {dtype!r}") from None
        if dt.kind not in _ACCEPTED_KINDS:
            raise ValueError(f"{owner}: spec {name!r} dtype must be numeric or bool, got {dtype!r}")
        out.append(Spec(name, shape, dt.name))
    return out


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
    """One sample (no batch axis) of ``spec`` as an array of the spec's dtype.

    A scalar is accepted for shape ``[1]``. Values of a narrower kind are
    cast (an int reward for a float spec); a float for an int spec is not.

    Raises:
        ValueError: naming ``what``, the spec, and the expected and actual shape or dtype.
    """
    if type(value) is np.ndarray and value.dtype == spec.dtype and value.shape == spec.shape:
        return value  # the common case, checked in well under a microsecond
    arr = np.asarray(value)
    if arr.dtype.kind not in _ACCEPTED_KINDS[spec.dtype.kind]:
        raise ValueError(f"{what} {spec.name!r}: expected dtype {spec.dtype.name}, got {arr.dtype.name}")
    if arr.shape != spec.shape:
        if arr.size == 1 and spec.shape == (1,):
            arr = arr.reshape(1)
        else:
            raise ValueError(f"{what} {spec.name!r}: expected shape {list(spec.shape)}, got {list(arr.shape)}")
    return arr.astype(spec.dtype, copy=False)


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
