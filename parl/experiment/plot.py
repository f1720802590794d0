"""Learning curves of runs, read from their ``metrics.jsonl``, drawn to an image file.

    plot_curves(["runs/ppo_seed0", "runs/ppo_seed1"], "curves.png")

Two panels against env steps: training episode returns (each episode faint, a
moving average bold) and the mean return of evaluations; one colour per run,
labelled by its directory name. Behind ``parl plot``. Drawn with matplotlib's
Agg canvas, so no display is needed and the process's pyplot backend is left
alone.
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, Sequence, Tuple

import numpy as np

from parl.experiment.metrics import METRICS_FILE
from parl.validation import check_int

#: The tags drawn, one panel each: (tag, panel title).
PANELS = (("episode/reward", "training episodes"), ("eval/mean_return", "evaluations"))

Series = Tuple[np.ndarray, np.ndarray]  # env steps, values


def plot_curves(log_dirs: Sequence[str], out: str, *, smooth: int = 20) -> str:
    """Draw the curves of the runs in ``log_dirs`` to ``out`` (format from its extension, e.g. ``.png``);
    returns ``out``.

    Args:
        log_dirs: run directories, each holding a ``metrics.jsonl``.
        out: the image to write (its directory is created).
        smooth: episodes in the moving average of training returns (1: none).

    Raises:
        ValueError: no run given, ``smooth`` is not an integer >= 1, a directory has no
            ``metrics.jsonl``, a line of one is not JSON, or a run has no episode rows.
    """
    smooth = check_int("smooth", smooth, 1)
    if isinstance(log_dirs, str) or not log_dirs:
        raise ValueError(f"plot_curves needs a list of run directories, got {log_dirs!r}")
    runs = [(_label(d), read_curves(d)) for d in log_dirs]

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
        for index, (label, curves) in enumerate(runs):
            if tag not in curves:
                continue
            steps, values = curves[tag]
            color = f"C{index % 10}"
            if tag == "episode/reward":
                ax.plot(steps, values, color=color, alpha=0.2, linewidth=0.8)
                ax.plot(steps, moving_average(values, smooth), color=color, linewidth=2.0, label=label)
            else:
                ax.plot(steps, values, color=color, linewidth=2.0, marker="o", markersize=3, label=label)
            drawn = True
        if drawn:
            ax.legend(loc="best", fontsize="small")
        else:
            ax.text(0.5, 0.5, f"no {tag} rows", transform=ax.transAxes, ha="center", va="center", color="gray")
    axes[-1].set_xlabel("env steps")
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    figure.savefig(out, dpi=100)
    return out


def read_curves(log_dir: str) -> Dict[str, Series]:
    """The rows of ``<log_dir>/metrics.jsonl`` holding each tag of :data:`PANELS` (null values skipped),
    sorted by step.

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
        for tag, values in points.items():
            value = row.get(tag)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.append((float(row["step"]), float(value)))
    if not points["episode/reward"]:
        raise ValueError(f"{path}: no episode/reward rows yet, nothing to plot")
    curves: Dict[str, Series] = {}
    for tag, values in points.items():
        if values:
            array = np.array(sorted(values, key=lambda point: point[0]))  # stable: equal steps keep their order
            curves[tag] = (array[:, 0], array[:, 1])
    return curves


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of each value and the ``window - 1`` before it (fewer at the start)."""
    sums = np.cumsum(np.insert(np.asarray(values, dtype=np.float64), 0, 0.0))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


def _label(log_dir: str) -> str:
    return os.path.basename(os.path.normpath(os.path.abspath(log_dir)))
