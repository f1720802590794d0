"""Observations as a model's input dict: one array per input, named after the space's parts.

    to_inputs = observation_mapper(env.observation_space)
    to_inputs(obs)          # Box: {"obs": arr}; Dict: {"image": ..., "vec": ...}; Tuple: {"obs_0": ..., "obs_1": ...}
    to_inputs = import_function("my_package.my_inputs", "observation_inputs")   # a function of one's own

uint8 arrays (image frames) stay uint8, a quarter of the bytes (the model scales them); anything
else becomes float32. Every part of a Dict or Tuple space must be a Box.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Mapping, Tuple, Union

import numpy as np

ArrayDict = Dict[str, np.ndarray]
#: ``obs -> inputs``: an observation as the input dict of a model.
ObservationMapper = Callable[[Any], ArrayDict]
#: The input name of a Box observation.
OBS = "obs"


def obs_inputs(obs: Any) -> ArrayDict:
    """The default input dict of an observation: ``{"obs": array}``, float32 except that
    uint8 image frames stay uint8 (a quarter of the bytes; the model scales them)."""
    return {OBS: as_input(obs)}


def as_input(value: Any) -> np.ndarray:
    """One observation (or one part of a Dict or Tuple one) as the array a model takes: float32, except
    that uint8 image frames stay uint8."""
    arr = np.asarray(value)
    return arr if arr.dtype == np.uint8 else arr.astype(np.float32, copy=False)


def input_dtype(space: Any) -> str:
    """The dtype of the input a Box becomes: ``uint8`` for uint8, else ``float32``."""
    return "uint8" if np.dtype(getattr(space, "dtype", None) or np.float32) == np.uint8 else "float32"


def observation_parts(space: Any) -> List[Tuple[str, Any]]:
    """``(input name, Box)`` for each part of a Dict or Tuple space, in the space's order: a Dict's
    keys as they are, a Tuple's parts as ``obs_0``, ``obs_1``, ...; ``[("obs", space)]`` for a Box.

    Raises:
        ValueError: a part that is not a Box, or a Dict key that is not a valid name, named.
    """
    kind = type(space).__name__
    if kind == "Dict":
        parts = [(key, part) for key, part in space.spaces.items()]
        for key, _ in parts:
            if not (isinstance(key, str) and key.isidentifier()):
                raise ValueError(f"observation key {key!r}: expected a name of letters, digits and '_'")
    elif kind == "Tuple":
        parts = [(f"{OBS}_{index}", part) for index, part in enumerate(space.spaces)]
    elif kind == "Box":
        return [(OBS, space)]
    else:
        raise ValueError(f"unsupported observation space {type(space).__name__}: expected a Box, Dict or Tuple")
    for name, part in parts:
        if type(part).__name__ != "Box":
            raise ValueError(
                f"observation {name!r}: expected a Box, got {' '.join(repr(part).split())} "
                f"(map it with an observation_inputs function of your own)"
            )
    return parts


def observation_mapper(space: Any, owner: str = "GymAgent") -> ObservationMapper:
    """The default ``obs -> inputs`` of observations from ``space``: :func:`obs_inputs` for a Box (or
    any space that is not a Dict or Tuple), one input per key for a Dict, ``obs_<i>`` per part for a Tuple.

    The mapper of a Dict or Tuple raises ValueError, naming the key and ``owner``, for an observation
    that is not a mapping (a sequence) or lacks one of the space's keys.
    """
    kind = type(space).__name__
    if kind == "Dict":
        keys = [name for name, _ in observation_parts(space)]
        return _dict_mapper(keys, owner)
    if kind == "Tuple":
        names = [name for name, _ in observation_parts(space)]
        return _tuple_mapper(names, owner)
    return obs_inputs


def _dict_mapper(keys: List[str], owner: str) -> ObservationMapper:
    def to_inputs(obs: Any) -> ArrayDict:
        if not isinstance(obs, Mapping):
            raise ValueError(f"{owner}: expected a mapping observation with key {keys[0]!r}, got {type(obs).__name__}")
        out = {}
        for key in keys:
            if key not in obs:
                raise ValueError(f"{owner}: observation key {key!r} is missing (keys given: {sorted(map(str, obs))})")
            out[key] = as_input(obs[key])
        return out

    return to_inputs


def _tuple_mapper(names: List[str], owner: str) -> ObservationMapper:
    def to_inputs(obs: Any) -> ArrayDict:
        if isinstance(obs, Mapping) or not isinstance(obs, (tuple, list)) or len(obs) != len(names):
            raise ValueError(f"{owner}: expected a tuple observation of {len(names)} parts ({names[0]!r}...)")
        return {name: as_input(part) for name, part in zip(names, obs)}

    return to_inputs


def import_function(path: str, key: str) -> Callable[..., Any]:
    """The function named by the dotted path ``package.module.name``.

    Raises:
        ValueError: naming ``key`` and ``path``, when it does not import or is not callable.
    """
    module, _, name = path.rpartition(".") if isinstance(path, str) else ("", "", "")
    if not module or not name.isidentifier():
        raise ValueError(f"{key}: expected a dotted path package.module.function, got {path!r}")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{key}: cannot import {path!r}: {exc}") from exc
    if not callable(function):
        raise ValueError(f"{key}: {path!r} is not callable")
    return function


def chosen_mapper(space: Any, given: Union[str, ObservationMapper, None], owner: str) -> ObservationMapper:
    """The observation mapping an agent was given (a function or its dotted path), else the default of
    ``space`` (:func:`observation_mapper`); ``owner`` names the agent class in errors.

    Raises:
        ValueError: ``given`` is neither a function nor the dotted path of one.
    """
    if given is None:
        return observation_mapper(space, owner)
    if isinstance(given, str):
        return import_function(given, f"{owner} observation_inputs")
    if not callable(given):
        raise ValueError(f"{owner} observation_inputs: expected a function or its dotted path, got {given!r}")
    return given
