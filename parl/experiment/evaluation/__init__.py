"""Evaluation, in one place: greedy returns of a task on fresh environments and the target check
(:mod:`.greedy`: ``evaluate``, ``confirmed_check``), the robot's own agents acting deterministically
(:mod:`.agents`: ``evaluate_agents``), evaluation apart from training (:mod:`.remote`) and videos
(:mod:`.video`). When a run's evaluations start is a setting of its config
(:mod:`parl.experiment.config.evaluation_start`). The names of :mod:`.agents` and :mod:`.greedy` are
found here too, imported on first use."""

from parl.moved_names import forward_names

__getattr__ = forward_names(["parl.experiment.evaluation.agents", "parl.experiment.evaluation.greedy"])
