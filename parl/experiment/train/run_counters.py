"""The counters a training run keeps in its checkpoints (``robot.json``'s ``counters``), checked
before a resumed run takes them up, so a damaged one is skipped as any damaged checkpoint is.

    checkpoints.load_latest(tasks, check_counters=lambda c: check_run_counters(c, manager.agents))
    best.load_latest(evaluators, check_counters=check_best_counters)

Each check raises ValueError with one line naming the counter and its value.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence, cast

from parl.core.agent import Agent
from parl.validation import short_repr

if TYPE_CHECKING:
    from typing import TypeGuard  # Python 3.10+; annotations only

#: The largest count taken up (2**53: every integer up to it is exact as a float); beyond it a
#: count is damage, not a run.
MAX_COUNT = 2**53
#: The longest training time taken up, in seconds (about 30 years).
MAX_SECONDS = 1e9
#: The counters of the run itself that Trainer writes in every checkpoint.
RUN_COUNTS = ("step", "env_steps", "episodes", "finished_steps")


def check_run_counters(counters: Mapping[str, object], agents: Sequence[Agent]) -> None:
    """``counters`` are what the trainer saves for a robot of ``agents``: :data:`RUN_COUNTS` and each
    agent's and helper's counters integers in [0, :data:`MAX_COUNT`] (every counter the agent or
    helper keeps present), ``elapsed_seconds`` a number in [0, :data:`MAX_SECONDS`], an
    ``evaluation_baseline`` (when present) None or a finite number, one entry per agent.

    Raises:
        ValueError: a counter missing, of the wrong type or out of range; one line naming it.
    """
    for name in RUN_COUNTS:
        _count(name, counters.get(name, _MISSING))
    seconds = counters.get("elapsed_seconds", _MISSING)
    if not _is_number(seconds) or not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(
            f"elapsed_seconds is {short_repr(seconds)}, expected a number of seconds in [0, {MAX_SECONDS:g}]"
        )
    baseline = counters.get("evaluation_baseline")
    if baseline is not None and (not _is_number(baseline) or not math.isfinite(baseline)):
        raise ValueError(f"evaluation_baseline is {short_repr(baseline)}, expected None or a finite number")
    saved_agents, saved_helpers = counters.get("agents", _MISSING), counters.get("helpers", _MISSING)
    for name, saved in (("agents", saved_agents), ("helpers", saved_helpers)):
        if not isinstance(saved, list) or len(saved) != len(agents):
            raise ValueError(
                f"{name} is {short_repr(saved)}, expected a list of {len(agents)} (one per agent of the config)"
            )
    checked = zip(agents, cast(list, saved_agents), cast(list, saved_helpers))  # lists, as just checked
    for index, (agent, agent_counters, helper_counters) in enumerate(checked):
        _check_kept(f"agents[{index}]", agent_counters, agent.counters())
        if not isinstance(helper_counters, Mapping):
            raise ValueError(f"helpers[{index}] is {short_repr(helper_counters)}, expected a mapping by helper name")
        for name, helper in agent.helpers.items():
            _check_kept(f"helpers[{index}].{name}", helper_counters.get(name, {}), helper.counters())


def check_best_counters(counters: Mapping[str, object]) -> None:
    """``counters`` are those of a best checkpoint: ``env_steps`` an integer in [0, :data:`MAX_COUNT`],
    ``eval_mean_return`` a finite number, ``eval_episodes`` an integer >= 1 and ``passed`` a bool.

    Raises:
        ValueError: a counter missing, of the wrong type or out of range; one line naming it.
    """
    _count("env_steps", counters.get("env_steps", _MISSING))
    if _count("eval_episodes", counters.get("eval_episodes", _MISSING)) < 1:
        raise ValueError(f"eval_episodes is {counters['eval_episodes']}, expected an integer >= 1")
    mean = counters.get("eval_mean_return", _MISSING)
    if not _is_number(mean) or not math.isfinite(mean):
        raise ValueError(f"eval_mean_return is {short_repr(mean)}, expected a finite number")
    if not isinstance(counters.get("passed"), bool):
        raise ValueError(f"passed is {short_repr(counters.get('passed', _MISSING))}, expected true or false")


class _Missing:
    def __repr__(self) -> str:
        return "missing"


_MISSING = _Missing()


def _check_kept(where: str, saved: object, kept: Mapping[str, object]) -> None:
    """``saved`` maps names to counts, among them every name of ``kept`` (what the agent or helper
    keeps now)."""
    if not isinstance(saved, Mapping):
        raise ValueError(f"{where} is {short_repr(saved)}, expected a mapping of counter names to integers")
    for name in kept:
        if name not in saved:
            raise ValueError(f"{where} lacks counter {name!r} (has {short_repr(sorted(map(str, saved)))})")
    for name, value in saved.items():
        _count(f"{where}.{name}", value)


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{name} is {short_repr(value)}, expected an integer in [0, {MAX_COUNT}]")
    return value


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
