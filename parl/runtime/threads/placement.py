"""Registers placement ``"threads"`` (loaded by :mod:`parl.runtime.registry` on its first look-up)."""

from parl.runtime import registry
from parl.runtime.threads.options import ThreadsOptions

registry.register(
    "threads", "parl.runtime.threads.runner:ThreadRunner", options=ThreadsOptions, description="one OS thread per agent"
)
