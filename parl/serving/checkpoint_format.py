"""The on-disk format of one task's checkpoint: safetensors arrays plus JSON metadata.

    write_task_checkpoint("ckpt/RL.json", metadata, arrays)   # ckpt/RL.json and ckpt/RL.safetensors
    metadata, arrays = read_task_checkpoint("ckpt/RL.json")    # verified, or CheckpointError

``<name>.safetensors`` holds every array (weights, optimizer state, normalizer
statistics, algorithm arrays) under keys ``<section>/<path>``; ``<name>.json``
(the path given) holds the metadata, the manifest of the arrays (section, path,
shape, dtype), the SHA-256 of the arrays file and a SHA-256 of the metadata
itself. Neither file is ever unpickled: reading can not run code. Reading refuses
a file that is a link, a FIFO or a device, or larger than its bound (the arrays
file: what its manifest declares), before reading it; then checks the checksums,
every manifest entry, every array against the manifest, and that every float
array is finite; model weights must also stay within :data:`MAX_ABS_WEIGHT`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import safetensors.numpy

from parl.serving.safe_files import FileCheckError, read_regular_file, replace_file
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
