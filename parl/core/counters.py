"""Counters: the integers an Agent or AgentHelper carries across a checkpoint.

    saved = agent.counters()              # {"episode": 12, "total_steps": 3400}
    ...                                   # later, in a fresh process
    agent.restore_counters(saved)         # schedules and seeding go on where they stopped

Counters are what a resumed run needs to continue its schedules (epsilon,
importance-weight annealing) and to tell a first episode from a later one;
they are plain ints, so checkpoints store them as JSON.
"""

from __future__ import annotations

from typing import Mapping

from parl.validation import check_int


def read_counter(counters: Mapping[str, object], name: str, owner: str) -> int:
    """``counters[name]`` as an int >= 0.

    Raises:
        ValueError: ``counters`` is not a mapping, lacks ``name``, or holds something other than
            an integer >= 0 there; the message names ``owner`` and the counter.
    """
    if not isinstance(counters, Mapping):
        raise ValueError(f"{owner} counters must be a mapping of names to integers, got {type(counters).__name__}")
    if name not in counters:
        raise ValueError(f"{owner} counters: missing {name!r}, got {sorted(counters)}")
    return check_int(f"{owner} counter {name!r}", counters[name], 0)
