"""Joining Ray: the optional import, and a local Ray bound to loopback when none is joined.

    ray = import_ray()                       # ImportError in one line when Ray is not installed
    session = RaySession.join(address, cpus_wanted=4)
    ...
    session.leave()                          # shuts down only a Ray this session started

A Ray started here listens on 127.0.0.1 only (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray
use the loopback address as its node address; set before Ray is first imported), so a robot on
one machine opens no port to the network. Joining a cluster (``address``) uses that cluster's
own addresses: see docs/distributed.md for what crosses the network then.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Optional, Sequence

from parl.runtime.errors import PlacementStartError
from parl.runtime.ray_cluster.address import check_reachable, join_error

logger = logging.getLogger("parl")

#: What to install for placement "ray" (one line in the error when Ray is missing).
INSTALL_HINT = "pip install 'parl[ray]'"

#: Environment set before Ray is imported, unless the user set it: no usage reports sent, a local
#: Ray on the loopback address, and worker logs not folded into "repeated Nx" lines.
RAY_ENVIRONMENT = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_DEDUP_LOGS": "0",
}


class WorkerStartError(PlacementStartError, RuntimeError):
    """A Ray actor of a robot failed in its constructor (an agent that does not unpickle there, say)."""


def require_ray() -> None:
    """Check that Ray is installed, without importing it.

    Raises:
        ImportError: it is not; the message says how to install it.
    """
    if "ray" in sys.modules and sys.modules["ray"] is not None:
        return
    if sys.modules.get("ray", ...) is None or importlib.util.find_spec("ray") is None:
        raise ImportError(f"placement 'ray' needs Ray, which is not installed: {INSTALL_HINT}")


def import_ray() -> ModuleType:
    """The ``ray`` module, with :data:`RAY_ENVIRONMENT` set first.

    Raises:
        ImportError: Ray is not installed; the message says how to install it.
    """
    if "ray" not in sys.modules:
        for key, value in RAY_ENVIRONMENT.items():
            os.environ.setdefault(key, value)
    try:
        import ray
    except ImportError as exc:
        raise ImportError(f"placement 'ray' needs Ray, which is not installed: {INSTALL_HINT}") from exc
    return ray


@dataclass
class RaySession:
    """This process's hold on Ray for one robot.

    Attributes:
        ray: the ``ray`` module.
        started: whether this session started the Ray it uses (and so shuts it down on :meth:`leave`).
    """

    ray: ModuleType
    started: bool

    @classmethod
    def join(cls, address: Optional[str], cpus_wanted: float, local_cpus: Optional[int] = None) -> "RaySession":
        """Use the Ray this process has joined, else join ``address``, else start a local Ray with
        ``local_cpus`` CPUs (None: this machine's, at least ``cpus_wanted``).

        Raises:
            RayJoinError: nothing answers at ``address`` within seconds
                (:func:`~parl.runtime.ray_cluster.address.check_reachable`), or Ray cannot join it (no token,
                say: :func:`~parl.runtime.ray_cluster.address.join_error`); one line naming the address and why.
        """
        ray = import_ray()
        if ray.is_initialized():
            return cls(ray, started=False)
        if address is not None:
            check_reachable(address)
            try:
                ray.init(address=address, log_to_driver=True)
            except Exception as exc:  # noqa: BLE001 - whatever keeps Ray from joining: one line
                raise join_error(address, exc) from None
            return cls(ray, started=False)
        cpus = local_cpus or max(os.cpu_count() or 1, int(-(-cpus_wanted // 1)))
        ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            _temp_dir=os.path.join(tempfile.gettempdir(), "parl-ray"),
            configure_logging=False,
        )
        logger.info("started a local Ray with %d CPUs on 127.0.0.1", cpus)
        return cls(ray, started=True)

    def leave(self) -> None:
        """Shut down the Ray this session started (its processes end); nothing otherwise."""
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()
        self.started = False


def unpickle_in_actor(paths: Sequence[str], data: bytes) -> Any:
    """What an actor of a robot does first: put back the default SIGTERM handler (the actor's process
    is its own, ended with SIGTERM by Ray, and Paddle's handler would print a C++ "fatal error" page
    for it), put the driver's ``sys.path`` entries that exist on this node on this process's path
    (so classes from the driver's own modules are found on a machine that shares its files), then
    unpickle ``data``."""
    import paddle
    from ray import cloudpickle

    paddle.disable_signal_handler()
    sys.path.extend(p for p in paths if p not in sys.path and os.path.isdir(p))
    return cloudpickle.loads(data)
