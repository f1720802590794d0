"""The on-disk format of one task's checkpoint: safetensors arrays plus JSON metadata, and whether
a checkpoint fits the task it is loaded into.

    write_task_checkpoint("ckpt/RL.json", *task_contents(target, steps, optimizer_state))
    metadata, arrays = read_task_checkpoint("ckpt/RL.json")    # verified, or CheckpointError
    check_task_checkpoint(TaskCheckpoint("ckpt/RL.json", metadata, arrays), target)  # or CheckpointError

``<name>.safetensors`` holds every array (weights, optimizer state, normalizer
statistics, algorithm arrays) under keys ``<section>/<path>``; ``<name>.json``
(the path given) holds the metadata, the manifest of the arrays (section, path,
shape, dtype), the SHA-256 of the arrays file and a SHA-256 of the metadata
itself. Neither file is ever unpickled: reading can not run code. Reading refuses
a file that is a link, a FIFO or a device, or larger than its bound (the arrays
file: what its manifest declares), before reading it; then checks the checksums,
every manifest entry, every array against the manifest, and that every float
array is finite; model weights must also stay within :data:`MAX_ABS_WEIGHT`.
:func:`check_task_checkpoint` then checks the checkpoint against its task (a
:class:`CheckpointTarget`): algorithm, specs, models, weights, optimizer state and
normalizer, so that :class:`~parl.ComputationTask` restores only what fits it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import paddle
import safetensors.numpy

from parl.core.algorithm import Algorithm
from parl.core.model import Model, named_models
from parl.core.task_specs import TaskSpecs
from parl.layers.optimizer import Optimizer, OptimizerStateError
from parl.serving.safe_files import FileCheckError, read_regular_file, replace_file
from parl.serving.transforms import InputNormalizer
from parl.validation import short_repr

if TYPE_CHECKING:
    from typing import TypeGuard  # Python 3.10+; annotations only

#: ``format`` of the metadata file.
FORMAT_NAME = "parl-task-checkpoint"
#: Version of the format written and read (version 1 was a pickle file, refused).
FORMAT_VERSION = 2
#: Suffix of the arrays file, which replaces the metadata path's extension.
ARRAYS_SUFFIX = ".safetensors"
#: A task name as files are named after it: no path separators, no leading dot.
TASK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
#: A model weight whose magnitude exceeds this is refused as damaged.
MAX_ABS_WEIGHT = 1e10
#: Array sections of the arrays file.
SECTIONS = ("weights", "optimizer", "normalizer", "algorithm")
#: The names in an array's path, by section: ``weights/<model>/<layer>.<suffix>``,
#: ``normalizer/<input>/<statistic>``, ``algorithm/<key>``; optimizer state nests as its optimizer does.
SECTION_DEPTHS: Dict[str, Optional[int]] = {"weights": 2, "optimizer": None, "normalizer": 2, "algorithm": 1}
#: The largest metadata file read (the manifest of a model of thousands of layers takes a few MiB).
MAX_METADATA_BYTES = 64 << 20
#: Bytes allowed for the safetensors header of an arrays file besides 256 per array and its name.
HEADER_ALLOWANCE = 64 << 10

_PICKLE_MAGIC = b"\x80"
_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"}


class CheckpointError(ValueError):
    """A checkpoint file that is missing, damaged, of another format, or does not fit the task;
    the message is one line naming the file and what is wrong."""


def arrays_path(path: str) -> str:
    """The arrays file that goes with metadata file ``path``."""
    return os.path.splitext(path)[0] + ARRAYS_SUFFIX


def flatten_arrays(section: str, tree: Mapping[str, object]) -> Dict[str, Tuple[List[str], np.ndarray]]:
    """``{"<section>/<k1>/<k2>": ([k1, k2], array)}`` for the leaves of nested dict ``tree``."""
    out: Dict[str, Tuple[List[str], np.ndarray]] = {}

    def walk(prefix: List[str], node: Mapping[str, object]) -> None:
        for key, value in node.items():
            if not isinstance(key, str):
                raise ValueError(f"{section} state key {key!r} is not a string")
            if isinstance(value, Mapping):
                walk(prefix + [key], value)
            else:
                path = prefix + [key]
                array = np.asarray(value)
                if not array.flags.c_contiguous:  # np.ascontiguousarray would make 0-d arrays 1-d
                    array = array.copy(order="C")
                out["/".join([section, *path])] = (path, array)

    walk([], tree)
    return out


def is_array_path(path: object) -> TypeGuard[List[str]]:
    """Whether ``path`` can name an array in a tree of arrays: a list of one or more strings."""
    return isinstance(path, list) and bool(path) and all(isinstance(name, str) for name in path)


def unflatten(entries: List[Tuple[List[str], np.ndarray]]) -> Dict[str, Any]:
    """Inverse of :func:`flatten_arrays` for the entries of one section.

    Raises:
        ValueError: a path is not a list of one or more strings, or two paths collide (one names an
            array the other runs through, or both name the same array).
    """
    tree: Dict[str, object] = {}
    for path, value in entries:
        if not is_array_path(path):
            raise ValueError(f"array path {short_repr(path)} is not a list of one or more names")
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})  # type: ignore[assignment]
            if not isinstance(node, dict):
                raise ValueError(f"array path {short_repr(path)} runs through another array")
        if path[-1] in node:
            raise ValueError(f"array path {short_repr(path)} names another array or a group of arrays")
        node[path[-1]] = value
    return tree


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _metadata_checksum(metadata: Mapping[str, object]) -> str:
    body = {k: v for k, v in metadata.items() if k != "checksum"}
    return _sha256(json.dumps(body, sort_keys=True, allow_nan=True).encode())


def write_task_checkpoint(
    path: str, metadata: Mapping[str, object], sections: Mapping[str, Mapping[str, object]]
) -> None:
    """Write the arrays of ``sections`` (section name -> nested dict of arrays) and ``metadata``
    (JSON values) as one task checkpoint; the metadata file ``path`` is replaced last.

    Raises:
        ValueError: ``path`` ends in ``.safetensors``, a section is unknown, or an array's dtype
            is not a plain number or bool type.
        OSError: a file could not be written (the previous files at ``path`` stay as they were).
    """
    if path.endswith(ARRAYS_SUFFIX):
        raise ValueError(f"a task checkpoint path must not end in {ARRAYS_SUFFIX!r}: {path}")
    flat: Dict[str, Tuple[List[str], np.ndarray]] = {}
    for section, tree in sections.items():
        if section not in SECTIONS:
            raise ValueError(f"unknown checkpoint section {section!r}; sections are {list(SECTIONS)}")
        flat.update(flatten_arrays(section, tree))
    manifest = {}
    for key, (sub_path, array) in flat.items():
        if array.dtype.name not in _DTYPES:
            raise ValueError(f"checkpoint array {key!r} has dtype {array.dtype}, expected one of {sorted(_DTYPES)}")
        manifest[key] = {
            "section": key.split("/", 1)[0],
            "path": sub_path,
            "shape": list(array.shape),
            "dtype": array.dtype.name,
        }
    data = safetensors.numpy.save({key: array for key, (_, array) in flat.items()})
    files = os.path.basename(arrays_path(path))
    full = {
        **metadata,
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "arrays_file": files,
        "arrays_sha256": _sha256(data),
        "arrays": manifest,
    }
    full["checksum"] = _metadata_checksum(full)
    text = json.dumps(full, indent=1, sort_keys=True, allow_nan=True).encode()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    replace_file(arrays_path(path), data)
    replace_file(path, text)


def array_problem(key: str, array: np.ndarray, weight: bool) -> Optional[str]:
    """What is wrong with the stored array ``key``, in a few words (None when nothing is): a dtype
    parl never writes, NaN or infinite values, or for a model weight (``weight``) a magnitude beyond
    :data:`MAX_ABS_WEIGHT`. Checkpoints and exported policies are checked alike."""
    if array.dtype.name not in _DTYPES:
        return f"array {key!r} has dtype {array.dtype.name}"
    if array.dtype.kind == "f" and array.size:
        if not np.all(np.isfinite(array)):
            return f"array {key!r} holds NaN or infinite values"
        largest = float(np.max(np.abs(array)))
        if weight and largest > MAX_ABS_WEIGHT:
            return f"weight {key!r} holds {largest:.3g}, beyond the plausible {MAX_ABS_WEIGHT:g}"
    return None


def read_task_checkpoint(
    path: str, expected_sha256: Optional[Mapping[str, str]] = None, recorded_in: str = "the record"
) -> Tuple[Dict[str, Any], Dict[str, Dict[str, Any]]]:
    """The metadata and the arrays by section (nested dicts) of the task checkpoint at ``path``,
    verified as the module docstring says.

    Each file must be a regular file (no link, FIFO or device) and is read once, within a bound: the
    metadata :data:`MAX_METADATA_BYTES`, the arrays file what its manifest declares
    (:func:`arrays_bytes_bound`); a larger one is refused before it is read.

    Args:
        expected_sha256: the SHA-256 of the files by file name (``<task>.json`` and
            ``<task>.safetensors``), as a robot's checkpoint records them; each file is compared as
            it is read (a name missing here fails).
        recorded_in: where ``expected_sha256`` comes from, for messages.

    Raises:
        CheckpointError: the files are missing, not regular files, too large, of the old pickle
            format, damaged, or inconsistent.
    """
    raw = _read_file(path, MAX_METADATA_BYTES, "checkpoint metadata", expected_sha256, recorded_in)
    if raw.startswith(_PICKLE_MAGIC):
        raise CheckpointError(
            f"{path} is not a parl checkpoint this version reads: a pickle file (the format before version "
            f"{FORMAT_VERSION}), which parl no "
            "longer reads because unpickling can run code; retrain, or convert it as docs/checkpoints.md describes"
        )
    try:
        metadata = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, nested beyond the parser
        raise CheckpointError(
            f"{path} is not a parl checkpoint (its metadata is not JSON; truncated or damaged?)"
        ) from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT_NAME:
        raise CheckpointError(f"{path} is not a parl task checkpoint (no format {FORMAT_NAME!r})")
    if metadata.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {short_repr(metadata.get('version'))}, "
            f"this parl reads {FORMAT_VERSION}"
        )
    if metadata.get("checksum") != _metadata_checksum(metadata):
        raise CheckpointError(f"{path}: metadata checksum mismatch (the file was changed or damaged)")
    manifest = metadata.get("arrays")
    if not isinstance(manifest, dict):
        raise CheckpointError(f"{path}: metadata has no array manifest")
    for key, entry in manifest.items():
        problem = manifest_entry_problem(key, entry)
        if problem is not None:
            raise CheckpointError(f"{path}: manifest entry {short_repr(key)}: {problem}")
    data_path = os.path.join(os.path.dirname(os.path.abspath(path)), str(metadata.get("arrays_file")))
    if os.path.basename(data_path) != os.path.basename(arrays_path(path)):
        raise CheckpointError(
            f"{path}: names arrays file {short_repr(metadata.get('arrays_file'))}, expected {arrays_path(path)}"
        )
    data = _read_file(data_path, arrays_bytes_bound(manifest), "checkpoint arrays file", expected_sha256, recorded_in)
    if _sha256(data) != metadata.get("arrays_sha256"):
        raise CheckpointError(f"{data_path}: SHA-256 mismatch (truncated, changed or damaged)")
    try:
        arrays = safetensors.numpy.load(data)
    except Exception as exc:  # the parser's own error types differ by version
        raise CheckpointError(f"{data_path}: not a safetensors file ({type(exc).__name__})") from None
    if set(arrays) != set(manifest):
        extra, missing = sorted(set(arrays) - set(manifest)), sorted(set(manifest) - set(arrays))
        raise CheckpointError(f"{data_path}: arrays {extra} not in the manifest, manifest entries {missing} absent")
    sections: Dict[str, List[Tuple[List[str], np.ndarray]]] = {s: [] for s in SECTIONS}
    for key, entry in sorted(manifest.items()):
        array = arrays[key]
        if list(array.shape) != entry["shape"] or array.dtype.name != entry["dtype"]:
            raise CheckpointError(
                f"{data_path}: array {key!r} is {array.dtype.name}{list(array.shape)}, "
                f"the manifest says {entry['dtype']}{entry['shape']}"
            )
        problem = array_problem(key, array, weight=entry["section"] == "weights")
        if problem is not None:
            raise CheckpointError(f"{data_path}: {problem}")
        sections[entry["section"]].append((entry["path"], array))
    try:
        return metadata, {name: unflatten(entries) for name, entries in sections.items()}
    except ValueError as exc:
        raise CheckpointError(f"{path}: manifest {exc}") from None


def manifest_entry_problem(key: object, entry: object) -> Optional[str]:
    """What is wrong with the manifest entry ``entry`` of array ``key``, in a few words (None when
    nothing is): it must be a mapping of ``section`` (one of :data:`SECTIONS`), ``path`` (a list of
    :data:`SECTION_DEPTHS` names that, joined to the section by ``/``, make ``key``), ``shape`` (a list
    of sizes >= 0) and ``dtype`` (a number or bool type)."""
    if not isinstance(entry, dict):
        return f"is {type(entry).__name__}, not a mapping"
    section, path, shape, dtype = (entry.get(field) for field in ("section", "path", "shape", "dtype"))
    if not isinstance(section, str) or section not in SECTIONS:
        return f"section {short_repr(section)} is not one of {list(SECTIONS)}"
    if not is_array_path(path):
        return f"path {short_repr(path)} is not a list of one or more names"
    depth = SECTION_DEPTHS[section]
    if depth is not None and len(path) != depth:
        return f"path {short_repr(path)} has {len(path)} names, a {section} array has {depth}"
    if key != "/".join([section, *path]):
        return f"section {section!r} and path {short_repr(path)} name another array"
    if not isinstance(shape, list) or not all(_is_size(n) for n in shape):
        return f"shape {short_repr(shape)} is not a list of sizes >= 0"
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        return f"dtype {short_repr(dtype)} is not one of {sorted(_DTYPES)}"
    return None


def arrays_bytes_bound(manifest: Mapping[str, Mapping[str, object]]) -> int:
    """The most bytes the arrays file of checked ``manifest`` (:func:`manifest_entry_problem`) can take:
    the arrays' own bytes plus a generous allowance for the safetensors header."""
    total = HEADER_ALLOWANCE
    for key, entry in manifest.items():
        shape = list(entry["shape"])  # type: ignore[call-overload]
        total += math.prod(shape) * np.dtype(str(entry["dtype"])).itemsize
        total += 256 + 6 * len(key) + 24 * len(shape)  # a name's character takes at most 6 bytes in JSON
    return total


