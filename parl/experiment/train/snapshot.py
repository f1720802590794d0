"""A run's snapshot: the config and the parl sources it ran with, so that an old run can be replayed.

    snapshot = write_snapshot("runs/ppo_cartpole", config_file="examples/configs/ppo_cartpole.yaml")

``parl train`` writes it when a run starts, beside the resolved ``config.yaml``::

    <log_dir>/snapshot/source.json          what ran: parl's version, its git commit and whether the
                                            checkout had changes (when parl is a git checkout), the
                                            SHA-256 of the sources archive, the Python, numpy,
                                            paddlepaddle and gymnasium versions, the command line
    <log_dir>/snapshot/parl-source.tar.gz   parl's own sources (every .py, .c and .h file of the
                                            package), archived the same way every time, so equal
                                            sources give equal archives and hashes
    <log_dir>/snapshot/<config file>        the config file as it was given, comments included

A resumed run whose parl sources differ from those of the snapshot writes its own
beside it, in ``snapshot/resumed-<env steps>/``. Replaying (docs/experiments.md)::

    mkdir old && tar -xzf runs/x/snapshot/parl-source.tar.gz -C old
    PYTHONPATH=old python -m parl train runs/x/config.yaml -o log_dir=runs/x-replay
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from typing import Dict, List, Optional, Sequence

#: The run's snapshot directory, in its log dir.
SNAPSHOT_DIR = "snapshot"
#: What ran, as JSON.
SOURCE_FILE = "source.json"
#: parl's sources.
ARCHIVE_FILE = "parl-source.tar.gz"
#: The endings of the package files archived.
SOURCE_SUFFIXES = (".py", ".c", ".h")
#: The libraries whose versions are recorded (as installed; None when not).
LIBRARIES = ("parl", "paddlepaddle", "numpy", "gymnasium", "pydantic", "tensorboardX")
_GIT_SECONDS = 10.0


def package_dir() -> str:
    """The directory of the ``parl`` package that runs."""
    import parl

    return os.path.dirname(os.path.abspath(parl.__file__))


def source_files(package: str) -> List[str]:
    """The package's source files (relative to its parent directory, ``parl/...``), sorted."""
    parent = os.path.dirname(package)
    found = []
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        found += [os.path.relpath(os.path.join(root, f), parent) for f in files if f.endswith(SOURCE_SUFFIXES)]
    return sorted(found)


def source_archive(package: str) -> bytes:
    """A gzipped tar of :func:`source_files`, the same bytes for the same sources (no times, owners or
    modes of this machine in it)."""
    parent = os.path.dirname(package)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in source_files(package):
            with open(os.path.join(parent, name), "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0)


def git_state(package: str) -> Optional[Dict[str, object]]:
    """``{"commit", "dirty"}`` of the git checkout ``package`` lies in (dirty: tracked files differ from
    the commit), or None when it is not in one or git cannot tell."""
    parent = os.path.dirname(package)
    try:
        top = _git(parent, "rev-parse", "--show-toplevel")
        if os.path.realpath(top) != os.path.realpath(parent):  # parl installed inside another project's checkout
            return None
        commit = _git(parent, "rev-parse", "HEAD")
        changes = _git(parent, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(changes)}


def _git(directory: str, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", directory, *args], capture_output=True, text=True, timeout=_GIT_SECONDS, check=True
    )
    return done.stdout.strip()


def describe_source(package: str, archive: bytes, argv: Sequence[str]) -> Dict[str, object]:
    """What :data:`SOURCE_FILE` holds for the sources in ``archive`` of ``package``."""
    return {
        "parl_version": _version("parl"),
        "package": package,
        "git": git_state(package),
        "source_sha256": hashlib.sha256(archive).hexdigest(),
        "source_files": len(source_files(package)),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libraries": {name: _version(name) for name in LIBRARIES},
        "argv": list(argv),
    }


def _version(name: str) -> Optional[str]:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def write_snapshot(
    log_dir: str,
    *,
    config_file: Optional[str] = None,
    argv: Optional[Sequence[str]] = None,
    resumed_at: Optional[int] = None,
) -> Optional[str]:
    """Write the snapshot of the run in ``log_dir`` (see the module docstring); returns its directory.

    Args:
        config_file: the config file the run was loaded from (copied when it exists).
        argv: the command line (default: ``sys.argv``).
        resumed_at: None for a new run (``<log_dir>/snapshot`` is written, replacing one of an earlier
            run there); for a run resumed at that many env steps, nothing is written (None returned)
            when the snapshot there holds the same sources, else ``snapshot/resumed-<resumed_at>``.

    Raises:
        OSError: a file could not be written.
    """
    package = package_dir()
    archive = source_archive(package)
    source = describe_source(package, archive, sys.argv if argv is None else argv)
    directory = os.path.join(log_dir, SNAPSHOT_DIR)
    if resumed_at is not None:
        if _snapshot_sha256(directory) == source["source_sha256"]:
            return None
        directory = os.path.join(directory, f"resumed-{resumed_at}")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, ARCHIVE_FILE), "wb") as f:
        f.write(archive)
    with open(os.path.join(directory, SOURCE_FILE), "w", encoding="utf-8") as f:
        json.dump(source, f, indent=1)
    if config_file is not None and os.path.isfile(config_file):
        shutil.copyfile(config_file, os.path.join(directory, os.path.basename(config_file)))
    return directory


def _snapshot_sha256(directory: str) -> Optional[str]:
    """The sources hash the snapshot in ``directory`` records, or None when there is none readable."""
    try:
        with open(os.path.join(directory, SOURCE_FILE), encoding="utf-8") as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        return None
    return recorded.get("source_sha256") if isinstance(recorded, dict) else None
