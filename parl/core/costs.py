"""Costs: what one update gives back to each agent whose data it learned from.

    costs = helper.learn()                  # None while it is not yet time to learn
    if costs is not None:
        loss = costs["loss"]                # every scalar cost as a float
        rows = costs.get("td_error")        # this agent's rows of a per-row cost, as a numpy array

:meth:`Algorithm.learn <parl.core.algorithm.Algorithm.learn>` names the costs
(tensors or numbers); :class:`~parl.serving.computation_task.ComputationTask`
turns them into these values, and the transports hand each agent its own.
"""

from __future__ import annotations

from typing import Dict, Union

import numpy as np

#: One update's named costs: ``"loss"`` and every other scalar as a float, and a per-row
#: ``"td_error"`` (prioritized replay's new priorities) as a flat array of the receiver's rows.
Costs = Dict[str, Union[float, np.ndarray]]
