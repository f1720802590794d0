"""A trained policy on its own: ``parl export`` writes it, :func:`load_policy` acts with it.

    parl export runs/ppo_cartpole -o policies/ppo_cartpole      # the run's latest checkpoint

    policy = parl.load_policy("policies/ppo_cartpole")
    actions, _ = policy.predict({"obs": obs_batch})            # [B, 4] in, {"action": [B, 1]} out

An exported policy is a directory: ``policy.json`` (the format version, and for
each task its model and algorithm as the run's config gave them, its input
transforms and its specs) and one ``<task>.safetensors`` per task holding the
algorithm's weights and the input normalizer's statistics. Loading it reads
JSON and safetensors only, so it cannot run code from the files; it imports the
model and algorithm classes the JSON names (parl's own, or the user's, which
must be importable) and builds one :class:`~parl.ComputationTask` per task: no
Manager, no threads, no environment. ``predict`` gives the deterministic
(greedy or mean) actions, the ones evaluations play.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Mapping, Optional, Tuple

import numpy as np
from safetensors.numpy import load_file, save_file

from parl.core.algorithm import Algorithm
from parl.core.model import Model
from parl.experiment.class_spec import resolve_spec
from parl.serving.checkpoint_format import flatten_arrays, unflatten
from parl.serving.computation_task import ComputationTask

POLICY_FILE = "policy.json"
#: The key prefix of the arrays in a policy's safetensors files.
WEIGHTS = "weights"
FORMAT_VERSION = 1

ArrayDict = Dict[str, np.ndarray]


class PolicyError(ValueError):
    """An exported policy that cannot be read: named file, and what is wrong with it."""


def export_policy(
    tasks: Mapping[str, ComputationTask],
    sections: Mapping[str, Mapping[str, object]],
    directory: str,
    about: Optional[Mapping[str, object]] = None,
) -> str:
    """Write ``tasks`` (holding trained weights) as a policy in ``directory`` (made if missing); returns
    the directory.

    Args:
        tasks: task name -> task.
        sections: task name -> ``{"model": ..., "algorithm": ..., "transforms": ...}`` as plain config
            data: the model and algorithm class specs (``{"class": "parl.models.MLPQModel", ...}``, every
            size given) and the task's ``normalize_inputs`` and ``input_clip``.
        about: anything else to record in ``policy.json`` (the run's name and environment, say).
    """
    os.makedirs(directory, exist_ok=True)
    entries = {}
    for name, task in tasks.items():
        flat = flatten_arrays(WEIGHTS, task.algorithm_weights())
        save_file({key: array for key, (_, array) in flat.items()}, os.path.join(directory, f"{name}.safetensors"))
        section = sections[name]
        entries[name] = {
            "model": dict(section["model"]),
            "algorithm": dict(section["algorithm"]),
            "transforms": dict(section["transforms"]),
            "weights": {key: path for key, (path, _) in flat.items()},
            "specs": {
                kind: [[s.name, list(s.shape), s.dtype.name] for s in getattr(task, f"{kind}_specs")]
                for kind in ("input", "state", "action")
            },
        }
    meta = {"format": FORMAT_VERSION, **dict(about or {}), "tasks": entries}
    with open(os.path.join(directory, POLICY_FILE), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, default=_plain)
    return directory


class Policy:
    """A trained robot's tasks, acting deterministically in the caller's thread.

    Attributes:
        tasks: task name -> its ComputationTask.
        meta: what ``policy.json`` holds.
    """

    def __init__(self, tasks: Mapping[str, ComputationTask], meta: Mapping[str, object]) -> None:
        self.tasks = dict(tasks)
        self.meta = dict(meta)

    def predict(
        self,
        inputs: Mapping[str, np.ndarray],
        states: Optional[Mapping[str, np.ndarray]] = None,
        task: Optional[str] = None,
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next recurrent states for a batch of inputs (a batch axis in front).

        Args:
            inputs: input name -> ``[B, ...]`` array.
            states: recurrent states (None: zeros, the start of an episode).
            task: which task acts (None: the only one).

        Raises:
            ValueError: an unknown task, a missing ``task`` when there are several, or inputs that break
                the specs (named).
        """
        chosen = self._task(task)
        batch = {k: np.asarray(v) for k, v in inputs.items()}
        for spec in chosen.input_specs:
            value = batch.get(spec.name)
            if value is None or value.shape[1:] != spec.shape:
                got = None if value is None else list(value.shape)
                raise ValueError(
                    f"input {spec.name!r}: expected shape [B, {', '.join(map(str, spec.shape))}], got {got}"
                )
            batch[spec.name] = value.astype(spec.dtype, copy=False)
        size = len(next(iter(batch.values()))) if batch else 1
        states = chosen.initial_states(size) if states is None else {k: np.asarray(v) for k, v in states.items()}
        return chosen.predict(batch, states, deterministic=True)

    def _task(self, name: Optional[str]) -> ComputationTask:
        if name is None:
            if len(self.tasks) != 1:
                raise ValueError(f"the policy has tasks {sorted(self.tasks)}: say which one acts (task=...)")
            return next(iter(self.tasks.values()))
        if name not in self.tasks:
            raise ValueError(f"no task {name!r}; tasks are {sorted(self.tasks)}")
        return self.tasks[name]


def load_policy(directory: str) -> Policy:
    """The policy ``parl export`` wrote in ``directory``.

    Raises:
        PolicyError: a missing or malformed file, another format version, or weights that do not fit
            the model (one line naming the file).
    """
    path = os.path.join(directory, POLICY_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError) as exc:
        raise PolicyError(f"{path}: cannot read the policy ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        got = meta.get("format") if isinstance(meta, dict) else meta
        raise PolicyError(f"{path}: format {got!r}, this parl reads format {FORMAT_VERSION}")
    tasks = {}
    for name, entry in meta["tasks"].items():
        model = resolve_spec(entry["model"], f"{POLICY_FILE}: tasks.{name}.model", base=Model)
        algorithm = resolve_spec(
            entry["algorithm"], f"{POLICY_FILE}: tasks.{name}.algorithm", base=Algorithm, filled=("model_func",)
        )
        transforms = entry["transforms"]
        task = ComputationTask(
            name,
            algorithm.build(args=(model.build,)),
            normalize_inputs=transforms["normalize_inputs"],
            input_clip=transforms["input_clip"],
        )
        weights_path = os.path.join(directory, f"{name}.safetensors")
        try:
            arrays = load_file(weights_path)
            task.set_algorithm_weights(unflatten([(path, arrays[key]) for key, path in entry["weights"].items()]))
        except Exception as exc:  # noqa: BLE001 - any unreadable or misfitting file is one line
            raise PolicyError(f"{weights_path}: {type(exc).__name__}: {exc}") from None
        tasks[name] = task
    return Policy(tasks, meta)


def _plain(value: object) -> object:
    """JSON for what ``json`` does not know (tuples are lists already; numpy scalars and arrays)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to {POLICY_FILE}")
