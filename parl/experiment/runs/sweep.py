"""A sweep of ``parl tune``: the trials of a grid over config keys, and the table of their results.

    plan = plan_sweep("examples/configs/ppo_cartpole.yaml",
                      ["tasks.RL.algorithm.learning_rate=0.0015,0.0005", "tasks.RL.algorithm.epochs=5,10"])
    [trial.overrides for trial in plan.trials]     # 4 trials, each the -o list of one parl train run
    rows = run_sweep(plan)                         # parl.experiment.runs.tune: a TrialRow per trial
    print("\\n".join(table_lines(plan, rows)))

Every ``--grid KEY=V1,V2`` is an axis; each value is a text that ``-o`` reads (a YAML value; commas
inside brackets or quotes do not split: ``--grid tasks.RL.model.hidden_sizes=[32,32],[64,64]``).
A trial is one value of every axis and one sample: ``--samples N`` repeats the grid N times, and
sample ``i`` runs with seed ``seed + i`` (the config's seed, or the trial's own when ``seed`` is an
axis). Each trial writes its run directory as ``parl train`` does, at ``<log dir>/tune/<trial name>``.

What each trial asks the scheduler for (:attr:`Trial.bundles`, a list of CPU bundles, the first
for the trial's own process) is what its placement reserves (the registry entry's ``reserve``):
1 CPU for in-process placements; for placement ``"processes"`` its worker count; for placement
``"ray"`` nothing for itself (its learners mostly wait on the workers) and one bundle of
``placement.worker_cpus`` per worker actor. ``trial_cpus`` replaces the first bundle.

Nothing here imports Ray (:mod:`parl.experiment.runs.tune` runs the trials on Ray Tune).
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from parl.experiment.config.class_spec import ConfigError
from parl.experiment.config.placement_config import is_old_section
from parl.experiment.config.robot_config import ConfigLoader, RobotConfig, config_loader
from parl.experiment.config.yaml_loading import parse_value, split_values
from parl.experiment.runs.options import check_count, check_cpus
from parl.experiment.train.metrics import finite_or_none
from parl.validation import ParameterError

#: The folder of a sweep under the log dir.
SWEEP_FOLDER = "tune"
#: The sweep's results, in its folder.
RESULTS_FILE = "results.json"
#: Keys a grid may not vary: each trial's log dir is the sweep's choice.
FIXED_KEYS = ("log_dir",)
#: The longest error text a table row shows (results.json keeps it whole).
ERROR_WIDTH = 100
#: The most trials a sweep may have (the grid's combinations times the samples), checked before any is planned.
MAX_TRIALS = 10_000
#: The config keys (and sections) that decide what a trial asks the scheduler for (:func:`resource_bundles`),
#: besides the sections named after a placement (deprecated).
RESOURCE_KEYS = ("placement", "workers")


@dataclass(frozen=True)
class GridAxis:
    """One ``--grid KEY=V1,V2``: a config key path and its values as typed."""

    key: str
    values: Tuple[str, ...]

    @property
    def text(self) -> str:
        """The axis as given on the command line."""
        return f"{self.key}={','.join(self.values)}"


@dataclass(frozen=True)
class Trial:
    """One run of the sweep.

    Attributes:
        index: its place in the sweep (axes vary last-fastest, samples innermost).
        name: its run directory's name under the sweep folder.
        values: the value of each axis, as typed, in axis order.
        sample: which repetition of the grid it belongs to (0 .. samples - 1).
        seed: the run's seed.
        overrides: the run's ``-o`` list: the sweep's overrides, the values, ``seed`` and ``log_dir``.
        log_dir: the run's log dir.
        bundles: the CPU bundles it asks the scheduler for (see the module docstring).
    """

    index: int
    name: str
    values: Tuple[str, ...]
    sample: int
    seed: int
    overrides: Tuple[str, ...]
    log_dir: str
    bundles: Tuple[Dict[str, float], ...]


@dataclass
class SweepPlan:
    """The trials of a sweep, in order, and where it writes.

    Attributes:
        config: the config file, as given (in the commands printed).
        path: the config file's absolute path (what the trials load).
        axes: the grid.
        samples: how many times the grid repeats.
        overrides: the ``-o`` of every trial.
        folder: the sweep's folder, ``<log dir>/tune``.
        trials: every trial, in order.
    """

    config: str
    path: str
    axes: List[GridAxis]
    samples: int
    overrides: List[str]
    folder: str
    trials: List[Trial] = field(default_factory=list)

    def find(self, values: Sequence[object], sample: int) -> Trial:
        """The trial of the axis ``values`` (as typed, in axis order) and ``sample``.

        Raises:
            ValueError: a value no axis has.
        """
        index = 0
        for axis, value in zip(self.axes, values):
            index = index * len(axis.values) + axis.values.index(value)
        return self.trials[index * self.samples + sample]

    def command(self, trial: Trial) -> str:
        """The ``parl train`` command that runs ``trial`` again (its log dir left to the config)."""
        options = [o for o in trial.overrides if not o.startswith("log_dir=")]
        return shlex.join(["parl", "train", self.config] + [part for o in options for part in ("-o", o)])


@dataclass
class TrialRow:
    """What a trial gave: its run's result (``result.json``'s figures) or the error that ended it."""

    trial: Trial
    result: Optional[Mapping[str, object]]
    error: Optional[str] = None

    def figure(self, key: str) -> float:
        """The result's number ``key`` (NaN when there is none)."""
        value = None if self.result is None else self.result.get(key)
        return float(value) if isinstance(value, (int, float)) else float("nan")


