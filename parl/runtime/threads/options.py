"""ThreadsOptions: the options of placement ``"threads"`` (none)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThreadsOptions:
    """Placement ``"threads"``: one OS thread per agent; it takes no options."""
