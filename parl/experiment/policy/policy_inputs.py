"""What :meth:`~parl.experiment.policy.export.Policy.predict` takes, as the batch a task predicts on.

    batch, single = policy_batch(task.input_specs, obs)     # obs: an array, or a mapping name -> array
    actions, next_states = task.predict(batch, states, deterministic=True)
    if single:
        actions = without_batch_axis(actions)

An observation is what the environment gives: a bare array (a single-input policy only) or a
mapping of input name -> array (a gymnasium ``Dict`` observation, or the ``{"obs": ...}`` form);
each with or without a batch axis in front, told apart by the input spec's shape. All inputs must
agree: one sample, or a batch of one size.
"""

from __future__ import annotations

from typing import Dict, Mapping, Sequence, Tuple, Union

import numpy as np

from parl.core.specs import Spec

ArrayDict = Dict[str, np.ndarray]
#: What ``Policy.predict`` takes: an array (single-input policies) or input name -> array.
Observation = Union[np.ndarray, Mapping[str, np.ndarray]]


def policy_batch(specs: Sequence[Spec], obs: object) -> Tuple[ArrayDict, bool]:
    """``obs`` as input name -> ``[B, ...]`` arrays of the specs' dtypes, and whether it was one
    sample (given without a batch axis, now with one of size 1).

    Raises:
        ValueError: a bare array for a policy of several inputs, a missing or unknown input, an array
            of another shape than its spec's with or without a batch axis (naming the input, the shape
            expected and the one given), or inputs that disagree on the batch axis.
    """
    named = _named(specs, obs)
    batch: ArrayDict = {}
    single: Dict[str, bool] = {}
    for spec in specs:
        value = np.asarray(named[spec.name])
        shape = value.shape
        if shape == spec.shape:
            single[spec.name] = True
            value = value[np.newaxis]
        elif shape[1:] == spec.shape and value.ndim == len(spec.shape) + 1:
            single[spec.name] = False
        else:
            raise ValueError(
                f"input {spec.name!r}: expected shape {_expected(spec.shape, value.ndim)}, got {list(shape)}"
            )
        batch[spec.name] = value.astype(spec.dtype, copy=False)
    kinds = set(single.values())
    if len(kinds) > 1:
        ones = sorted(name for name, one in single.items() if one)
        many = sorted(name for name, one in single.items() if not one)
        raise ValueError(f"inputs {ones} are one sample and inputs {many} a batch: give all with a batch axis or none")
    sizes = {name: len(value) for name, value in batch.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"inputs disagree on the batch size: {sizes}")
    return batch, kinds == {True}


def _named(specs: Sequence[Spec], obs: object) -> Mapping[str, object]:
    """``obs`` as input name -> value: a mapping as it is, a bare array as the only input's."""
    names = [spec.name for spec in specs]
    if not isinstance(obs, Mapping):
        if len(names) != 1:
            raise ValueError(
                f"the policy takes inputs {names}: give a mapping of input name -> array, got a bare "
                f"{type(obs).__name__}"
            )
        return {names[0]: obs}
    missing = [name for name in names if name not in obs]
    unknown = sorted(str(key) for key in obs if key not in names)
    if missing or unknown:
        raise ValueError(f"the policy takes inputs {names}: missing {missing}, unknown {unknown}")
    return obs


def _expected(shape: Tuple[int, ...], ndim: int) -> str:
    """The shape expected of an array of ``ndim`` dimensions: a batch's if it has one more than the
    spec, one sample's if as many, else either."""
    sample, batch = str(list(shape)), "[" + ", ".join(["B", *map(str, shape)]) + "]"
    if ndim == len(shape) + 1:
        return batch
    return sample if ndim == len(shape) else f"{sample} or {batch}"


def without_batch_axis(arrays: Mapping[str, np.ndarray]) -> ArrayDict:
    """Each array's only row (the batch axis of a batch of one taken off)."""
    return {name: value[0] for name, value in arrays.items()}


def with_batch_axis(specs: Sequence[Spec], arrays: Mapping[str, np.ndarray], kind: str) -> ArrayDict:
    """``arrays`` (one sample each, no batch axis) as batches of one, checked against ``specs``.

    Raises:
        ValueError: a missing array, or one of another shape than its spec's (naming it).
    """
    out: ArrayDict = {}
    for spec in specs:
        if spec.name not in arrays:
            raise ValueError(f"{kind} {spec.name!r} is missing; given {sorted(arrays)}")
        value = np.asarray(arrays[spec.name])
        if value.shape != spec.shape:
            raise ValueError(
                f"{kind} {spec.name!r}: expected shape {list(spec.shape)} for one sample, got {list(value.shape)}"
            )
        out[spec.name] = value[np.newaxis]
    return out
