"""Registers placement ``"cooperative"`` (loaded by :mod:`parl.runtime.registry` on its first look-up)."""

from parl.runtime import registry
from parl.runtime.cooperative.options import CooperativeOptions

registry.register(
    "cooperative",
    "parl.runtime.cooperative.runner:CooperativeRunner",
    options=CooperativeOptions,
    description="every agent a greenlet in one scheduler thread that batches their predictions",
)
