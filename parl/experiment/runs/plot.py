"""Learning curves of runs, read from their ``metrics.jsonl``, drawn to an image file.

    plot_curves(["runs/ppo_seed0", "runs/ppo_seed1"], "curves.png")
    plot_curves(["runs/ppo_cartpole"], "band.png")      # a parl train --seeds experiment: seed_<n> runs

Two panels against env steps, one colour per log dir, labelled by its directory name:

- training episode returns: for a run, each episode faint and a moving average bold; for an
  experiment of several seeds (``parl train --seeds``), each seed's moving average faint and
  their mean bold, with the 95% percentile-bootstrap interval of that mean as a band (at each
  step, over the seeds whose run reached it: a run that stopped at its target leaves the mean,
  which is dotted from then on);
- evaluations: each run's evaluation mean returns, marked by kind (the trainer's
  ``eval/episodes``): a one-episode check whose episode missed the target (x), a full
  evaluation of ``evaluation.episodes`` (o), and one confirmed on five times as many (*).

The target return of the runs' ``config.yaml`` is a dashed line on both panels. Behind
``parl plot``. Drawn with matplotlib's Agg canvas, so no display is needed and the
process's pyplot backend is left alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import yaml

from parl.experiment.runs.seed_runs import found_seed_dirs
from parl.experiment.runs.statistics import bootstrap_interval, mean
from parl.experiment.train.metrics import METRICS_FILE
from parl.validation import check_int

if TYPE_CHECKING:
    from typing import TypeGuard  # Python 3.10+; annotations only

#: The tags drawn, one panel each: (tag, panel title).
PANELS = (("episode/reward", "training episodes"), ("eval/mean_return", "evaluations"))
#: Evaluation kinds by ``eval/episodes``: (kind, marker, label).
EVAL_KINDS = (
    ("check", "x", "one-episode check (missed the target)"),
    ("full", "o", "full evaluation"),
    ("confirmed", "*", "with its confirmation (6x the episodes)"),
)
#: Points of the common step grid of a band.
GRID_POINTS = 200
#: Resamplings per grid point of a band's bootstrap interval.
BAND_SAMPLES = 2000

Series = Tuple[np.ndarray, np.ndarray]  # env steps, values


@dataclass
class Run:
    """One run's curves and the settings of its config that the plot shows."""

    curves: Dict[str, Series]
    target: Optional[float] = None
    eval_episodes: Optional[int] = None


@dataclass
class Experiment:
    """What one log dir argument draws: one run, or the runs of several seeds."""

    label: str
    runs: List[Run] = field(default_factory=list)

    @property
    def target(self) -> Optional[float]:
        return next((run.target for run in self.runs if run.target is not None), None)


def plot_curves(log_dirs: Sequence[str], out: str, *, smooth: int = 20) -> str:
    """Draw the curves of the runs (or multi-seed experiments) in ``log_dirs`` to ``out`` (format from its
    extension, e.g. ``.png``); returns ``out``.

    Args:
        log_dirs: run directories, each holding a ``metrics.jsonl``, or experiment directories of
            ``parl train --seeds`` holding ``seed_<n>`` runs.
        out: the image to write (its directory is created).
        smooth: episodes in the moving average of training returns (1: none).

    Raises:
        ValueError: no run given, ``smooth`` is not an integer >= 1, a directory has no
            ``metrics.jsonl`` (nor seed runs), a line of one is not JSON, or a run has no episode rows.
    """
    smooth = check_int("smooth", smooth, 1)
    if isinstance(log_dirs, str) or not log_dirs:
        raise ValueError(f"plot_curves needs a list of run directories, got {log_dirs!r}")
    experiments = [read_experiment(d) for d in log_dirs]

    from matplotlib.backends.backend_agg import FigureCanvasAgg  # imported here: slow, and only plots need it
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9, 7))
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(PANELS), 1, sharex=True)
    for ax, (tag, title) in zip(axes, PANELS):
        ax.set_title(title)
        ax.set_ylabel("return")
        ax.grid(alpha=0.3)
        drawn = False
        for index, experiment in enumerate(experiments):
            color = f"C{index % 10}"
            if tag == "episode/reward":
                drawn |= _draw_training(ax, experiment, color, smooth)
            else:
                drawn |= _draw_evaluations(ax, experiment, color)
        targets = sorted({e.target for e in experiments if e.target is not None})
        for target in targets:
            ax.axhline(target, color="black", linestyle="--", linewidth=1.0, label=f"target {target:g}")
        if tag == "eval/mean_return" and drawn:
            for _, marker, label in EVAL_KINDS:
                ax.plot([], [], linestyle="none", marker=marker, color="gray", label=label)
        if drawn:
            ax.legend(loc="best", fontsize="small")
        else:
            ax.text(0.5, 0.5, f"no {tag} rows", transform=ax.transAxes, ha="center", va="center", color="gray")
    axes[-1].set_xlabel("env steps")
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    figure.savefig(out, dpi=100)
    return out


