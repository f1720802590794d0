"""Figures over seeds as rliable reports them: the interquartile mean and percentile-bootstrap intervals.

    iqm = interquartile_mean(np.array([480.0, 500.0, 500.0, 120.0, 500.0]))   # 493.3: the middle three
    low, high = bootstrap_interval(returns, interquartile_mean)               # 95% over resampled seeds

Agarwal, Schwarzer, Castro, Courville and Bellemare (2021), "Deep Reinforcement Learning at the Edge of
the Statistical Precipice": with few runs, report the interquartile mean (robust to an outlying seed,
less noisy than the median) with a confidence interval from a bootstrap over runs. With runs of one
task, their stratified bootstrap (runs resampled within each task) is the plain bootstrap over runs
done here. The figures are scipy's: ``scipy.stats.trim_mean`` and ``scipy.stats.bootstrap`` (percentile
method), imported on first use.
"""

from __future__ import annotations

from typing import Callable, Tuple

import numpy as np

#: A statistic over the last axis of an array: ``(..., runs) -> (...)``.
Statistic = Callable[[np.ndarray], np.ndarray]


def interquartile_mean(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis of the values left when the lowest and highest quarter are cut:
    ``int(0.25 * n)`` runs from each end (``scipy.stats.trim_mean(values, 0.25)``, as rliable does)."""
    from scipy.stats import trim_mean

    return np.asarray(trim_mean(np.asarray(values, dtype=np.float64), 0.25, axis=-1))


def mean(values: np.ndarray) -> np.ndarray:
    """The mean over the last axis."""
    return np.asarray(values, dtype=np.float64).mean(axis=-1)


def bootstrap_interval(
    values: np.ndarray,
    statistic: Statistic,
    *,
    confidence: float = 0.95,
    samples: int = 10_000,
    seed: int = 0,
) -> Tuple[np.ndarray, np.ndarray]:
    """The percentile-bootstrap interval of ``statistic`` over the runs of ``values`` (the last axis):
    ``scipy.stats.bootstrap`` with ``samples`` resamplings of the runs, the same ones for every leading
    index. One run gives the interval ``[value, value]``. ``seed`` makes the interval repeatable.

    Raises:
        ValueError: no runs, or ``confidence`` not in (0, 1).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 0 or values.shape[-1] == 0:
        raise ValueError(f"bootstrap_interval needs at least one run, got shape {list(values.shape)}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if values.shape[-1] == 1:  # scipy refuses one sample; every resampling is that run
        value = statistic(values)
        return value, value
    from scipy.stats import bootstrap

    result = bootstrap(
        (values,),
        lambda resampled, axis: statistic(np.moveaxis(resampled, axis, -1)),
        n_resamples=samples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        axis=-1,
        rng=np.random.default_rng(seed),
    )
    return result.confidence_interval.low, result.confidence_interval.high