def parse_axis(text: str) -> GridAxis:
    """The axis of ``--grid KEY=V1,V2``.

    Raises:
        ConfigError: one line naming the bad text.
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or not all(key.split(".")):
        raise ConfigError(f"{text}: expected --grid key.path=value1,value2,...")
    if key in FIXED_KEYS:
        raise ConfigError(f"{key}: a sweep sets each trial's {key}; give --log-dir instead (in --grid {text})")
    values = tuple(split_values(raw, key, f" (in --grid {text})"))
    repeated = sorted(value for value, count in collections.Counter(values).items() if count > 1)
    if repeated:
        raise ConfigError(f"{key}: value {repeated[0]} given twice (in --grid {text})")
    return GridAxis(key, values)


def trial_count(axes: Sequence[GridAxis], samples: int) -> int:
    """How many trials ``axes`` and ``samples`` make: the product of the axes' lengths, times ``samples``
    (counted, not enumerated)."""
    return math.prod(len(axis.values) for axis in axes) * samples


def plan_sweep(
    config: str,
    grid: Sequence[str],
    *,
    overrides: Sequence[str] = (),
    samples: int = 1,
    log_dir: Optional[str] = None,
    trial_cpus: Optional[float] = None,
) -> SweepPlan:
    """The trials of the grid ``grid`` (``KEY=V1,V2`` each) over the config file ``config`` with
    ``overrides``, each repeated ``samples`` times, under ``<log_dir>/tune`` (None: the config's
    log dir). Their number is checked first (at most :data:`MAX_TRIALS`); then every value is
    checked by loading the config with it, and what each trial asks the scheduler for by loading
    it with the trial's values of :data:`RESOURCE_KEYS` (once per combination of them).

    Raises:
        ConfigError: a bad axis, value, override, ``samples`` or ``trial_cpus``, more than
            :data:`MAX_TRIALS` trials, or a sweep folder already used; one line.
    """
    samples = check_count("--samples", samples, 1, MAX_TRIALS)
    if trial_cpus is not None:
        trial_cpus = check_cpus("--trial-cpus", trial_cpus)
    axes = [parse_axis(text) for text in grid]
    if not axes:
        raise ConfigError("expected at least one --grid key.path=value1,value2,...")
    keys = [axis.key for axis in axes]
    for key in keys:
        if keys.count(key) > 1:
            raise ConfigError(f"{key}: given in two --grid options; give its values in one")
    count = trial_count(axes, samples)
    if count > MAX_TRIALS:
        sizes = " x ".join(str(len(axis.values)) for axis in axes) + " values"
        sizes += f" x {samples} samples" if samples > 1 else ""
        raise ConfigError(f"--grid: {sizes} make {count:,} trials; a sweep runs at most {MAX_TRIALS:,}")
    load = config_loader(config)
    base = load(overrides)
    for axis in axes:
        for value in axis.values:
            _load_value(load, overrides, axis, value)
    folder = os.path.abspath(os.path.join(log_dir or base.log_dir, SWEEP_FOLDER))
    if os.path.isdir(folder) and os.listdir(folder):
        raise ConfigError(f"--log-dir: {folder} already holds a sweep; give another --log-dir or remove it")
    plan = SweepPlan(config, os.path.abspath(config), axes, samples, list(overrides), folder)
    deciding = [i for i, axis in enumerate(axes) if _decides_resources(axis.key.split(".")[0])]
    bundles: Dict[Tuple[str, ...], Tuple[Dict[str, float], ...]] = {}
    for values in itertools.product(*(axis.values for axis in axes)):
        chosen = tuple(f"{axes[i].key}={values[i]}" for i in deciding)
        if chosen not in bundles:
            bundles[chosen] = _bundles(load, [*overrides, *chosen], trial_cpus)
        for sample in range(samples):
            plan.trials.append(_trial(plan, base, keys, values, sample, bundles[chosen]))
    return plan


def _decides_resources(key: str) -> bool:
    """Whether the top-level config key ``key`` may change what a trial asks the scheduler for."""
    return key in RESOURCE_KEYS or is_old_section(key)


def _load_value(load: ConfigLoader, overrides: Sequence[str], axis: GridAxis, value: str) -> None:
    """Load the config with one axis value; an error names the ``--grid`` option instead of ``-o``."""
    text = f"{axis.key}={value}"
    try:
        load([*overrides, text])
    except ConfigError as exc:
        message = str(exc).replace(f" (in -o {text})", "")
        raise ConfigError(f"{message} (in --grid {axis.text})") from None


def _bundles(load: ConfigLoader, overrides: Sequence[str], trial_cpus: Optional[float]) -> Tuple[Dict[str, float], ...]:
    """What a trial of the config with ``overrides`` asks the scheduler for (see :func:`resource_bundles`);
    values that load one by one but not together ask for ``trial_cpus`` (default 1): the trial reports
    their error when it runs."""
    try:
        config = load(overrides)
    except ConfigError:
        return ({"CPU": 1.0 if trial_cpus is None else float(trial_cpus)},)
    return resource_bundles(config, trial_cpus)


def _trial(
    plan: SweepPlan,
    base: RobotConfig,
    keys: List[str],
    values: Tuple[str, ...],
    sample: int,
    bundles: Tuple[Dict[str, float], ...],
) -> Trial:
    index = len(plan.trials)
    given = dict(zip(keys, values))
    seed = (parse_value(given["seed"], "seed") if "seed" in given else base.seed) + sample
    name = _trial_name(index, plan.axes, values, seed if plan.samples > 1 else None)
    log_dir = os.path.join(plan.folder, name)
    overrides = (
        *plan.overrides,
        *(f"{key}={value}" for key, value in given.items() if key != "seed"),
        f"seed={seed}",
        f"log_dir={log_dir}",
    )
    return Trial(index, name, values, sample, seed, overrides, log_dir, bundles)


def resource_bundles(config: RobotConfig, trial_cpus: Optional[float] = None) -> Tuple[Dict[str, float], ...]:
    """The CPU bundles a run of ``config`` asks the scheduler for (see the module docstring); an
    empty first bundle asks nothing for the trial's own process.

    Raises:
        ConfigError: an option the placement needs to say what it reserves is not set (placement
            ``"ray"``'s ``workers``: how many bundles would be unknown).
    """
    placement = config.placement
    try:
        reservation = placement.entry.reserve(placement.options)
    except ParameterError as exc:
        raise ConfigError(
            f"placement.{exc.name}: {exc.name} must be {exc.expected}, got {exc.value!r} "
            f"(in the config or -o placement.{exc.name}=...)"
        ) from None
    own = reservation.own_cpus if trial_cpus is None else trial_cpus
    return ({"CPU": float(own)} if own else {}, *(dict(bundle) for bundle in reservation.actors))


def _trial_name(index: int, axes: Sequence[GridAxis], values: Sequence[str], seed: Optional[int]) -> str:
    """``trial-000_learning_rate=0.0015_epochs=5`` (``_seed=3`` added when samples repeat the grid)."""
    parts = [f"trial-{index:03d}"] + [f"{short}={value}" for short, value in zip(short_keys(axes), values)]
    if seed is not None:
        parts.append(f"seed={seed}")
    return re.sub(r"[^A-Za-z0-9_.=+\-]", "", "_".join(parts))[:120]


def short_keys(axes: Sequence[GridAxis]) -> List[str]:
    """Each axis's key by its last part (``learning_rate``), or whole when two axes end alike."""
    last = [axis.key.rsplit(".", 1)[-1] for axis in axes]
    return [name if last.count(name) == 1 else axis.key for name, axis in zip(last, axes)]


def best_row(rows: Sequence[TrialRow]) -> Optional[TrialRow]:
    """The trial with the highest ``final_eval``, ties broken by fewer env steps then by order; None
    when no trial finished with one."""
    finished = [r for r in rows if r.error is None and not math.isnan(r.figure("final_eval"))]
    if not finished:
        return None
    return min(finished, key=lambda r: (-r.figure("final_eval"), r.figure("env_steps"), r.trial.index))


def table_lines(plan: SweepPlan, rows: Sequence[TrialRow]) -> List[str]:
    """The result table (a row per trial in order; ``error`` only when a trial has one), then the
    best trial's line with the ``parl train`` command that runs it again."""
    with_errors = any(r.error is not None for r in rows)
    headers = ["trial", *short_keys(plan.axes), "seed", "final_eval", "best_eval", "env_steps", "reached", "seconds"]
    cells = []
    for row in sorted(rows, key=lambda r: r.trial.index):
        result = row.result or {}
        cells.append(
            [
                str(row.trial.index),
                *row.trial.values,
                str(row.trial.seed),
                f"{row.figure('final_eval'):.1f}",
                f"{row.figure('best_eval'):.1f}",
                f"{int(row.figure('env_steps')):,}" if not math.isnan(row.figure("env_steps")) else "-",
                _yes_no(result.get("reached")),
                f"{row.figure('train_seconds'):.1f}",
            ]
            + ([_cut(row.error or "")] if with_errors else [])
        )
    if with_errors:
        headers.append("error")
    lines = _aligned(headers, cells, left=len(plan.axes) + 1)
    best = best_row(rows)
    if best is None:
        lines.append("best: none (no trial finished with a final evaluation)")
    else:
        lines.append(
            f"best: trial {best.trial.index} (final_eval {best.figure('final_eval'):.1f}, "
            f"{int(best.figure('env_steps')):,} env steps): {plan.command(best.trial)}"
        )
    return lines


def _aligned(headers: List[str], cells: List[List[str]], left: int) -> List[str]:
    """Columns padded to their widest cell: the first ``left`` after ``trial`` and the last
    (``error``) left-aligned, the figures right-aligned."""
    widths = [max(len(c) for c in column) for column in zip(headers, *cells)]
    out = []
    for line in [headers, *cells]:
        padded = [
            cell.ljust(width) if 0 < i <= left or headers[i] == "error" else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(line, widths))
        ]
        out.append("  ".join(padded).rstrip())
    return out