def _draw_training(ax: Any, experiment: Experiment, color: str, smooth: int) -> bool:
    """One run's episodes and moving average, or the seeds' mean moving average with its band."""
    runs = experiment.runs
    if len(runs) == 1:
        steps, values = runs[0].curves["episode/reward"]
        ax.plot(steps, values, color=color, alpha=0.2, linewidth=0.8)
        ax.plot(steps, moving_average(values, smooth), color=color, linewidth=2.0, label=experiment.label)
        return True
    averages = [(s, moving_average(v, smooth)) for s, v in (run.curves["episode/reward"] for run in runs)]
    for steps, average in averages:
        ax.plot(steps, average, color=color, alpha=0.25, linewidth=0.7)
    grid, center, low, high, count = mean_band(averages)
    label = f"{experiment.label}: mean of {len(runs)} seeds, 95% bootstrap interval"
    ax.plot(grid, np.where(count == len(runs), center, np.nan), color=color, linewidth=2.0, label=label)
    if (count < len(runs)).any():
        fewer = np.where(count < len(runs), center, np.nan)
        ax.plot(grid, fewer, color=color, linewidth=1.5, linestyle=":", label="mean of the seeds still running")
    ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)
    return True


def _draw_evaluations(ax: Any, experiment: Experiment, color: str) -> bool:
    """Each run's evaluation means, a line with a marker per kind."""
    drawn = False
    for number, run in enumerate(experiment.runs):
        if "eval/mean_return" not in run.curves:
            continue
        steps, values = run.curves["eval/mean_return"]
        kinds = evaluation_kinds(run.curves["eval/episodes"][1], run.eval_episodes)
        label = experiment.label if number == 0 or not drawn else None
        ax.plot(steps, values, color=color, linewidth=2.0 if len(experiment.runs) == 1 else 0.8, label=label)
        for kind, marker, _ in EVAL_KINDS:
            chosen = kinds == kind
            if chosen.any():
                ax.plot(steps[chosen], values[chosen], linestyle="none", marker=marker, color=color, markersize=5)
        drawn = True
    return drawn


def evaluation_kinds(episodes: np.ndarray, configured: Optional[int]) -> np.ndarray:
    """The kind of each evaluation (:data:`EVAL_KINDS`) from the episodes it played: ``check`` for one
    episode (when evaluations have more), ``confirmed`` for more than the config's ``evaluation.episodes``,
    else ``full``."""
    episodes = np.asarray(episodes, dtype=np.float64)
    kinds = np.full(episodes.shape, "full", dtype=object)
    if configured is None or configured > 1:
        kinds[episodes == 1] = "check"
    if configured is not None:
        kinds[episodes > configured] = "confirmed"
    return kinds


