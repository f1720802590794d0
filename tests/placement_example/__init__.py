"""A placement of the tests' own, as a user would add one: this folder and its one ``register`` call.

    import placement_example                      # registers placement "capped-threads"
    manager = parl.Manager(tasks, placement=CappedThreadsOptions(max_agents=8))

or, in a robot config, ``placement: {name: capped-threads, max_agents: 8}``. Its agents run as in
placement "threads"; its one option, ``max_agents``, refuses to start more agents than that.
Nothing outside this folder knows it: the Manager hands its options to its runner, a config's
``placement:`` block is checked by its options type, and the placement contract runs over it.
"""

from parl.runtime import registry
from placement_example.options import CappedThreadsOptions

registry.register(
    "capped-threads",
    "placement_example.runner:CappedThreadRunner",
    options=CappedThreadsOptions,
    description="one thread per agent, at most max_agents of them",
)

__all__ = ["CappedThreadsOptions"]
