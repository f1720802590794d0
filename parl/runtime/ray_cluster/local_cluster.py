"""A local Ray cluster of several nodes on 127.0.0.1, joined by this process: for tests and benchmarks
that need more than one node on one machine.

    cluster = start_local_cluster(nodes=3)     # a head and two more nodes of one CPU each
    ...                                        # placement "ray" uses the Ray this process joined
    stop_local_cluster(cluster)                # this process leaves it and its processes end

Ray is imported through :func:`~parl.runtime.ray_cluster.session.import_ray`, whose environment makes every
node take the loopback address: no port of the cluster is open to the network. A ``ray`` imported
before without that environment would put the nodes on the machine's network address, so the start
is refused then.
"""

from __future__ import annotations

from typing import Any

from parl.runtime.ray_cluster.session import import_ray


class NotLoopbackError(RuntimeError):
    """Ray was imported before parl set the environment that keeps a local Ray on 127.0.0.1."""


def start_local_cluster(nodes: int, cpus_per_node: float = 1, log_to_driver: bool = True) -> Any:
    """Start a ``ray.cluster_utils.Cluster`` of ``nodes`` nodes (a head and ``nodes - 1`` more) of
    ``cpus_per_node`` CPUs each, on 127.0.0.1 with no dashboard, and join it (``log_to_driver``: the
    actors' output printed here); returns the cluster.

    Raises:
        NotLoopbackError: ``ray`` was imported before :func:`~parl.runtime.ray_cluster.session.import_ray`,
            without its environment (import it through parl).
    """
    ray = import_ray()
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    if ray_constants.ENABLE_RAY_CLUSTER:
        raise NotLoopbackError(
            "ray was imported before parl.runtime.ray_cluster.session.import_ray set "
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: a local cluster would listen on the network; import ray through parl"
        )
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus_per_node, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus_per_node)
    ray.init(address=cluster.address, configure_logging=False, log_to_driver=log_to_driver)
    return cluster


def stop_local_cluster(cluster: Any) -> None:
    """Leave ``cluster`` (:func:`start_local_cluster`'s) and end every process of it."""
    import_ray().shutdown()
    cluster.shutdown()
