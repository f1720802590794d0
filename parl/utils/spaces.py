"""Model sizes from gymnasium spaces, and a model's specs checked against them.

    sizes = observation_sizes(env.observation_space)   # {"obs_dim": 4} for CartPole-v1
    sizes.update(action_sizes(env.action_space))        # {"num_actions": 2}
    problem = spec_mismatch(model, env.observation_space, env.action_space)  # None: they fit

The size names are the keyword arguments of the models in :mod:`parl.models`:

    Box of shape [n] (observations)          obs_dim=n
    Box of shape [c, s, s] (image frames)    frames=c, screen_size=s   (AtariQModel)
    Discrete(n) (actions)                    num_actions=n
    Box of shape [n] (actions)               action_dim=n
    Dict or Tuple of Boxes (observations)    observation_shapes={name: shape}, observation_dtypes={name: dtype}
                                             (the multi-input models; a Tuple's names are obs_0, obs_1, ...)

A model's ``obs`` input must have the observation space's shape (for a Dict or Tuple space, each
input the part of its name's shape and dtype, and no part or input left over); its
``action`` must be an integer of shape [1] below ``num_actions`` for a
Discrete space (the form :func:`parl.utils.env_action_converter` reads) and of
the Box's shape for a Box.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from parl.utils.observations import input_dtype, observation_parts

#: The size keywords :func:`observation_sizes` gives.
OBSERVATION_SIZE_KEYS: Tuple[str, ...] = (
    "obs_dim",
    "frames",
    "screen_size",
    "observation_shapes",
    "observation_dtypes",
)
#: The size keywords :func:`action_sizes` gives.
ACTION_SIZE_KEYS: Tuple[str, ...] = ("num_actions", "action_dim")


def describe_space(space: Any) -> str:
    """``space`` on one line (its repr with newlines and runs of spaces folded)."""
    return " ".join(repr(space).split())


def _kind(space: Any) -> str:
    return type(space).__name__


def observation_sizes(space: Any) -> Dict[str, Any]:
    """The model sizes an observation space declares: ``{"obs_dim": n}`` for a Box of shape [n],
    ``{"frames": c, "screen_size": s}`` for image frames of shape [c, s, s]; for a Dict or Tuple of
    Boxes ``{"observation_shapes": {name: [...]}, "observation_dtypes": {name: "uint8" or "float32"}}``,
    by the input names :func:`~parl.utils.observations.observation_mapper` feeds.

    Raises:
        ValueError: any other space, named on one line (a part of a Dict or Tuple by its name).
    """
    if _kind(space) in ("Dict", "Tuple"):
        parts = observation_parts(space)
        return {
            "observation_shapes": {name: [int(d) for d in part.shape] for name, part in parts},
            "observation_dtypes": {name: input_dtype(part) for name, part in parts},
        }
    shape = getattr(space, "shape", None)
    if _kind(space) == "Box" and shape is not None:
        if len(shape) == 1:
            return {"obs_dim": int(shape[0])}
        if len(shape) == 3 and shape[1] == shape[2]:
            return {"frames": int(shape[0]), "screen_size": int(shape[1])}
    raise ValueError(
        f"unsupported observation space {describe_space(space)}: expected a Box of shape [n] "
        f"or image frames of shape [frames, size, size], or a Dict or Tuple of Boxes"
    )


def action_sizes(space: Any) -> Dict[str, int]:
    """The model sizes an action space declares: ``{"num_actions": n}`` for Discrete(n),
    ``{"action_dim": n}`` for a Box of shape [n].

    Raises:
        ValueError: any other space, named on one line.
    """
    kind, shape = _kind(space), getattr(space, "shape", None)
    if kind == "Discrete":
        return {"num_actions": int(space.n)}
    if kind == "Box" and shape is not None and len(shape) == 1:
        return {"action_dim": int(shape[0])}
    raise ValueError(f"unsupported action space {describe_space(space)}: expected Discrete(n) or a Box of shape [n]")


@dataclass(frozen=True)
class SpecMismatch:
    """A model's spec that does not fit an environment's space.

    Attributes:
        part: ``"observation"`` or ``"action"``.
        model_side: what the model declares, in words (``"input 'obs' of shape [5]"``).
        env_side: what the environment declares (``"observation shape [4]"``).
    """

    part: str
    model_side: str
    env_side: str


def _spec(specs: Any, name: str) -> Optional[Tuple[Tuple[int, ...], np.dtype]]:
    for spec_name, fields in specs:
        if spec_name == name:
            return tuple(int(d) for d in fields["shape"]), np.dtype(fields.get("dtype", "float32"))
    return None


def _shape(shape: Tuple[int, ...]) -> str:
    return str([int(d) for d in shape])


def _parts_mismatch(specs: Any, space: Any) -> Optional[SpecMismatch]:
    """The first input of ``specs`` that does not fit its part of a Dict or Tuple ``space``, or None."""
    parts = observation_parts(space)
    names: List[str] = [name for name, _ in parts]
    declared = [name for name, _ in specs]
    for name, part in parts:
        spec = _spec(specs, name)
        env_side = f"observation {name!r} of shape {_shape(part.shape)}"
        if spec is None:
            return SpecMismatch("observation", f"inputs {declared} (no {name!r})", env_side)
        if spec[0] != tuple(part.shape):
            return SpecMismatch("observation", f"input {name!r} of shape {_shape(spec[0])}", env_side)
        if spec[1] != np.dtype(input_dtype(part)):
            model_side = f"input {name!r} of dtype {spec[1].name}"
            return SpecMismatch("observation", model_side, f"observation {name!r} fed as {input_dtype(part)}")
    extra = [(name, fields) for name, fields in specs if name not in names]
    if extra:
        name, fields = extra[0]
        model_side = f"input {name!r} of shape {_shape(fields['shape'])}"
        return SpecMismatch("observation", model_side, f"observation (no {name!r}; it has {names})")
    return None


def spec_mismatch(model: Any, observation_space: Any, action_space: Any) -> Optional[SpecMismatch]:
    """The first way ``model``'s observation inputs or ``action`` spec does not fit the spaces, or None.

    For a Box, only the specs named ``obs`` and ``action`` are checked (what :class:`parl.utils.GymAgent`
    feeds and reads); a model without them fits. For a Dict or Tuple of Boxes every part needs an input
    of its name, shape and fed dtype, and every input a part. A Discrete space needs an integer ``action``
    of shape [1] and, when the model has ``num_actions``, that many actions; a Box needs an ``action``
    of its shape.
    """
    if _kind(observation_space) in ("Dict", "Tuple"):
        mismatch = _parts_mismatch(model.get_input_specs(), observation_space)
        if mismatch is not None:
            return mismatch
    else:
        obs = _spec(model.get_input_specs(), "obs")
        obs_shape = getattr(observation_space, "shape", None)
        if obs is not None and obs_shape is not None and tuple(obs_shape) != obs[0]:
            return SpecMismatch(
                "observation", f"input 'obs' of shape {_shape(obs[0])}", f"observation shape {_shape(obs_shape)}"
            )
    action = _spec(model.get_action_specs(), "action")
    if action is None:
        return None
    shape, dtype = action
    env_side = f"action space {describe_space(action_space)}"
    if _kind(action_space) == "Discrete":
        if shape != (1,) or dtype.kind not in "iu":
            return SpecMismatch("action", f"action of shape {_shape(shape)} and dtype {dtype.name}", env_side)
        num_actions = getattr(model, "num_actions", None)
        if num_actions is not None and int(num_actions) != int(action_space.n):
            return SpecMismatch("action", f"{num_actions} actions", env_side)
    elif _kind(action_space) == "Box" and tuple(action_space.shape) != shape:
        return SpecMismatch("action", f"action of shape {_shape(shape)}", env_side)
    return None
