"""TaskSpecs: the four spec lists of one computation task, as one value.

    specs = TaskSpecs.of_model(model, "MLPQModel (task 'RL')")   # checked and normalized
    specs.inputs, specs.states, specs.actions, specs.rewards     # lists of Spec

What a task declares to its agents and what crosses to a transport in another process (a worker's
shared-memory slots, a replay shard): passed as one value, never as a tuple of four lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from parl.core.behaviour import BEHAVIOUR_SPECS
from parl.core.model import Model
from parl.core.specs import Spec, normalize_specs


@dataclass(frozen=True)
class TaskSpecs:
    """A task's specs.

    Attributes:
        inputs: the observations an agent sends with each prediction.
        states: the recurrent states sent with them and answered with the actions (often none).
        actions: the actions a prediction answers.
        rewards: the rewards a training batch carries.
    """

    inputs: List[Spec]
    states: List[Spec]
    actions: List[Spec]
    rewards: List[Spec]

    @classmethod
    def of_model(cls, model: Model, owner: str) -> "TaskSpecs":
        """``model``'s declared specs, checked and normalized (errors name ``owner``).

        Raises:
            ValueError: a spec that is not a ``(name, dict(shape=..., dtype=...))`` pair, a bad shape,
                dtype or range, or a name used twice; the message names ``owner`` and the spec.
        """
        return cls(
            inputs=normalize_specs(model.get_input_specs(), owner),
            states=normalize_specs(model.get_state_specs(), owner),
            actions=normalize_specs(model.get_action_specs(), owner),
            rewards=normalize_specs(model.get_reward_specs(), owner),
        )

    def with_behaviour(self, owner: str) -> "TaskSpecs":
        """These specs with :data:`~parl.core.behaviour.BEHAVIOUR_SPECS` after the actions: those of a
        task whose algorithm records its behaviour.

        Raises:
            ValueError: the model already declares an action of one of those names (naming ``owner``).
        """
        added = normalize_specs(BEHAVIOUR_SPECS, owner)
        taken = sorted({s.name for s in self.actions} & {s.name for s in added})
        if taken:
            raise ValueError(f"{owner}: the model declares actions {taken}, names the recorded behaviour needs")
        return TaskSpecs(self.inputs, self.states, self.actions + added, self.rewards)