def _is_size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read_file(
    path: str, max_bytes: int, what: str, expected_sha256: Optional[Mapping[str, str]], recorded_in: str
) -> bytes:
    """The bytes of regular file ``path`` (at most ``max_bytes``), compared with
    ``expected_sha256[<its name>]`` when given."""
    try:
        data = read_regular_file(path, max_bytes, what)
    except FileCheckError as exc:
        raise CheckpointError(str(exc)) from None
    if expected_sha256 is not None and _sha256(data) != expected_sha256.get(os.path.basename(path)):
        raise CheckpointError(f"{path}: SHA-256 differs from {recorded_in}'s (changed or damaged)")
    return data


# -- a task's checkpoint: what it holds, and whether it fits the task -----------------------------


@dataclass(frozen=True)
class CheckpointTarget:
    """The task a checkpoint is written from or read into, as the checks see it.

    Attributes:
        task: the task's name (in messages and in the metadata).
        algorithm: its algorithm (models, parameters, optimizer kind, state).
        specs: its specs, which a checkpoint must match exactly.
        normalizer: its input normalizer (None: it normalizes no inputs).
        optimizer: its optimizer once made (at the first update); None before.
    """

    task: str
    algorithm: Algorithm
    specs: TaskSpecs
    normalizer: Optional[InputNormalizer]
    optimizer: Optional[Optimizer]


