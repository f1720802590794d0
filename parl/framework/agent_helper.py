"""AgentHelper: an agent's handle on one ComputationTask.

    actions, next_states = helper.predict({"obs": obs})
    helper.store_data({"obs": obs}, actions, reward, {"obs": next_obs}, terminated, truncated)
    costs = helper.learn()      # None when it is not yet time to learn

A helper hides all communication from the agent and owns the agent's
experience: :class:`OnPolicyHelper` caches the last steps and sends them;
:class:`ExpReplayHelper` keeps a replay buffer and sends sampled batches.

``terminated`` (the task ended) and ``truncated`` (cut by a time limit) are
kept apart: a transition's ``next_episode_end`` is 1 only when terminated, so
algorithms bootstrap from the last input after a truncation and never after a
termination.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from parl.framework.communicator import Communicator
from parl.framework.replay_buffer import ReplayBuffer
from parl.framework.specs import check_dict, zeros
from parl.framework.validation import check_int

ArrayDict = Dict[str, np.ndarray]
Rewards = Union[float, int, Mapping[str, object]]


class AgentHelper:
    """Base helper: prediction and checked experience; subclasses decide how experience is learned from."""

    def __init__(self) -> None:
        self._comm: Optional[Communicator] = None

    def bind(self, communicator: Communicator) -> None:
        """Attach to a task's wrapper (done by Manager.add_agent)."""
        self._comm = communicator
        self._on_bind(communicator)

    def _on_bind(self, communicator: Communicator) -> None:
        """Hook for subclasses that size storage by the specs."""

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
            ValueError: ``inputs`` or ``states`` do not match the model's specs.
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

        Raises:
            ValueError: any part does not match the model's specs.
        """
        comm = self.communicator
        if not isinstance(rewards, Mapping):
            if len(comm.reward_specs) != 1:
                raise ValueError(
                    f"rewards: expected a dict with keys {[s.name for s in comm.reward_specs]}, got {rewards!r}"
                )
            rewards = {comm.reward_specs[0].name: rewards}
        transition = {
            "inputs": check_dict(comm.input_specs, inputs, "input"),
            "next_inputs": check_dict(comm.input_specs, next_inputs, "next input"),
            "states": check_dict(comm.state_specs, states or {}, "state"),
            "next_states": check_dict(comm.state_specs, next_states or {}, "next state"),
            "actions": check_dict(comm.action_specs, actions, "action"),
            "rewards": check_dict(comm.reward_specs, rewards, "reward"),
            "next_episode_end": np.array([1.0 if terminated else 0.0], dtype=np.float32),
        }
        self._store(transition, bool(terminated) or bool(truncated))

    def _store(self, transition: Dict[str, object], episode_over: bool) -> None:
        raise NotImplementedError

    def learn(self) -> Optional[Dict[str, float]]:
        """Send experience for training if it is time; returns the costs, or None."""
        raise NotImplementedError


class OnPolicyHelper(AgentHelper):
    """Caches the last ``sample_interval`` transitions and sends them, in order, for one update.

    The cache is also sent when an episode ends, so no step crosses episodes.
    Each transition carries its next input, which is the bootstrap input of
    the last one. The batch is marked as one time-ordered segment
    (``BatchInfo.sequence_lengths``), so algorithms can compute returns and
    unroll recurrent models over it even after the wrapper joins the segments
    of several agents.
    """

    def __init__(self, *, sample_interval: int = 5) -> None:
        super().__init__()
        self.sample_interval = check_int("sample_interval", sample_interval, 1)
        self._cache: List[Dict[str, object]] = []
        self._episode_over = False

    def _store(self, transition: Dict[str, object], episode_over: bool) -> None:
        # Checked arrays may be the agent's own (no copy when the dtype already
        # fits); an agent that reuses an observation buffer in place would
        # otherwise change the cached steps.
        self._cache.append(
            {
                field: value.copy() if isinstance(value, np.ndarray) else {k: v.copy() for k, v in value.items()}
                for field, value in transition.items()
            }
        )
        self._episode_over = episode_over

    def learn(self) -> Optional[Dict[str, float]]:
        if not self._cache or (len(self._cache) < self.sample_interval and not self._episode_over):
            return None
        cache, self._cache = self._cache, []
        batch = _stack_transitions(cache)
        # One time-ordered segment: the wrapper may join it with other agents' segments.
        batch["sequence_lengths"] = np.array([len(cache)], dtype=np.int64)
        return self.communicator.learn(batch)


class ExpReplayHelper(AgentHelper):
    """Keeps a uniform replay buffer; every ``sample_interval`` stored steps, sends a sampled batch.

    Learning starts once ``warmup_steps`` transitions are stored.
    """

    def __init__(
        self,
        *,
        capacity: int = 100_000,
        batch_size: int = 64,
        warmup_steps: int = 1000,
        sample_interval: int = 1,
        seed: Optional[int] = None,
    ) -> None:
        super().__init__()
        self.capacity = check_int("capacity", capacity, 1)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.warmup_steps = check_int("warmup_steps", warmup_steps, 0)
        self.sample_interval = check_int("sample_interval", sample_interval, 1)
        self._rng = np.random.default_rng(seed)
        self._since_learn = 0
        self.buffer: Optional[ReplayBuffer] = None

    def _on_bind(self, communicator: Communicator) -> None:
        self.buffer = ReplayBuffer(
            self.capacity,
            communicator.input_specs,
            communicator.state_specs,
            communicator.action_specs,
            communicator.reward_specs,
        )

    def _store(self, transition: Dict[str, object], episode_over: bool) -> None:
        self.buffer.add(transition)
        self._since_learn += 1

    def learn(self) -> Optional[Dict[str, float]]:
        if self._since_learn < self.sample_interval or len(self.buffer) < max(self.warmup_steps, 1):
            return None
        self._since_learn = 0
        return self.communicator.learn(self.buffer.sample(self.batch_size, self._rng))


def _stack_transitions(transitions: List[Dict[str, object]]) -> Dict[str, object]:
    first = transitions[0]
    batch: Dict[str, object] = {}
    for field, value in first.items():
        if field == "next_episode_end":
            batch[field] = np.stack([t[field] for t in transitions])
        else:
            names = list(value)
            batch[field] = {n: np.stack([t[field][n] for t in transitions]) for n in names}
    return batch
