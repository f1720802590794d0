"""A self-play opponent's snapshot pool as one file of a checkpoint, verified before it is used.

    write_pool_file(path, state, snapshots)
    state, snapshots = read_pool_file(path, like, max_snapshots, sha256="...")

The file is safetensors: the arrays of every snapshot (weights as
:meth:`~parl.ComputationTask.algorithm_weights` gives them, input statistics included) under
``<snapshot>/<model>/<array>`` keys, and in its header's metadata the format name and version, the
pool's ``state`` (JSON: counts and random generator states) and every array's path in its snapshot.

Reading refuses, in one line naming the file: a file that is not a regular file or is larger than
the snapshots can be (``max_snapshots`` of the size of ``like``), a SHA-256 other than the one the
checkpoint recorded, another format or version, a damaged header, arrays with NaN or infinite values,
and snapshots whose arrays are not those of ``like`` (names, shapes, dtypes), so that a pool restored
can always be set into the opponent. Nothing in the file is executed.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import safetensors.numpy

from parl.serving.checkpoint_format import CheckpointError, array_problem, flatten_arrays, unflatten
from parl.serving.computation_task import NORMALIZER_KEY
from parl.serving.safe_files import FileCheckError, read_regular_file, replace_file

#: The format name and version a pool file carries.
POOL_FORMAT = "parl-selfplay-pool"
POOL_VERSION = 1
#: Bytes allowed for the header besides the arrays (names, shapes, the state and the paths).
HEADER_ALLOWANCE = 1 << 20
#: Header bytes allowed per array besides that.
HEADER_PER_ARRAY = 512

Snapshot = Dict[str, Dict[str, Any]]


def write_pool_file(path: str, state: Mapping[str, object], snapshots: Sequence[Snapshot]) -> None:
    """Write ``snapshots`` and ``state`` (JSON values) as the pool file ``path`` (replaced atomically).

    Raises:
        ValueError: ``state`` is not JSON.
        OSError: the file could not be written.
    """
    arrays: Dict[str, np.ndarray] = {}
    paths: Dict[str, List[str]] = {}
    for index, snapshot in enumerate(snapshots):
        for key, (sub_path, array) in flatten_arrays(str(index), snapshot).items():
            arrays[key] = array
            paths[key] = [str(index), *sub_path]
    metadata = {
        "format": POOL_FORMAT,
        "version": str(POOL_VERSION),
        "state": json.dumps(dict(state)),
        "paths": json.dumps(paths),
        "snapshots": str(len(snapshots)),
    }
    replace_file(path, safetensors.numpy.save(arrays, metadata=metadata))


def read_pool_file(
    path: str, like: Snapshot, max_snapshots: int, sha256: Optional[str] = None
) -> Tuple[Dict[str, Any], List[Snapshot]]:
    """The pool's state and snapshots in ``path``, each snapshot checked against ``like``.

    Args:
        like: a snapshot of the learner now: every stored one must have its arrays.
        max_snapshots: the most snapshots the pool keeps (bounds the file's size).
        sha256: the file's SHA-256 as the checkpoint recorded it (None: not checked).

    Raises:
        CheckpointError: as the module docstring says; one line naming the file.
    """
    flat_like = {key: array for key, (_, array) in flatten_arrays("", like).items()}
    bound = max_snapshots * (sum(a.nbytes for a in flat_like.values()) + HEADER_PER_ARRAY * len(flat_like))
    try:
        data = read_regular_file(path, bound + HEADER_ALLOWANCE, "self-play pool file")
    except FileCheckError as exc:
        raise CheckpointError(str(exc)) from None
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise CheckpointError(f"{path}: SHA-256 differs from the checkpoint's record (changed or damaged)")
    metadata = _header_metadata(path, data)
    if metadata.get("format") != POOL_FORMAT or metadata.get("version") != str(POOL_VERSION):
        raise CheckpointError(f"{path} is not a parl self-play pool file of version {POOL_VERSION}")
    try:
        state = json.loads(metadata["state"])
        paths = json.loads(metadata["paths"])
        count = int(metadata["snapshots"])
        arrays = safetensors.numpy.load(data)
    except Exception as exc:  # noqa: BLE001 - a damaged header or arrays: one line
        raise CheckpointError(f"{path}: damaged pool file ({type(exc).__name__})") from None
    if not isinstance(state, dict) or not isinstance(paths, dict) or count < 1:
        raise CheckpointError(f"{path}: damaged pool file (its state, paths or snapshot count)")
    if count > max_snapshots:
        raise CheckpointError(f"{path} holds {count} snapshots, this pool keeps at most {max_snapshots}")
    if set(paths) != set(arrays):
        raise CheckpointError(f"{path}: the arrays are not those its header lists")
    entries: Dict[int, List[Tuple[List[str], np.ndarray]]] = {index: [] for index in range(count)}
    for key, array in arrays.items():
        where = paths[key]
        if not (isinstance(where, list) and len(where) > 1 and str(where[0]).isdigit() and int(where[0]) in entries):
            raise CheckpointError(f"{path}: array {key!r} belongs to no snapshot")
        problem = array_problem(key, array, weight=where[1] != NORMALIZER_KEY)  # statistics may be large
        if problem is not None:
            raise CheckpointError(f"{path}: {problem}")
        entries[int(where[0])].append((where[1:], array))
    snapshots = []
    for index in range(count):
        try:
            snapshot = unflatten(entries[index])
        except ValueError as exc:
            raise CheckpointError(f"{path}: snapshot {index}: {exc}") from None
        _check_like(path, index, snapshot, flat_like)
        snapshots.append(snapshot)
    return state, snapshots


def _header_metadata(path: str, data: bytes) -> Dict[str, str]:
    """The ``__metadata__`` of a safetensors file's header (its first 8 bytes give the header's length)."""
    try:
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
        metadata = header.get("__metadata__", {})
    except Exception as exc:  # noqa: BLE001 - not safetensors: one line
        raise CheckpointError(f"{path}: not a safetensors file ({type(exc).__name__})") from None
    if not isinstance(metadata, dict):
        raise CheckpointError(f"{path}: not a parl self-play pool file (no metadata)")
    return metadata


def _check_like(path: str, index: int, snapshot: Snapshot, flat_like: Mapping[str, np.ndarray]) -> None:
    flat = {key: array for key, (_, array) in flatten_arrays("", snapshot).items()}
    if set(flat) != set(flat_like):
        extra, missing = sorted(set(flat) - set(flat_like)), sorted(set(flat_like) - set(flat))
        raise CheckpointError(
            f"{path}: snapshot {index} does not fit the learner (arrays {extra[:3]} extra, {missing[:3]} missing)"
        )
    for key, array in flat.items():
        expected = flat_like[key]
        if array.shape != expected.shape or array.dtype != expected.dtype:
            raise CheckpointError(
                f"{path}: snapshot {index}: array {key.lstrip('/')!r} is {array.dtype.name}{list(array.shape)}, "
                f"the learner's {expected.dtype.name}{list(expected.shape)}"
            )
