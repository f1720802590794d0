"""Registers placement ``"ray"`` (loaded by :mod:`parl.runtime.registry` on its first look-up; imports no Ray)."""

from __future__ import annotations

from parl.runtime import registry
from parl.runtime.ray.options import RayOptions
from parl.runtime.ray_cluster.session import require_ray
from parl.validation import ParameterError


def reserve(options: RayOptions) -> registry.Reservation:
    """A sweep's trial holds nothing for its own process (its learners mostly wait on the workers) and
    one bundle of ``worker_cpus`` per worker actor.

    Raises:
        ParameterError: ``workers`` is not set (how many bundles would be unknown).
    """
    if options.workers is None:
        raise ParameterError("workers", "set (a sweep reserves CPUs for each trial's Ray workers)", None)
    bundle = {"CPU": float(options.worker_cpus)}
    return registry.Reservation(own_cpus=0.0, actors=tuple(dict(bundle) for _ in range(options.workers)))


registry.register(
    "ray",
    "parl.runtime.ray.runner:RayRunner",
    options=RayOptions,
    description="agents on Ray worker actors acting with copies of the tasks; learners in this process",
    predicts_in_copies=True,
    refuses=("restart_agents",),
    reserve=reserve,
    evaluation="parl.runtime.ray.evaluation:RayEvaluation",
    available=require_ray,
)
