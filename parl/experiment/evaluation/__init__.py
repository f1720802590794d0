"""Evaluation, in one place: greedy returns of a task on fresh environments and the target check
(:mod:`.greedy`: ``evaluate``, ``confirmed_check``), the robot's own agents acting deterministically
(:mod:`.agents`: ``evaluate_agents``), when a run's evaluations start (:mod:`.start`), evaluation
apart from training (:mod:`.remote`) and videos (:mod:`.video`). The names of :mod:`.agents` and
:mod:`.greedy` are found here too, imported on first use."""

from parl.moved_names import forward_names

_agents = forward_names("parl.experiment.evaluation.agents")
_greedy = forward_names("parl.experiment.evaluation.greedy")


def __getattr__(name: str) -> object:
    try:
        return _agents(name)
    except AttributeError:
        return _greedy(name)
