"""CooperativeOptions: the options of placement ``"cooperative"`` (none)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CooperativeOptions:
    """Placement ``"cooperative"``: every agent a greenlet in one scheduler thread; it takes no options."""