class TaskCheckpoint:
    """A task checkpoint read and verified against a task (:func:`check_task_checkpoint`).

    Attributes:
        path: the metadata file it was read from.
        metadata: its JSON metadata.
        sections: its arrays as nested dicts, by section (weights, optimizer, normalizer, algorithm).
    """

    def __init__(self, path: str, metadata: Dict[str, Any], sections: Dict[str, Dict[str, Any]]) -> None:
        self.path = path
        self.metadata = metadata
        self.sections = sections


def task_contents(
    target: CheckpointTarget, update_steps: int, optimizer_state: Optional[Mapping[str, object]]
) -> Tuple[Dict[str, object], Dict[str, Dict[str, object]]]:
    """The metadata and the array sections of a checkpoint of ``target`` now (read them while the
    task is still: under its locks), for :func:`write_task_checkpoint`. ``optimizer_state`` is keyed
    by structure (:func:`to_structural`); None: the task has no optimizer state yet.

    Raises:
        ValueError: the algorithm's state is not JSON scalars and numpy arrays.
    """
    scalars, arrays = split_algorithm_state(target.algorithm)
    weights = {attr: model.get_weights() for attr, model in named_models(target.algorithm)}
    sections: Dict[str, Dict[str, object]] = {
        "weights": weights,  # type: ignore[dict-item]
        "optimizer": dict(optimizer_state or {}),
        "normalizer": target.normalizer.state_dict() if target.normalizer is not None else {},  # type: ignore[dict-item]
        "algorithm": arrays,  # type: ignore[dict-item]
    }
    metadata = {
        "task": target.task,
        "algorithm": type(target.algorithm).__name__,
        "models": sorted(weights),  # a model with no built layer has no array
        "specs": spec_lists(target.specs),
        "update_steps": update_steps,
        "has_optimizer": optimizer_state is not None,
        "has_normalizer": target.normalizer is not None,
        "algorithm_state": scalars,
    }
    return metadata, sections


