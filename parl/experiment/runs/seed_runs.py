"""One config trained on several seeds: ``parl train CONFIG --seeds 0-4 [--jobs N]``.

    seeds = parse_seeds("0-2,7")                                  # [0, 1, 2, 7]
    runs = train_seeds("examples/configs/ppo_cartpole.yaml", [], seeds, "runs/ppo_cartpole", jobs=2)
    runs.statuses, runs.not_started, runs.signal                  # {0: 0, 1: 0, 2: 0, 7: 0}, [], None

Each seed is one ``parl train`` in a process of its own (``python -m parl train CONFIG
-o seed=S -o log_dir=<log_dir>/seed_S``), so runs share no state; ``jobs`` of them at
once (default one after another). One at a time, a run draws its progress bar and
prints its summary as ``parl train`` does; several at once run quietly, each writing
what it prints to ``<log_dir>/seed_S/train.log``, and one line is printed as each
ends. Each run's directory is a run's log dir as any other (result.json,
metrics.jsonl, checkpoints); :mod:`parl.experiment.runs.aggregate` sums them up.

A seed's ``result.json`` left by an earlier run in its directory is moved aside to
``result.previous.json`` before the seed's run starts, so the result read afterwards is this
run's or none.

SIGINT or SIGTERM to this process is forwarded to the runs going on
(:mod:`parl.experiment.runs.child_processes`), which stop as ``parl train`` does on it (final
checkpoint, result.json); the seeds not started yet are not started, and :func:`train_seeds`
returns once the runs going on have ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from parl.experiment.runs.child_processes import ChildProcesses
from parl.experiment.train.metrics import METRICS_FILE

#: A seed's run directory under the experiment's log dir: ``seed_<seed>``.
SEED_DIR_PREFIX = "seed_"
#: The figures of one run, in its log dir (written by the Trainer).
RESULT_FILE = "result.json"
#: Where an earlier run's result goes when the seed's run starts again in its directory.
PREVIOUS_RESULT_FILE = "result.previous.json"
#: What a run of several at once prints, in its own directory.
TRAIN_LOG = "train.log"
#: The most seeds one ``--seeds`` may name.
MAX_SEEDS = 1000
#: Seconds the main thread waits for the runs between looks (a signal's handler runs then at the latest).
WAIT_SECONDS = 0.5


def parse_seeds(text: str) -> List[int]:
    """The seeds ``text`` names: comma-separated integers and inclusive ranges, e.g. ``0-4`` or ``0,3,7``
    or ``0-2,10``; in the order given, each once.

    Raises:
        ValueError: a part that is not an integer >= 0 or a range ``low-high`` with ``low <= high``, a seed
            named twice, or more than :data:`MAX_SEEDS` seeds; the message names the part.
    """
    seeds: List[int] = []
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        if not (low.isdigit() and (not sep or high.isdigit())):
            raise ValueError(f"--seeds: expected seeds such as 0-4 or 0,3,7, got {part.strip()!r} in {text!r}")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise ValueError(f"--seeds: the range {part.strip()!r} ends before it starts")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise ValueError(f"--seeds: at most {MAX_SEEDS} seeds, got more in {text!r}")
        for seed in range(first, last + 1):
            if seed in seeds:
                raise ValueError(f"--seeds: seed {seed} is named twice in {text!r}")
            seeds.append(seed)
    return seeds


def seed_log_dir(log_dir: str, seed: int) -> str:
    """The run directory of ``seed`` under the experiment's ``log_dir``."""
    return os.path.join(log_dir, f"{SEED_DIR_PREFIX}{seed}")


def seed_command(
    config: str, overrides: Sequence[str], seed: int, log_dir: str, resume: bool, quiet: bool
) -> List[str]:
    """The ``parl train`` command of one seed: the config's overrides, then its seed and run directory."""
    command = [sys.executable, "-m", "parl", "train", config]
    for override in [*overrides, f"seed={seed}", f"log_dir={seed_log_dir(log_dir, seed)}"]:
        command += ["-o", override]
    return command + (["--resume"] if resume else []) + (["--quiet"] if quiet else [])


