"""Multi-agent environments (PettingZoo's Parallel and AEC APIs): one parl Agent plays one environment
copy with one helper per environment agent, each bound to the task a :class:`PolicyMapping` gives it.
docs/multiagent.md shows the configs."""

from parl.multiagent.agent import PettingZooAgent
from parl.multiagent.envs import env_agent_ids, is_multiagent, is_turn_based
from parl.multiagent.mapping import PolicyMapping
from parl.multiagent.seat_swap import SeatSwap

__all__ = [
    "PettingZooAgent",
    "PolicyMapping",
    "SeatSwap",
    "env_agent_ids",
    "is_multiagent",
    "is_turn_based",
]
