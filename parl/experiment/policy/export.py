"""A trained policy on its own: ``parl export`` writes it, :func:`load_policy` acts with it.

    parl export runs/ppo_cartpole -o policies/ppo_cartpole      # the run's latest checkpoint

    policy = parl.load_policy("policies/ppo_cartpole")
    actions, _ = policy.predict({"obs": obs_batch})            # [B, 4] in, {"action": [B, 1]} out
    actions, _ = policy.predict(obs)                            # one [4] observation: {"action": [1]}

An exported policy is a directory: ``policy.json`` (the format version, and for
each task its model and algorithm as the run's config gave them, its input
transforms and its specs) and one ``<task>.safetensors`` per task holding the
algorithm's weights and the input normalizer's statistics, whose size and
SHA-256 ``policy.json`` records. Loading it reads JSON and safetensors only, so
it cannot run code from the files; it checks them as checkpoints are checked
(:func:`load_policy` says how), imports the model and algorithm classes the JSON
names (parl's own, an installed package's, or from the caller's
``python_path``; never from the working or the policy directory) and builds one
:class:`~parl.ComputationTask` per task: no Manager, no threads, no environment. ``predict`` gives the deterministic
(greedy or mean) actions, the ones evaluations play.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
from safetensors.numpy import load, save

from parl.core.algorithm import Algorithm
from parl.core.model import Model, named_models
from parl.experiment.config.class_spec import ConfigError, UserExitError, resolve_spec
from parl.experiment.policy.import_guard import check_importable, guarded_imports
from parl.experiment.policy.policy_inputs import Observation, policy_batch, with_batch_axis, without_batch_axis
from parl.serving.checkpoint_format import TASK_NAME, array_problem, flatten_arrays, is_array_path, unflatten
from parl.serving.computation_task import NORMALIZER_KEY, ComputationTask
from parl.serving.safe_files import FileCheckError, read_regular_file, replace_file

POLICY_FILE = "policy.json"
#: The key prefix of the arrays in a policy's safetensors files.
WEIGHTS = "weights"
WEIGHTS_SUFFIX = ".safetensors"
#: Format 2 records each weights file's size and SHA-256; format 1 (read with a warning) did not.
FORMAT_VERSION = 2
READ_FORMATS = (1, 2)
#: The largest ``policy.json`` read (it holds class specs and names, never arrays).
MAX_POLICY_FILE_BYTES = 16 << 20
#: The largest weights file :func:`load_policy` reads unless told otherwise.
MAX_WEIGHTS_BYTES = 4 << 30

ArrayDict = Dict[str, np.ndarray]


class PolicyError(ValueError):
    """An exported policy that cannot be read: named file, and what is wrong with it."""


def export_policy(
    tasks: Mapping[str, ComputationTask],
    sections: Mapping[str, Mapping[str, Any]],
    directory: str,
    about: Optional[Mapping[str, object]] = None,
) -> str:
    """Write ``tasks`` (holding trained weights) as a policy in ``directory`` (made if missing); returns
    the directory. Each file is written beside its target and renamed over it: a link planted in
    ``directory`` is replaced, never written through.

    Args:
        tasks: task name -> task.
        sections: task name -> ``{"model": ..., "algorithm": ..., "transforms": ...}`` as plain config
            data: the model and algorithm class specs (``{"class": "parl.models.MLPQModel", ...}``, every
            size given) and the task's ``normalize_inputs`` and ``input_clip``.
        about: anything else to record in ``policy.json`` (the run's name and environment, say).

    Raises:
        ValueError: a task name that is not a plain file name.
    """
    os.makedirs(directory, exist_ok=True)
    entries = {}
    for name, task in tasks.items():
        if not isinstance(name, str) or not TASK_NAME.fullmatch(name):
            raise ValueError(f"task name {name!r} cannot name a policy file: letters, digits, '_', '.' and '-' only")
        flat = flatten_arrays(WEIGHTS, task.algorithm_weights())
        data = save({key: array for key, (_, array) in flat.items()})
        replace_file(os.path.join(directory, f"{name}{WEIGHTS_SUFFIX}"), data)
        section = sections[name]
        entries[name] = {
            "model": dict(section["model"]),
            "algorithm": dict(section["algorithm"]),
            "transforms": dict(section["transforms"]),
            "weights": {key: path for key, (path, _) in flat.items()},
            "weights_bytes": len(data),
            "weights_sha256": hashlib.sha256(data).hexdigest(),
            "specs": {
                kind: [[s.name, list(s.shape), s.dtype.name] for s in getattr(task, f"{kind}_specs")]
                for kind in ("input", "state", "action")
            },
        }
    meta = {"format": FORMAT_VERSION, **dict(about or {}), "tasks": entries}
    text = json.dumps(meta, indent=2, default=_plain)
    replace_file(os.path.join(directory, POLICY_FILE), text.encode("utf-8"))
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
        obs: Observation,
        states: Optional[Mapping[str, np.ndarray]] = None,
        task: Optional[str] = None,
    ) -> Tuple[ArrayDict, ArrayDict]:
        """The deterministic actions and next recurrent states for ``obs``, as the environment gives it.

        ``obs`` is a bare array (a policy of one input) or a mapping of input name -> array (a
        gymnasium ``Dict`` observation is one input per key, of the same name; a Box observation's
        input is ``"obs"``), each either one sample (the input spec's shape) or a batch (a batch axis
        in front), all alike. A batch gives input name -> ``[B, ...]`` actions and states; one sample
        gives them without the batch axis, and takes ``states`` so too (as the last call returned them).

        Args:
            obs: one sample or a batch of observations.
            states: recurrent states (None: zeros, the start of an episode).
            task: which task acts (None: the only one).

        Raises:
            ValueError: an unknown task, a missing ``task`` when there are several, a bare array for a
                policy of several inputs, or inputs that break the specs (naming the input, the shape
                expected and the one given).
        """
        chosen = self._task(task)
        batch, single = policy_batch(chosen.input_specs, obs)
        if states is None:
            given = chosen.initial_states(len(next(iter(batch.values()))) if batch else 1)
        elif single:
            given = with_batch_axis(chosen.state_specs, states, "state")
        else:
            given = {k: np.asarray(v) for k, v in states.items()}
        actions, next_states = chosen.predict(batch, given, deterministic=True)
        if single:
            return without_batch_axis(actions), without_batch_axis(next_states)
        return actions, next_states

    def _task(self, name: Optional[str]) -> ComputationTask:
        if name is None:
            if len(self.tasks) != 1:
                raise ValueError(f"the policy has tasks {sorted(self.tasks)}: say which one acts (task=...)")
            return next(iter(self.tasks.values()))
        if name not in self.tasks:
            raise ValueError(f"no task {name!r}; tasks are {sorted(self.tasks)}")
        return self.tasks[name]


def load_policy(directory: str, python_path: Sequence[str] = (), max_weights_bytes: int = MAX_WEIGHTS_BYTES) -> Policy:
    """The policy ``parl export`` wrote in ``directory``, checked as a checkpoint is.

    Every file must be a regular file (no link, FIFO or device) within its size limit; the weights
    files must match the sizes and SHA-256 hashes ``policy.json`` records; task names must be plain
    file names; every weight must be finite and of plausible size, the normalizer's statistics valid,
    and every model must get weights. The classes ``policy.json`` names are imported with neither the
    working directory nor ``directory`` on the module path (a module planted there is never run),
    only from ``python_path`` (listed first) and installed packages; a standard-library module is
    refused before it is imported.

    Args:
        python_path: directories to import the policy's own model or algorithm classes from.
        max_weights_bytes: the largest weights file read.

    Raises:
        PolicyError: one line naming the file and what is wrong with it.
    """
    path = os.path.join(directory, POLICY_FILE)
    try:
        meta = json.loads(read_regular_file(path, MAX_POLICY_FILE_BYTES, "policy file").decode("utf-8"))
    except FileCheckError as exc:
        raise PolicyError(str(exc)) from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested beyond the parser
        raise PolicyError(f"{path}: cannot read the policy ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") not in READ_FORMATS:
        got = meta.get("format") if isinstance(meta, dict) else meta
        raise PolicyError(f"{path}: format {got!r}, this parl reads formats {list(READ_FORMATS)}")
    entries = meta.get("tasks")
    if not isinstance(entries, dict) or not entries:
        raise PolicyError(f"{path}: 'tasks' must map task names to their entries, got {entries!r}")
    if meta["format"] < FORMAT_VERSION:
        warnings.warn(
            f"{path}: policy format {meta['format']} records no hashes, so its weights files are not "
            f"checked for damage; export it again to get format {FORMAT_VERSION}",
            UserWarning,
            stacklevel=2,
        )
    tasks = {}
    with guarded_imports(python_path, refused=[directory]):
        for name, entry in entries.items():
            tasks[name] = _load_task(directory, path, name, entry, max_weights_bytes)
    return Policy(tasks, meta)


def _load_task(directory: str, path: str, name: object, entry: object, max_bytes: int) -> ComputationTask:
    where = f"{path}: tasks.{name}"
    if not isinstance(name, str) or not TASK_NAME.fullmatch(name):
        raise PolicyError(f"{path}: task name {name!r} is not a plain file name")
    if not isinstance(entry, dict) or not isinstance(entry.get("weights"), dict):
        raise PolicyError(f"{where}: expected a mapping with 'model', 'algorithm', 'transforms' and 'weights'")
    try:
        for part in ("model", "algorithm"):
            spec = entry.get(part)
            check_importable(spec.get("class") if isinstance(spec, dict) else None, f"{where}.{part}.class")
        model = resolve_spec(entry.get("model"), f"{POLICY_FILE}: tasks.{name}.model", base=Model)
        algorithm = resolve_spec(
            entry.get("algorithm"), f"{POLICY_FILE}: tasks.{name}.algorithm", base=Algorithm, filled=("model_func",)
        )
        transforms = entry.get("transforms")
        if not isinstance(transforms, dict):
            raise ConfigError(f"{where}.transforms: expected a mapping, got {transforms!r}")
        task = ComputationTask(
            name,
            algorithm.build(args=(model.build,)),
            normalize_inputs=transforms.get("normalize_inputs", False),
            input_clip=transforms.get("input_clip", 10.0),
        )
    except (ConfigError, UserExitError) as exc:
        raise PolicyError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a model or algorithm refusing its arguments is one line
        raise PolicyError(f"{where}: cannot build the task: {type(exc).__name__}: {exc}") from None
    weights_path = os.path.join(directory, f"{name}{WEIGHTS_SUFFIX}")
    try:
        data = read_regular_file(weights_path, max_bytes, "policy weights file")
    except FileCheckError as exc:
        raise PolicyError(str(exc)) from None
    if "weights_sha256" in entry or "weights_bytes" in entry:
        if len(data) != entry.get("weights_bytes") or hashlib.sha256(data).hexdigest() != entry.get("weights_sha256"):
            raise PolicyError(f"{weights_path}: size or SHA-256 differs from {POLICY_FILE}'s (changed or damaged)")
    try:
        arrays = load(data)
    except Exception as exc:  # noqa: BLE001 - the parser's error types differ by version
        raise PolicyError(f"{weights_path}: not a safetensors file ({type(exc).__name__})") from None
    manifest = entry["weights"]
    if set(arrays) != set(manifest):
        extra, missing = sorted(set(arrays) - set(manifest)), sorted(set(manifest) - set(arrays))
        raise PolicyError(f"{weights_path}: arrays {extra} not in {POLICY_FILE}, its entries {missing} absent")
    pairs = []
    for key, keys in manifest.items():
        if not is_array_path(keys):
            raise PolicyError(f"{where}.weights: entry {key!r} must be a list of names, got {keys!r}")
        problem = array_problem(key, arrays[key], weight=keys[0] != NORMALIZER_KEY)
        if problem is not None:
            raise PolicyError(f"{weights_path}: {problem}")
        pairs.append((keys, arrays[key]))
    try:
        task.set_algorithm_weights(unflatten(pairs))
    except Exception as exc:  # noqa: BLE001 - any misfitting file is one line
        raise PolicyError(f"{weights_path}: {type(exc).__name__}: {exc}") from None
    empty = [
        attr
        for attr, model in named_models(task.algorithm)
        if not any(layer.built for _, layer in model.named_layers())
    ]
    if empty:
        raise PolicyError(f"{weights_path}: holds no weights for models {empty}; they would act with fresh ones")
    return task


def _plain(value: object) -> object:
    """JSON for what ``json`` does not know (tuples are lists already; numpy scalars and arrays)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to {POLICY_FILE}")