@dataclass
class SeedRuns:
    """What :func:`train_seeds` did.

    Attributes:
        statuses: seed -> the exit status of its run, for every seed whose run started (0: it trained
            and wrote its final checkpoint), in the order of the seeds.
        not_started: the seeds whose run never started: a signal came first.
        signal: the SIGINT or SIGTERM that stopped the experiment (None: every run started).
    """

    statuses: Dict[int, int] = field(default_factory=dict)
    not_started: List[int] = field(default_factory=list)
    signal: Optional[int] = None


def train_seeds(
    config: str,
    overrides: Sequence[str],
    seeds: Sequence[int],
    log_dir: str,
    *,
    jobs: int = 1,
    resume: bool = False,
    quiet: bool = False,
) -> SeedRuns:
    """Train ``config`` once per seed of ``seeds`` into ``<log_dir>/seed_<seed>``, ``jobs`` at a time.

    Called from the main thread, a SIGINT or SIGTERM is forwarded to the runs going on (which stop
    as ``parl train`` stops on it: final checkpoint, result.json) and no other run starts; this
    returns once those have ended.

    Raises:
        ValueError: ``jobs`` is not an integer >= 1.
        NotWritableError: a seed's run directory cannot be prepared (:func:`prepare_seed_dir`).
    """
    from parl.validation import check_int

    jobs = check_int("--jobs", jobs, 1)
    quiet_runs = quiet or jobs > 1
    children = ChildProcesses()

    def run(seed: int) -> Optional[int]:
        if children.signal is not None:
            return None
        run_dir = prepare_seed_dir(log_dir, seed)
        command = seed_command(config, overrides, seed, log_dir, resume, quiet_runs)
        if jobs == 1:
            child = children.start(command, stdout=subprocess.DEVNULL if quiet else None)
            if child is not None and not quiet:
                print(f"parl train: seed {seed} -> {run_dir}", flush=True)
            return None if child is None else children.wait(child)
        with open(os.path.join(run_dir, TRAIN_LOG), "w", encoding="utf-8") as log:
            child = children.start(command, stdout=log, stderr=subprocess.STDOUT)
            status = None if child is None else children.wait(child)
        if status is not None:
            print(f"parl train: seed {seed} ended with exit status {status} ({run_dir})", flush=True)
        return status

    with children, ThreadPoolExecutor(max_workers=min(jobs, len(seeds) or 1)) as pool:
        futures = [pool.submit(run, seed) for seed in seeds]
        while wait(futures, timeout=WAIT_SECONDS).not_done:
            pass  # the main thread wakes now and then, so a signal's handler runs at once
    outcome = SeedRuns(signal=children.signal)
    for seed, future in zip(seeds, futures):
        status = future.result()  # a seed's NotWritableError, raised here
        if status is None:
            outcome.not_started.append(seed)
        else:
            outcome.statuses[seed] = status
    return outcome


def prepare_seed_dir(log_dir: str, seed: int) -> str:
    """Make the run directory of ``seed`` under ``log_dir``, and move the ``result.json`` of an earlier
    run there to ``result.previous.json`` (replacing an older one), so that a result found there
    later is the new run's; returns the directory.

    Raises:
        NotWritableError: the directory cannot be made or the earlier result not moved; one line.
    """
    from parl.experiment.train.checkpoints import NotWritableError

    run_dir = seed_log_dir(log_dir, seed)
    path = os.path.join(run_dir, RESULT_FILE)
    try:
        os.makedirs(run_dir, exist_ok=True)
        if os.path.lexists(path):
            os.replace(path, os.path.join(run_dir, PREVIOUS_RESULT_FILE))
    except OSError as exc:
        raise NotWritableError(f"{run_dir}: cannot prepare the seed's run directory ({exc.strerror or exc})") from None
    return run_dir


def found_seed_dirs(log_dir: str) -> Optional[Dict[int, str]]:
    """Seed -> run directory of every ``seed_<n>`` directory under ``log_dir`` that holds a run's metrics
    or result, by seed; None when there is none (``log_dir`` is not a multi-seed experiment)."""
    if not os.path.isdir(log_dir):
        return None
    found = {}
    for entry in os.listdir(log_dir):
        number = entry[len(SEED_DIR_PREFIX) :]
        path = os.path.join(log_dir, entry)
        if entry.startswith(SEED_DIR_PREFIX) and number.isdigit() and os.path.isdir(path):
            if any(os.path.isfile(os.path.join(path, name)) for name in (METRICS_FILE, RESULT_FILE)):
                found[int(number)] = path
    return dict(sorted(found.items())) or None
