"""Checks of the numbers given to ``parl``'s multi-run options (``--jobs``, ``--samples``,
``--max-concurrent``, ``--trial-cpus``): a bad one is a :class:`ConfigError`, one line naming the
option and the value, which ``parl`` reports with exit status 2.

    jobs = check_count("--jobs", args.jobs)               # 0 -> ConfigError: --jobs must be an integer >= 1, got 0
    cpus = check_cpus("--trial-cpus", args.trial_cpus)    # nan, inf, -1 -> ConfigError
"""

from __future__ import annotations

import math
import numbers
from typing import Optional

from parl.experiment.config.class_spec import ConfigError
from parl.validation import ParameterError, check_int


def check_count(name: str, value: object, minimum: int = 1, maximum: Optional[int] = None) -> int:
    """``value`` as an integer in [minimum, maximum] (no upper bound when ``maximum`` is None).

    Raises:
        ConfigError: ``<name> must be an integer >= 1, got 0``.
    """
    try:
        return check_int(name, value, minimum, maximum)
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None


def check_cpus(name: str, value: object) -> float:
    """``value`` as a finite number of CPUs >= 0.

    Raises:
        ConfigError: ``<name> must be a number of CPUs >= 0, got nan``.
    """
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not (0 <= float(value) and math.isfinite(value))
    ):
        raise ConfigError(str(ParameterError(name, "a number of CPUs >= 0", value)))
    return float(value)
