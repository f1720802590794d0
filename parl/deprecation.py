"""The one way parl says that a name is deprecated: a ``DeprecationWarning`` that names the new one.

    warn_deprecated("parl.utils.train_agents", "parl.experiment.trainer.Trainer")
    # DeprecationWarning: parl.utils.train_agents is deprecated since parl 0.2.0 and will be
    # removed in parl 0.3.0; use parl.experiment.trainer.Trainer

A name that moves or is renamed keeps working for at least one minor version (docs/api.md lists
every deprecated name with its replacement). This module imports nothing of parl, so any layer
may import it, and no layer imports it before a deprecated name is used.
"""

from __future__ import annotations

import warnings

#: The version that deprecated the names of docs/api.md's table.
SINCE = "0.2.0"
#: The first version without them: one minor version after :data:`SINCE`.
REMOVED_IN = "0.3.0"


def deprecation_message(old: str, new: str, *, since: str = SINCE, removed_in: str = REMOVED_IN) -> str:
    """``<old> is deprecated since parl <since> and will be removed in parl <removed_in>; use <new>``."""
    return f"{old} is deprecated since parl {since} and will be removed in parl {removed_in}; use {new}"


def warn_deprecated(
    old: str, new: str, *, stacklevel: int = 2, since: str = SINCE, removed_in: str = REMOVED_IN
) -> None:
    """Emit a ``DeprecationWarning`` for ``old``, naming ``new``; ``stacklevel`` as
    :func:`warnings.warn`'s, counted from the caller of this function (2: the caller's caller)."""
    message = deprecation_message(old, new, since=since, removed_in=removed_in)
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel + 1)
