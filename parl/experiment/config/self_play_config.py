"""The ``self_play:`` block of a robot config: a learning task and the frozen task that plays against it.

    self_play: {learner: RL, opponent: opponent, every_updates: 20, snapshots: 5}

It becomes :class:`parl.SelfPlay` (:mod:`parl.serving.self_play`). The config is checked where it is
loaded: both tasks exist, they differ, ``every_updates`` and ``snapshots`` are at least 1, ``pool``
is ``recent`` or ``history``, and the opponent's ``helper`` never learns
(:class:`parl.PredictOnlyHelper`); a problem is one line naming the key
(``self_play.opponent: unknown task 'B'; tasks are ['A', 'RL']``).
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, PositiveInt

import parl
from parl.experiment.config.class_spec import ConfigError, one_line
from parl.serving.self_play import check_self_play


class SelfPlayConfig(BaseModel):
    """``self_play``: the fields of :class:`parl.SelfPlay` (its ``seed`` is the run's)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    learner: str
    opponent: str
    every_updates: PositiveInt = 1
    snapshots: PositiveInt = 1
    pool: str = "recent"

    def settings(self, seed: int) -> parl.SelfPlay:
        """The :class:`parl.SelfPlay` of this block, its draws seeded by ``seed``."""
        return parl.SelfPlay(
            learner=self.learner,
            opponent=self.opponent,
            every_updates=self.every_updates,
            snapshots=self.snapshots,
            pool=self.pool,
            seed=seed,
        )


def check_self_play_config(block: SelfPlayConfig, tasks: Mapping[str, Any]) -> None:
    """Check ``block`` against the config's tasks (``tasks.<name>`` sections, with their ``helper``).

    Raises:
        ConfigError: as the module docstring says.
    """
    try:
        check_self_play([block.settings(0)], list(tasks))
    except ValueError as exc:
        raise ConfigError(one_line(exc)) from None
    helper = tasks[block.opponent].helper
    if getattr(helper.cls, "learns", True):
        raise ConfigError(
            f"tasks.{block.opponent}.helper: task {block.opponent!r} is the self-play opponent, which never learns; "
            f"expected parl.PredictOnlyHelper, got {helper.import_path}"
        )
