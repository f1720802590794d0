"""Value normalization (Yu et al.'s ValueNorm in MAPPO; PopArt without its output-preserving step).

The critic learns value targets standardized by the running mean and standard deviation of every
target seen so far, and its outputs are turned back into returns wherever returns are computed:

    norm = ValueNormalizer()
    values = norm.denormalize(critic_output)         # returns' units: GAE, V-trace
    targets = norm.fit_and_normalize(returns)        # what the value loss compares the critic with

Targets that grow or drift over a run (returns of -100 early and -20 late, or thousands in MuJoCo)
then stay near zero mean and unit scale, so the critic's steps do not depend on the reward's units.
"""

from __future__ import annotations

from typing import Dict, Mapping

import numpy as np
import paddle

from parl.core.running_stats import RunningMeanStd

#: The smallest standard deviation targets are divided by (constant targets have none).
MIN_STD = 1e-4
#: The entries of :meth:`ValueNormalizer.state` (saved in checkpoints by the algorithm that owns it).
STATE_KEYS = ("value_mean", "value_var", "value_count")


class ValueNormalizer:
    """Running statistics of value targets; before the first batch it changes nothing (mean 0, std 1)."""

    def __init__(self) -> None:
        self.stats = RunningMeanStd(())

    @property
    def std(self) -> float:
        """The standard deviation targets are divided by."""
        return max(float(np.sqrt(self.stats.var)), MIN_STD)

    def denormalize(self, values: np.ndarray) -> np.ndarray:
        """Critic outputs (standardized) as returns; the same dtype as ``values``."""
        return (values * self.std + float(self.stats.mean)).astype(values.dtype, copy=False)

    def fit_and_normalize(self, returns: paddle.Tensor) -> paddle.Tensor:
        """Fold one batch of value targets into the statistics, then standardize them by the new ones."""
        array = returns.numpy()
        self.stats.update(array.reshape(-1))
        return paddle.to_tensor(((array - float(self.stats.mean)) / self.std).astype(array.dtype, copy=False))

    def state(self) -> Dict[str, object]:
        """The statistics as JSON scalars, under :data:`STATE_KEYS`."""
        stats = self.stats
        return dict(zip(STATE_KEYS, (float(stats.mean), float(stats.var), float(stats.count))))

    def set_state(self, state: Mapping[str, object]) -> None:
        """Restore :meth:`state` output.

        Raises:
            ValueError: an entry missing or not a finite number, a negative variance or count, each named.
        """
        values = [np.asarray(_number(state, key)) for key in STATE_KEYS]
        self.stats.set_state_dict(dict(zip(("mean", "var", "count"), values)))


def _number(state: Mapping[str, object], key: str) -> float:
    """``state[key]`` as a float, or a ValueError naming the key."""
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"value normalization state: {key} must be a number, got {value!r}")
    return float(value)
