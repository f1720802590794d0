"""AgentHelper: an agent's handle on one ComputationTask.

    actions, next_states = helper.predict({"obs": obs})
    helper.store_data({"obs": obs}, actions, reward, {"obs": next_obs}, terminated, truncated)
    costs = helper.learn()      # None when it is not yet time to learn

A helper hides all communication from the agent and owns the agent's
experience. This base class predicts and checks what is stored; subclasses
(``parl.experience``: :class:`~parl.OnPolicyHelper`,
:class:`~parl.ExpReplayHelper`) decide what is kept and when it is sent to
the task through the bound :class:`~parl.core.communicator.Communicator`.

What an agent gives :meth:`AgentHelper.predict` and :meth:`AgentHelper.store_data`
is checked there, in the agent's own thread, before anything is queued or
kept: shapes and dtypes against the model's specs, float values finite (no NaN,
no infinity), integer values inside their spec's declared range (a discrete
action below ``num_actions``). A bad value raises ValueError naming the call,
the field and the value, in that agent only: the other agents of its batch go
on, and no normalizer, batch or replay buffer ever sees it.

``terminated`` (the task ended) and ``truncated`` (cut by a time limit) are
kept apart: a transition's ``next_episode_end`` is 1 only when terminated, so
algorithms bootstrap from the last input after a truncation and never after a
termination.

A helper's :meth:`AgentHelper.counters` are saved in checkpoints (the
experience itself is not) and given back with
:meth:`AgentHelper.restore_counters` when a run resumes.
"""

from __future__ import annotations

import abc
import inspect
from typing import Callable, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from parl.core.batch import Transition
from parl.core.communicator import Communicator
from parl.core.costs import Costs
from parl.core.specs import check_dict, zeros

ArrayDict = Dict[str, np.ndarray]
Rewards = Union[float, int, Mapping[str, object]]


