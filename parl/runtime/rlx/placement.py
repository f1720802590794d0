"""Registers placement ``"rlx"`` (loaded by :mod:`parl.runtime.registry` on its first look-up)."""

from parl.runtime import registry
from parl.runtime.rlx.config_options import ServerConfig
from parl.runtime.rlx.settings import ServerSettings

registry.register(
    "rlx",
    "parl.runtime.rlx.runner:RlxRunner",
    options=ServerSettings,
    description="remote environments connect over TCP (the RLX protocol); the cooperative scheduler batches them",
    remote_environments=True,
    config_options=ServerConfig,
)