def _yes_no(flag: object) -> str:
    return "yes" if flag is True else "no" if flag is False else "-"


def _cut(text: str) -> str:
    return text if len(text) <= ERROR_WIDTH else text[: ERROR_WIDTH - 3] + "..."


def write_results(plan: SweepPlan, rows: Sequence[TrialRow]) -> str:
    """Write the table as JSON to ``<sweep folder>/results.json``; returns its path. A figure a trial
    has none of (NaN, infinite) is null."""
    best = best_row(rows)
    data = {
        "config": plan.path,
        "overrides": plan.overrides,
        "grid": {axis.key: list(axis.values) for axis in plan.axes},
        "samples": plan.samples,
        "trials": [
            {
                "trial": row.trial.index,
                "name": row.trial.name,
                "values": dict(zip((a.key for a in plan.axes), row.trial.values)),
                "seed": row.trial.seed,
                "log_dir": row.trial.log_dir,
                "command": plan.command(row.trial),
                "final_eval": finite_or_none(row.figure("final_eval")),
                "best_eval": finite_or_none(row.figure("best_eval")),
                "last_eval": finite_or_none(row.figure("last_eval")),
                "env_steps": None if row.result is None else finite_or_none(row.result.get("env_steps")),
                "reached": None if row.result is None else row.result.get("reached"),
                "seconds": finite_or_none(row.figure("train_seconds")),
                "stop_reason": None if row.result is None else row.result.get("stop_reason"),
                "error": row.error,
            }
            for row in sorted(rows, key=lambda r: r.trial.index)
        ],
        "best": None if best is None else best.trial.index,
    }
    path = Path(plan.folder) / RESULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, allow_nan=False), encoding="utf-8")
    return str(path)
