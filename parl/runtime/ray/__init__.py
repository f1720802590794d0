"""Placement ``"ray"``: a robot's agents on a Ray cluster, its learners in this process.

See :mod:`parl.runtime.ray.runner` for the architecture and docs/distributed.md for how to run it.
Nothing here imports ``ray`` until a robot starts with this placement.
"""