def spec_lists(specs: TaskSpecs) -> Dict[str, List[list]]:
    """``specs`` as the metadata records them: ``[name, shape, dtype]`` per spec, by group."""
    groups = {"inputs": specs.inputs, "states": specs.states, "actions": specs.actions, "rewards": specs.rewards}
    return {group: [[s.name, list(s.shape), s.dtype.name] for s in listed] for group, listed in groups.items()}


def split_algorithm_state(algorithm: Algorithm) -> Tuple[Dict[str, object], Dict[str, np.ndarray]]:
    """The algorithm's :meth:`~parl.Algorithm.state` as (JSON scalars, numpy arrays).

    Raises:
        ValueError: the state is not a dict of string keys to JSON scalars and numpy arrays.
    """
    state = algorithm.state()
    if not isinstance(state, Mapping):
        raise ValueError(f"{type(algorithm).__name__}.state() must return a dict, got {type(state).__name__}")
    scalars: Dict[str, object] = {}
    arrays: Dict[str, np.ndarray] = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise ValueError(f"{type(algorithm).__name__}.state() key {key!r} is not a string")
        if isinstance(value, np.ndarray):
            arrays[key] = value
        elif isinstance(value, np.generic):
            scalars[key] = value.item()
        elif value is None or isinstance(value, (bool, int, float, str)):
            scalars[key] = value
        else:
            raise ValueError(
                f"{type(algorithm).__name__}.state()[{key!r}] must be a JSON scalar or numpy array, "
                f"got {type(value).__name__}"
            )
    return scalars, arrays


