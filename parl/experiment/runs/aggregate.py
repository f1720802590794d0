"""The figures of a multi-seed experiment: each seed's final and best return, their mean and
interquartile mean with 95% bootstrap intervals, in ``<log_dir>/aggregate.json`` and a table.

    summary = aggregate_runs("runs/ppo_cartpole")      # reads runs/ppo_cartpole/seed_*/result.json
    print(summary_table(summary))
    write_aggregate("runs/ppo_cartpole", summary)

A seed's **final** return is its run's ``final_eval`` (the policy of the evaluation that passed,
else of the best one, over ``evaluation.final_episodes`` episodes on fresh seeds); its **best** is
``best_eval``, the best evaluation's mean return during training (docs/experiments.md). Seeds
without a result (a run that failed or is still running) and seeds whose run never started are
listed apart, and a seed whose figure is NaN (no evaluation ran) is left out of that figure's
statistics.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from parl.experiment.runs.seed_runs import RESULT_FILE, found_seed_dirs
from parl.experiment.runs.statistics import bootstrap_interval, interquartile_mean, mean
from parl.experiment.train.metrics import finite_or_none

#: The experiment's figures, in its log dir.
AGGREGATE_FILE = "aggregate.json"
CONFIDENCE = 0.95
BOOTSTRAP_SAMPLES = 10_000
#: The figures summed up over seeds: (key in aggregate.json, the run's result key).
FIGURES = (("final_return", "final_eval"), ("best_return", "best_eval"))
#: What each run contributes to the per-seed table of aggregate.json.
RUN_KEYS = ("stop_reason", "reached", "env_steps", "train_seconds", "best_eval", "final_eval")


def figure_statistics(values: Sequence[float]) -> Dict[str, Any]:
    """``n``, ``mean``, ``mean_ci``, ``iqm``, ``iqm_ci``, ``min``, ``max`` of the finite ``values`` (the
    intervals: :data:`CONFIDENCE` percentile bootstrap over them); None figures when none is finite."""
    finite = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if finite.size == 0:
        return {"n": 0, "mean": None, "mean_ci": None, "iqm": None, "iqm_ci": None, "min": None, "max": None}
    out: Dict[str, Any] = {"n": int(finite.size)}
    for name, statistic in (("mean", mean), ("iqm", interquartile_mean)):
        low, high = bootstrap_interval(finite, statistic, confidence=CONFIDENCE, samples=BOOTSTRAP_SAMPLES)
        out[name] = float(statistic(finite))
        out[f"{name}_ci"] = [float(low), float(high)]
    out["min"], out["max"] = float(finite.min()), float(finite.max())
    return out


def aggregate_runs(
    log_dir: str, seeds: Optional[Sequence[int]] = None, not_started: Sequence[int] = ()
) -> Dict[str, Any]:
    """The figures of the seed runs under ``log_dir`` (those of ``seeds``, or every ``seed_<n>`` there);
    ``not_started`` lists seeds of the experiment whose run never started (a signal came first),
    whose directories are not read.

    Raises:
        ValueError: ``log_dir`` holds no seed run and no ``seeds`` were named.
    """
    found = found_seed_dirs(log_dir) or {}
    if seeds is None:
        if not found:
            raise ValueError(f"{log_dir}: no seed_<n> run directories (is it a parl train --seeds log dir?)")
        seeds = list(found)
    runs: List[Dict[str, Any]] = []
    missing: List[int] = []
    for seed in seeds:
        result = _read_result(os.path.join(log_dir, f"seed_{seed}"))
        if result is None:
            missing.append(seed)
        else:
            runs.append({"seed": seed, **{key: finite_or_none(result.get(key)) for key in RUN_KEYS}})
    summary: Dict[str, Any] = {
        "log_dir": log_dir,
        "seeds": list(seeds),
        "runs": runs,
        "missing": missing,
        "not_started": list(not_started),
        "reached": sum(bool(run["reached"]) for run in runs),
        "confidence": CONFIDENCE,
        "bootstrap_samples": BOOTSTRAP_SAMPLES,
    }
    for figure, key in FIGURES:
        summary[figure] = figure_statistics([run[key] for run in runs])
    return summary


def write_aggregate(log_dir: str, summary: Mapping[str, Any]) -> str:
    """Write ``summary`` to ``<log_dir>/aggregate.json`` (NaN as null); returns its path."""
    path = os.path.join(log_dir, AGGREGATE_FILE)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, allow_nan=False)
    os.replace(tmp, path)
    return path


def summary_table(summary: Mapping[str, Any]) -> str:
    """The per-seed table and the figures with their intervals, as ``parl train --seeds`` prints them."""
    lines = [f"{'seed':>6}  {'stop':<28} {'env steps':>10} {'best eval':>10} {'final eval':>11}"]
    for run in summary["runs"]:
        lines.append(
            f"{run['seed']:>6}  {str(run['stop_reason']):<28} {run['env_steps']:>10,} "
            f"{_number(run['best_eval']):>10} {_number(run['final_eval']):>11}"
        )
    for seed in summary["missing"]:
        lines.append(f"{seed:>6}  no result (the run failed or did not end)")
    for seed in summary.get("not_started", ()):
        lines.append(f"{seed:>6}  not started (the experiment was stopped first)")
    percent = f"{100 * summary['confidence']:.0f}%"
    lines.append(f"target reached: {summary['reached']}/{len(summary['runs'])} seeds")
    for figure, label in (("final_return", "final return"), ("best_return", "best eval")):
        stats = summary[figure]
        if not stats["n"]:
            lines.append(f"{label}: no seed has one")
            continue
        lines.append(
            f"{label}: mean {_number(stats['mean'])} [{_interval(stats['mean_ci'])}], "
            f"IQM {_number(stats['iqm'])} [{_interval(stats['iqm_ci'])}] "
            f"({percent} bootstrap intervals over {stats['n']} seeds)"
        )
    return "\n".join(lines)


def _read_result(run_dir: str) -> Optional[Dict[str, Any]]:
    path = os.path.join(run_dir, RESULT_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)  # the Trainer writes NaN as NaN, which Python's json reads


def _number(value: Optional[float]) -> str:
    return "nan" if value is None else f"{value:.1f}"


def _interval(interval: Sequence[float]) -> str:
    return f"{interval[0]:.1f}, {interval[1]:.1f}"
