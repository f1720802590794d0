"""Target networks: built lazily like every model, synced hard or by Polyak averaging."""

from __future__ import annotations

from typing import List, Tuple

from parl.core.model import Model
from parl.validation import check_int, check_range


class TargetSync:
    """Keeps target models in step with online ones.

    Call :meth:`initialize` in ``learn`` after the online models' forward pass and
    before the targets are used; call :meth:`after_update` from
    ``Algorithm.after_update``.

    Args:
        pairs: ``(online, target)`` models built by the same model function.
        tau: fraction of the online weights blended into each target per sync (1.0: hard copy).
        interval: optimizer updates between syncs.
    """

    def __init__(self, pairs: List[Tuple[Model, Model]], *, tau: float, interval: int) -> None:
        self.pairs = pairs
        self.tau = check_range("tau", tau, 0.0, 1.0)
        if self.tau == 0.0:
            raise ValueError("tau must be in (0, 1], got 0.0 (the target would never change)")
        self.interval = check_int("target_update_interval", interval, 1)
        self._initialized = False

    def initialize(self) -> None:
        """Copy each online model into its target once, unless the target already holds values.

        A target restored from a checkpoint is built already and keeps its weights.
        """
        if self._initialized:
            return
        for online, target in self.pairs:
            if not all(layer.built for _, layer in target.named_layers()):
                online.sync_weights_to(target)
        self._initialized = True

    def after_update(self, update_step: int) -> None:
        """Sync every ``interval`` updates."""
        if update_step % self.interval == 0:
            for online, target in self.pairs:
                online.sync_weights_to(target, decay=1.0 - self.tau)