# Optimizer state is keyed by generated parameter names, which differ between processes;
# checkpoints key it by model structure instead (``<model>/<layer path>.<suffix>``).
def structural_names(algorithm: Algorithm) -> List[Tuple[str, str]]:
    """(generated parameter name, structural name) for every parameter of the algorithm's models."""
    pairs = []
    for attr, model in named_models(algorithm):
        for path, layer in model.named_layers():
            for suffix, param in layer.params.items():
                pairs.append((param.name, f"{attr}/{path}.{suffix}"))
    return pairs


def to_structural(state: Mapping[str, object], algorithm: Algorithm) -> dict:
    """Optimizer ``state`` keyed by generated names, keyed by structure instead (tensors as numpy)."""
    return _rename(state, structural_names(algorithm))


def from_structural(state: Mapping[str, object], algorithm: Algorithm) -> dict:
    """Inverse of :func:`to_structural`, for this process's parameter names."""
    return _rename(state, [(b, a) for a, b in structural_names(algorithm)])


def _rename(state: Mapping[str, object], pairs: List[Tuple[str, str]]) -> dict:
    # Longest names first, so "fc_1.w" never claims the state of "fc_1.w_x".
    pairs = sorted(pairs, key=lambda p: -len(p[0]))
    return _rename_sorted(state, pairs)