def mean_band(curves: Sequence[Series]) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The mean of ``curves`` on a common grid of env steps and its 95% percentile-bootstrap interval
    over the curves: ``(grid, mean, low, high, count)``. At each step only the ``count`` curves whose
    run reached it count (each is interpolated between its first and last point); where none does, NaN."""
    end = max(float(steps[-1]) for steps, _ in curves)
    start = min(float(steps[0]) for steps, _ in curves)
    grid = np.linspace(start, end, GRID_POINTS)
    values = np.full((GRID_POINTS, len(curves)), np.nan)
    for column, (steps, curve) in enumerate(curves):
        inside = (grid >= steps[0]) & (grid <= steps[-1])
        values[inside, column] = np.interp(grid[inside], steps, curve)
    center, low, high = (np.full(GRID_POINTS, np.nan) for _ in range(3))
    for row, point in enumerate(values):
        present = point[~np.isnan(point)]
        if present.size:
            center[row] = present.mean()
            low[row], high[row] = bootstrap_interval(present, mean, samples=BAND_SAMPLES, seed=row)
    return grid, center, low, high, (~np.isnan(values)).sum(axis=1)


def read_experiment(log_dir: str) -> Experiment:
    """The run in ``log_dir``, or the seed runs of a ``parl train --seeds`` experiment there.

    Raises:
        ValueError: as :func:`read_curves`, for ``log_dir`` or any of its seed runs.
    """
    label = os.path.basename(os.path.normpath(os.path.abspath(log_dir)))
    seed_dirs = None if os.path.isfile(os.path.join(log_dir, METRICS_FILE)) else found_seed_dirs(log_dir)
    directories = list(seed_dirs.values()) if seed_dirs else [log_dir]
    return Experiment(label, [Run(read_curves(d), *_run_settings(d)) for d in directories])


def read_curves(log_dir: str) -> Dict[str, Series]:
    """The rows of ``<log_dir>/metrics.jsonl`` holding each tag of :data:`PANELS` (null values skipped),
    sorted by step; with ``eval/mean_return``, ``eval/episodes``: the episodes of each of those
    evaluations (NaN where a row lacks it).

    A last line cut short (a run still writing) is ignored.

    Raises:
        ValueError: no ``metrics.jsonl``, a line that is not a JSON object, or no ``episode/reward`` row.
    """
    path = os.path.join(log_dir, METRICS_FILE)
    if not os.path.isfile(path):
        raise ValueError(f"{log_dir}: no {METRICS_FILE} (is it the log_dir of a parl run?)")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    points: Dict[str, List[Tuple[float, float]]] = {tag: [] for tag, _ in PANELS}
    points["eval/episodes"] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                continue
            raise ValueError(f"{path}, line {number}: not JSON: {line[:80]!r}") from None
        if not isinstance(row, dict) or "step" not in row:
            raise ValueError(f"{path}, line {number}: expected an object with a 'step', got {line[:80]!r}")
        for tag, _ in PANELS:
            value = row.get(tag)
            if _is_number(value):
                points[tag].append((float(row["step"]), float(value)))
                if tag == "eval/mean_return":
                    episodes = row.get("eval/episodes")
                    points["eval/episodes"].append((float(row["step"]), episodes if _is_number(episodes) else np.nan))
    if not points["episode/reward"]:
        raise ValueError(f"{path}: no episode/reward rows yet, nothing to plot")
    curves: Dict[str, Series] = {}
    for tag, values in points.items():
        if values:
            array = np.array(sorted(values, key=lambda point: point[0]), dtype=np.float64)  # stable for equal steps
            curves[tag] = (array[:, 0], array[:, 1])
    return curves


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of each value and the ``window - 1`` before it (fewer at the start)."""
    sums = np.cumsum(np.insert(np.asarray(values, dtype=np.float64), 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def _run_settings(log_dir: str) -> Tuple[Optional[float], Optional[int]]:
    """``train.target_return`` and ``evaluation.episodes`` of the run's ``config.yaml`` (None: not there)."""
    path = os.path.join(log_dir, "config.yaml")
    if not os.path.isfile(path):
        return None, None
    with open(path, encoding="utf-8") as f:
        config = yaml.safe_load(f) or {}
    target = (config.get("train") or {}).get("target_return")
    episodes = (config.get("evaluation") or {}).get("episodes")
    return (float(target) if _is_number(target) else None), (int(episodes) if _is_number(episodes) else None)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