class AgentHelper(abc.ABC):
    """Base helper (abstract): prediction and checked experience; subclasses decide how experience is
    learned from, implementing :meth:`learn` (and :meth:`_store`, unless they override :meth:`store_data`).
    A subclass without :meth:`learn` fails at construction with a TypeError naming it.
    """

    #: The name of the task this helper is bound to (set by ``Manager.add_agent``; None before). An agent's
    #: helpers are keyed by task name, or, where one agent holds several helpers of one task (one per agent
    #: of a multi-agent environment), by names of their own that ``add_agent`` maps to tasks.
    task_name: Optional[str] = None
    #: Whether the helper may send training data; False for one that only predicts (a self-play
    #: opponent's, whose task ``Manager`` refuses helpers that learn).
    learns: bool = True
    #: Whether its task learns from stored actions whatever chose them (replay: Q-learning is off-policy),
    #: so that an agent may explore with actions its policy did not choose (epsilon-greedy). False for
    #: on-policy helpers, whose algorithms take the stored actions as the policy's own.
    learns_off_policy: bool = False

    def __init__(self) -> None:
        self._comm: Optional[Communicator] = None

    def bind(self, communicator: Communicator) -> None:
        """Attach to a task's wrapper (done by Manager.add_agent).

        A helper whose class keeps :meth:`predict` as defined here gets the
        communicator's ``predict`` as its own when that one's ``states``
        defaults to None (as parl's transports do), so an agent's per-step call
        goes straight to the transport: two Python calls fewer a step, with the
        same arguments, results and errors.
        """
        self._set_transport(communicator)
        self._on_bind(communicator)

    def _set_transport(self, communicator: Communicator) -> None:
        """Route this helper's calls through ``communicator`` (also used by a worker process to
        put its transport in place of the one bound in the parent, with the same specs)."""
        self._comm = communicator
        #: How store_data's errors name each part, made once per binding.
        self._what_stored = {
            part: f"store_data: {getattr(communicator, '_what', 'task')} {part}"
            for part in ("input", "next input", "state", "next state", "action", "reward")
        }
        if type(self).predict is AgentHelper.predict and _states_optional(communicator.predict):
            self.predict = communicator.predict  # type: ignore[method-assign]
        else:
            self.__dict__.pop("predict", None)

    def _on_bind(self, communicator: Communicator) -> None:
        """Hook for subclasses that size storage by the specs."""

    def unbind(self) -> None:
        """Forget the bound communicator and what was made for it (storage sized by its specs), as
        before :meth:`bind`; counters are kept. Done by a placement that sends the agent to be bound
        again elsewhere (placement "ray"), so that no transport or empty buffer travels with it."""
        self._comm = None
        self.__dict__.pop("predict", None)
        self._on_unbind()

    def _on_unbind(self) -> None:
        """Hook for subclasses whose :meth:`_on_bind` made storage."""

    def counters(self) -> Dict[str, int]:
        """The integers a resumed run needs to go on where this helper stopped (annealing
        schedules, say); none for the base class."""
        return {}

    def restore_counters(self, counters: Mapping[str, int]) -> None:
        """Take up the :meth:`counters` of an earlier run, before or after :meth:`bind`; the base
        class keeps none. Subclasses raise ValueError when a counter they keep is missing or is
        not an integer >= 0."""

    @property
    def communicator(self) -> Communicator:
        """The bound communicator."""
        if self._comm is None:
            raise RuntimeError(f"{type(self).__name__} is not bound to a task; add the agent with Manager.add_agent")
        return self._comm

    def predict(
        self, inputs: Mapping[str, object], states: Optional[Mapping[str, object]] = None
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next recurrent states for one sample (no batch axis).

        Raises:
            ValueError: ``inputs`` or ``states`` do not match the model's specs, or hold a NaN,
                an infinity or an integer outside its spec's range (naming the field and the value).
            RemoteError: the algorithm raised while predicting this request's batch.
        """
        return self.communicator.predict(inputs, states)

    def initial_states(self) -> ArrayDict:
        """Zero recurrent states for the start of an episode (empty for feedforward models)."""
        return {k: v[0] for k, v in zeros(self.communicator.state_specs, 1).items()}

    def store_data(
        self,
        inputs: Mapping[str, object],
        actions: Mapping[str, object],
        rewards: Rewards,
        next_inputs: Mapping[str, object],
        terminated: bool,
        truncated: bool,
        states: Optional[Mapping[str, object]] = None,
        next_states: Optional[Mapping[str, object]] = None,
    ) -> None:
        """Record one transition. ``rewards`` may be a number when the model has one reward spec.

        The parts are checked against the specs and handed to the subclass as one
        :class:`~parl.core.batch.Transition` whose ``next_episode_end`` is 1.0 only when ``terminated``.

        Raises:
            ValueError: any part does not match the model's specs, or holds a NaN, an infinity or
                an integer outside its spec's range (an action >= ``num_actions``), e.g.
                ``store_data: task 'RL' reward 'reward' is nan (not finite)``; nothing is stored.
        """
        comm = self.communicator
        if not isinstance(rewards, Mapping):
            if len(comm.reward_specs) != 1:
                raise ValueError(
                    f"rewards: expected a dict with keys {[s.name for s in comm.reward_specs]}, got {rewards!r}"
                )
            rewards = {comm.reward_specs[0].name: rewards}
        what = self._what_stored
        inputs = check_dict(comm.input_specs, inputs, what["input"])
        next_inputs = check_dict(comm.input_specs, next_inputs, what["next input"])
        states = check_dict(comm.state_specs, states or {}, what["state"])
        next_states = check_dict(comm.state_specs, next_states or {}, what["next state"])
        actions = check_dict(comm.action_specs, actions, what["action"])
        rewards = check_dict(comm.reward_specs, rewards, what["reward"])
        end = np.array([1.0 if terminated else 0.0], dtype=np.float32)
        # Positional: half the cost of keywords, and this runs every step.
        transition = Transition(inputs, actions, rewards, next_inputs, end, states, next_states)
        self._store(transition, bool(terminated) or bool(truncated))

    def _store(self, transition: Transition[np.ndarray], episode_over: bool) -> None:
        """Keep one checked transition (its arrays may be the agent's own); ``episode_over`` when the
        episode terminated or was truncated at this step."""
        raise NotImplementedError

    @abc.abstractmethod
    def learn(self) -> Optional[Costs]:
        """Send experience for training if it is time; returns the costs of the update it waited for
        (:data:`~parl.core.costs.Costs`), or None."""
        raise NotImplementedError

    def hand_over(self) -> None:
        """Send what :meth:`learn` would send now without waiting for its update, where this helper can;
        :meth:`wait_for_updates` then waits. An agent with several helpers of one task (one per agent of a
        multi-agent environment) hands all of them over before waiting, so their segments of one step
        join one update. By default :meth:`learn` now, its costs kept for :meth:`wait_for_updates`."""
        self.__dict__["_handed_costs"] = self.learn()

    def wait_for_updates(self) -> Optional[Costs]:
        """Wait for the updates of what :meth:`hand_over` sent; returns the costs of the last one (None:
        none was sent)."""
        return self.__dict__.pop("_handed_costs", None)

    def abandon_episode(self) -> None:
        """Drop what is kept of the episode under way, which ended without its last step (its agent
        failed and is restarted): nothing of it may join the next episode's steps. Nothing to do
        by default."""

    def finish(self) -> None:
        """Called once the agent has played all its games (not when the robot is stopped): a helper
        that hands batches over waits here for those still in flight. Nothing to do by default."""


def _states_optional(predict: Callable[..., object]) -> bool:
    """Whether ``predict(inputs)`` means ``predict(inputs, None)``: its ``states`` defaults to None."""
    try:
        parameter = inspect.signature(predict).parameters.get("states")
    except (TypeError, ValueError):  # no signature to read (a builtin, say)
        return False
    return parameter is not None and parameter.default is None


def helper_tasks(helpers: Mapping[str, AgentHelper], tasks: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Helper key -> the name of its task: ``tasks[key]`` where given, else the helper's
    :attr:`~AgentHelper.task_name` from an earlier binding, else the key itself.

    Raises:
        ValueError: ``tasks`` names a key that is no helper's, or maps one to a name that is not a string.
    """
    tasks = dict(tasks or {})
    stray = sorted(set(tasks) - set(helpers))
    if stray:
        raise ValueError(f"tasks names helpers {stray} the agent does not have; its helpers are {sorted(helpers)}")
    out = {}
    for key, helper in helpers.items():
        task = tasks.get(key, getattr(helper, "task_name", None) or key)
        if not isinstance(task, str):
            raise ValueError(f"tasks[{key!r}]: expected a task name, got {task!r}")
        out[key] = task
    return out