def _rename_sorted(state: Mapping[str, object], pairs: List[Tuple[str, str]]) -> dict:
    out = {}
    for key, value in state.items():
        for old, new in pairs:
            if key == old or key.startswith(old + "_"):
                key = new + key[len(old) :]
                break
        if isinstance(value, paddle.Tensor):
            value = value.numpy()
        elif isinstance(value, dict):
            value = _rename_sorted(value, pairs)
        out[key] = value
    return out


def check_model_names(weights: Mapping[str, object], algorithm: Algorithm, task: str, source: str) -> None:
    """``weights`` holds a model for each model of ``algorithm`` and no other.

    Raises:
        ValueError: naming ``source``, the models it holds and those of task ``task``'s algorithm.
    """
    models = dict(named_models(algorithm))
    if set(weights) != set(models):
        raise ValueError(
            f"{source}: holds models {sorted(weights)}, the algorithm of task {task!r} has {sorted(models)}"
        )


def check_task_checkpoint(checkpoint: TaskCheckpoint, target: CheckpointTarget) -> None:
    """Whether ``checkpoint`` (read by :func:`read_task_checkpoint`) can be restored into ``target``:
    its algorithm class, specs, models, weight shapes, the weights of every trained parameter (once
    the task has trained), its optimizer state and its normalizer settings and statistics. Models the
    metadata lists with no arrays get an empty weights entry.

    Raises:
        CheckpointError: one line naming the file and what does not fit.
    """
    path, meta, sections = checkpoint.path, checkpoint.metadata, checkpoint.sections
    algorithm = type(target.algorithm).__name__
    if meta.get("algorithm") != algorithm:
        raise CheckpointError(
            f"{path} holds a {meta.get('algorithm')!r} algorithm, task {target.task!r} has {algorithm!r}"
        )
    saved_specs = meta.get("specs")
    if not isinstance(saved_specs, dict):
        raise CheckpointError(f"{path}: metadata has no specs")
    for group, expected in spec_lists(target.specs).items():
        if saved_specs.get(group) != expected:
            raise CheckpointError(
                f"{path}: {group} specs {saved_specs.get(group)} differ from task {target.task!r}'s {expected}"
            )
    models = meta.get("models")
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        raise CheckpointError(f"{path}: metadata has no list of models")
    for model in models:
        sections["weights"].setdefault(model, {})
    steps = meta.get("update_steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise CheckpointError(f"{path}: update_steps must be an int >= 0, got {steps!r}")
    if not isinstance(meta.get("algorithm_state"), dict) or not isinstance(meta.get("has_optimizer"), bool):
        raise CheckpointError(f"{path}: metadata lacks algorithm_state or has_optimizer")
    normalizer = target.normalizer
    if meta.get("has_normalizer") != (normalizer is not None):
        has = "has" if meta.get("has_normalizer") else "has no"
        raise CheckpointError(
            f"{path} {has} input normalizer statistics, but task {target.task!r} "
            f"{'does not normalize' if normalizer is None else 'normalizes'} inputs"
        )
    try:
        if normalizer is not None:
            _check_normalizer_arrays(normalizer.state_dict(), sections["normalizer"])
            normalizer.check_state_dict(sections["normalizer"])  # values: no negative variance or count
        _check_weights(sections["weights"], target)
        if steps > 0 or meta["has_optimizer"]:
            _check_trained_weights(sections["weights"], steps, target.algorithm)
        if meta["has_optimizer"]:
            _check_optimizer_state(sections["weights"], sections["optimizer"], target)
        elif sections["optimizer"]:
            raise ValueError("holds optimizer state, but its metadata says has_optimizer is false")
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def _check_weights(weights: Mapping[str, object], target: CheckpointTarget) -> None:
    """Model names, layer names, and the shape and dtype of every weight of a built layer (or of a
    layer whose twin in a model of the same class and layout is built)."""
    check_model_names(weights, target.algorithm, target.task, "the file")
    models = named_models(target.algorithm)
    for attr, model in models:
        given = weights[attr]
        if not isinstance(given, Mapping):
            raise ValueError(f"weights of model {attr!r} are not a dict")
        layers = {path for path, _ in model.named_layers()}
        current = _weights_to_expect(model, models)
        for key, value in given.items():
            if not isinstance(value, np.ndarray) or key.rpartition(".")[0] not in layers:
                raise ValueError(f"weight {attr}/{key} names no layer of {type(model).__name__}")
            if key in current and (value.shape != current[key].shape or value.dtype != current[key].dtype):
                raise ValueError(
                    f"weight {attr}/{key} is {value.dtype.name}{list(value.shape)}, "
                    f"the model has {current[key].dtype.name}{list(current[key].shape)}"
                )
        for path in {key.rpartition(".")[0] for key in given}:
            saved = sorted(k for k in given if k.rpartition(".")[0] == path)
            expected = sorted(k for k in current if k.rpartition(".")[0] == path)
            if expected and saved != expected:
                raise ValueError(f"weights of layer {attr}/{path} are {saved}, the model has {expected}")


def _check_trained_weights(weights: Mapping[str, Mapping[str, np.ndarray]], steps: int, algorithm: Algorithm) -> None:
    """A checkpoint of a task that has trained (``steps`` updates, or optimizer state) holds the
    weights of every parameter the algorithm trains (of the layers built here): without them the
    task would go on, silently, from fresh weights (loading keeps a layer the file lacks as it is)."""
    trained = {param.name for param in algorithm.parameters()}
    missing: Dict[str, List[str]] = {}
    for name, structural in structural_names(algorithm):
        attr, _, key = structural.partition("/")
        if name in trained and key not in weights[attr]:
            missing.setdefault(attr, []).append(key)
    for attr, keys in missing.items():
        what = f"weights of model {attr!r}" if not weights[attr] else f"weights {_some(keys)} of model {attr!r}"
        raise ValueError(
            f"holds no {what}, which the task trains (update_steps {steps}); it would go on from fresh ones"
        )


def _check_optimizer_state(
    weights: Mapping[str, Mapping[str, np.ndarray]], given: Mapping[str, object], target: CheckpointTarget
) -> None:
    """``given`` (a checkpoint's optimizer state) is what the task's optimizer can step from: the
    entries of :func:`_optimizer_to_expect`, each of the same shape and dtype, and (where the
    optimizer has ``check_state_dict``, as parl's do) plausible values. An optimizer without
    ``check_state_dict`` (a paddle optimizer) is compared with only once the task has made it."""
    algorithm = target.algorithm
    optimizer = _optimizer_to_expect(weights, target)
    if optimizer is None:
        if given:
            raise ValueError(f"holds optimizer state, but the algorithm of task {target.task!r} trains nothing")
        return
    check = getattr(optimizer, "check_state_dict", None)
    if check is None and optimizer is not target.optimizer:
        return  # another kind (paddle's) may make its state at its first step: a fresh one shows none
    _check_same_arrays("optimizer state", to_structural(optimizer.state_dict(), algorithm), given)
    if check is not None:
        try:
            check(from_structural(given, algorithm))
        except OptimizerStateError as exc:
            key = next(iter(to_structural({exc.key: None}, algorithm)))  # named as the file names it
            raise ValueError(f"optimizer state entry {key!r} {exc.problem}") from None


def _optimizer_to_expect(
    weights: Mapping[str, Mapping[str, np.ndarray]], target: CheckpointTarget
) -> Optional[Optimizer]:
    """The optimizer a checkpoint's optimizer state must fit: the task's own once it is made (at
    the first update); before, a fresh one from the algorithm, dropped after the check, for the
    algorithm's parameters and for stand-ins (zeros named ``<model>/<layer>.<suffix>``, shaped as
    ``weights``) of the layers only learning builds: those with weights in the checkpoint that
    neither prediction nor a built twin (a target network's online model) gives shapes here.
    None when there is nothing to train."""
    if target.optimizer is not None:
        return target.optimizer
    algorithm = target.algorithm
    models = named_models(algorithm)
    parameters = list(algorithm.parameters())
    for attr, model in models:
        built = _weights_to_expect(model, models)
        for key, value in sorted(weights[attr].items()):
            if key not in built:
                stand_in = paddle.to_tensor(np.zeros(value.shape, value.dtype))
                stand_in.name = f"{attr}/{key}"
                parameters.append(stand_in)
    return algorithm.make_optimizer(parameters) if parameters else None


def _weights_to_expect(model: Model, models: List[Tuple[str, Model]]) -> Dict[str, np.ndarray]:
    """``model``'s weights, and for a layer it has not built, the weights of the same layer in another
    of ``models`` of the same class and layer layout that has built it (a target network not synced
    yet takes the shapes of its online model)."""
    weights = model.get_weights()
    layout = [path for path, _ in model.named_layers()]
    for _, other in models:
        if other is not model and type(other) is type(model) and [p for p, _ in other.named_layers()] == layout:
            for key, value in other.get_weights().items():
                weights.setdefault(key, value)
    return weights


def _check_normalizer_arrays(expected: Mapping[str, Mapping[str, np.ndarray]], given: Mapping[str, object]) -> None:
    if set(given) != set(expected):
        raise ValueError(f"normalizer statistics are for inputs {sorted(given)}, expected {sorted(expected)}")
    for name, stats in expected.items():
        stats = dict(stats)
        got = given[name]
        count = got.get("count") if isinstance(got, Mapping) else None
        # The count is one number, kept as a 0-d or a one-element array.
        if not isinstance(count, np.ndarray) or count.size != 1:
            raise ValueError(f"normalizer statistics of {name!r} need a one-element 'count', got {count!r}")
        stats["count"] = count
        _check_same_arrays(f"normalizer statistics of {name!r}", stats, got, dtypes=False)


def _check_same_arrays(what: str, expected: Mapping[str, object], given: object, *, dtypes: bool = True) -> None:
    """``given`` has exactly ``expected``'s keys, each array of the same shape (and dtype)."""
    if not isinstance(given, Mapping):
        raise ValueError(f"{what} is {type(given).__name__}, expected entries {_some(sorted(expected))}")
    missing, extra = sorted(set(expected) - set(given)), sorted(set(given) - set(expected))
    if missing or extra:
        parts = [f"lacks {_some(missing)}"] if missing else []
        parts += [f"has entries {_some(extra)} it should not"] if extra else []
        raise ValueError(f"{what} {' and '.join(parts)}")
    for key, value in expected.items():
        if isinstance(value, Mapping):
            _check_same_arrays(f"{what}/{key}", value, given[key], dtypes=dtypes)
            continue
        want, got = np.asarray(value), given[key]
        if not isinstance(got, np.ndarray) or got.shape != want.shape or (dtypes and got.dtype != want.dtype):
            desc = f"{got.dtype.name}{list(got.shape)}" if isinstance(got, np.ndarray) else type(got).__name__
            raise ValueError(f"{what} entry {key!r} is {desc}, expected {want.dtype.name}{list(want.shape)}")


def _some(names: List[str], shown: int = 3) -> str:
    """The first ``shown`` of ``names``, and how many more there are."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{names[:shown]}{more}"
