"""Data transforms a ComputationTask applies identically when acting and learning.

    normalizer = InputNormalizer(["obs"], clip=10.0)
    normalizer.update(batch_inputs)                 # running statistics from acting batches
    inputs = normalizer(batch_inputs)               # (x - mean) / std, clipped
    rewards = RewardTransform(scale=0.1, clip=None)(batch_rewards)

The normalizer's statistics are shared by every agent of a task (they are
updated from the task's prediction batches) and are saved in its checkpoints.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Sequence

import numpy as np

from parl.core.running_stats import RunningMeanStd
from parl.validation import check_positive

ArrayDict = Dict[str, np.ndarray]

__all__ = ["RunningMeanStd", "InputNormalizer", "RewardTransform"]


class InputNormalizer:
    """Normalizes the named float inputs by running mean and std; other inputs pass through.

    Args:
        shapes: input name -> per-sample shape, for each input to normalize.
        clip: normalized values are clipped to [-clip, clip].
        epsilon: added to the variance before the square root.
    """

    def __init__(self, shapes: Mapping[str, Sequence[int]], *, clip: float = 10.0, epsilon: float = 1e-8) -> None:
        self.clip = check_positive("clip", clip)
        self.epsilon = check_positive("epsilon", epsilon)
        self.stats = {name: RunningMeanStd(shape) for name, shape in shapes.items()}
        self._shapes = {name: tuple(shape) for name, shape in shapes.items()}
        self._cache: Optional[Dict[str, tuple]] = None
        #: Statistics of the batches since the last :meth:`take_changes` (None: not tracked).
        self._changes: Optional[Dict[str, RunningMeanStd]] = None

    def update(self, inputs: Mapping[str, np.ndarray]) -> None:
        """Fold one batch of inputs into the statistics."""
        for name, stats in self.stats.items():
            stats.update(inputs[name])
        if self._changes is not None:
            for name, changes in self._changes.items():
                changes.update(inputs[name])
        self._cache = None

    def take_changes(self) -> Dict[str, Dict[str, np.ndarray]]:
        """Statistics of the batches folded in since the last call (the first call starts tracking
        them and returns none): what a copy acting elsewhere sends its learner to :meth:`merge`."""
        changes = self._changes or {}
        self._changes = {name: RunningMeanStd(shape) for name, shape in self._shapes.items()}
        return {name: s.state_dict() for name, s in changes.items() if s.count > 0}

    def merge(self, changes: Mapping[str, Mapping[str, np.ndarray]]) -> None:
        """Fold in another copy's :meth:`take_changes`.

        Raises:
            ValueError: ``changes`` names an input this normalizer does not normalize.
        """
        unknown = sorted(set(changes) - set(self.stats))
        if unknown:
            raise ValueError(f"normalizer changes for inputs {unknown}, expected some of {sorted(self.stats)}")
        for name, state in changes.items():
            stats = self.stats[name]
            mean, var = np.asarray(state["mean"], np.float64), np.asarray(state["var"], np.float64)
            if mean.shape != stats.mean.shape or var.shape != stats.mean.shape:
                raise ValueError(
                    f"normalizer changes of {name!r} have shape {list(mean.shape)}, expected {list(stats.mean.shape)}"
                )
            stats.merge(mean, var, float(np.asarray(state["count"]).reshape(-1)[0]))
        self._cache = None

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> ArrayDict:
        """Normalized copy of ``inputs`` (float32)."""
        cache = self._cache
        if cache is None:
            cache = {
                name: (s.mean.astype(np.float32), (1.0 / np.sqrt(s.var + self.epsilon)).astype(np.float32))
                for name, s in self.stats.items()
            }
            self._cache = cache
        out = dict(inputs)
        for name, (mean, inv_std) in cache.items():
            out[name] = np.clip((inputs[name] - mean) * inv_std, -self.clip, self.clip).astype(np.float32)
        return out

    def state_dict(self) -> Dict[str, Dict[str, np.ndarray]]:
        """Statistics of every normalized input."""
        return {name: s.state_dict() for name, s in self.stats.items()}

    def check_state_dict(self, state: Mapping[str, Mapping[str, np.ndarray]]) -> None:
        """Raise the ValueError :meth:`set_state_dict` would raise for ``state``, changing nothing."""
        if set(state) != set(self.stats):
            raise ValueError(f"normalizer statistics are for inputs {sorted(state)}, expected {sorted(self.stats)}")
        for name, stats in self.stats.items():
            try:
                stats.check_state_dict(state[name])
            except ValueError as exc:
                raise ValueError(f"input {name!r}: {exc}") from None

    def set_state_dict(self, state: Mapping[str, Mapping[str, np.ndarray]]) -> None:
        """Restore :meth:`state_dict` output: every input's statistics, or (ValueError) none."""
        self.check_state_dict(state)
        for name, stats in self.stats.items():
            stats.set_state_dict(state[name])
        self._cache = None


class RewardTransform:
    """Multiplies rewards by ``scale``, then clips them to [-clip, clip] when ``clip`` is set."""

    def __init__(self, *, scale: float = 1.0, clip: Optional[float] = None) -> None:
        self.scale = check_positive("reward_scale", scale)
        self.clip = None if clip is None else check_positive("reward_clip", clip)

    @property
    def identity(self) -> bool:
        """Whether the transform leaves rewards unchanged."""
        return self.scale == 1.0 and self.clip is None

    def __call__(self, rewards: Mapping[str, np.ndarray]) -> ArrayDict:
        out = {}
        for name, r in rewards.items():
            r = r * np.float32(self.scale)
            if self.clip is not None:
                r = np.clip(r, -self.clip, self.clip)
            out[name] = r.astype(np.float32, copy=False)
        return out
