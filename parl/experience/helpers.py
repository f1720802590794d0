"""The helpers that keep experience: OnPolicyHelper and ExpReplayHelper.

:class:`OnPolicyHelper` caches the agent's last steps and sends them as one
time-ordered segment; :class:`ExpReplayHelper` keeps a replay buffer (uniform
or prioritized, of 1-step or n-step transitions) and sends sampled batches at a
fixed update-to-data ratio, waiting for each update or handing batches over.
What every helper does (predict, check what is stored, counters) is
:class:`parl.core.agent_helper.AgentHelper`'s.
"""

from __future__ import annotations

from collections import deque
from fractions import Fraction
from typing import Callable, Deque, Dict, List, Literal, Mapping, Optional, Protocol, Union

import numpy as np

from parl.core.agent_helper import AgentHelper
from parl.core.batch import Transition, join
from parl.core.communicator import Communicator
from parl.core.costs import Costs
from parl.core.counters import read_counter
from parl.core.task_specs import TaskSpecs
from parl.experience.frame_store import FrameStoreSetting, check_frame_store
from parl.experience.n_step import NStepAccumulator, copy_transition
from parl.experience.prioritized_replay_buffer import PrioritizedReplayBuffer, replay_buffer_for
from parl.experience.replay_buffer import ReplayBuffer
from parl.validation import check_int, check_positive, check_range

ArrayDict = Dict[str, np.ndarray]
Rewards = Union[float, int, Mapping[str, object]]


class TransitionWriter(Protocol):
    """Where :meth:`ExpReplayHelper.store_only` sends transitions."""

    def add(self, transition: Transition[np.ndarray]) -> None:
        """Keep one transition (its arrays may be the agent's own: copy what is kept)."""

    def flush(self) -> None:
        """Send what is kept now (called at every episode's end)."""


class OnPolicyHelper(AgentHelper):
    """Caches the last ``sample_interval`` transitions and sends them, in order, for one update.

    The cache is also sent when an episode ends, so no step crosses episodes.
    Each transition carries its next input, which is the bootstrap input of
    the last one. The batch is marked as one time-ordered segment
    (``Transition.sequence_lengths``), so algorithms can compute returns and
    unroll recurrent models over it even after the wrapper joins the segments
    of several agents; each row carries the weights version its action was
    predicted with (``Transition.behaviour_version``) where the transport tells it.

    Learning without waiting: with ``max_in_flight=k >= 1`` :meth:`learn` hands
    each segment over (``Communicator.put_batch``) and the agent goes on acting
    under the weights it has while the learner updates; at most ``k`` of this
    agent's segments are in flight, and a segment due beyond that waits for the
    oldest. The default, 0, waits for each update. Placements ``ray`` and
    ``processes`` set it for every on-policy helper with their option
    ``asynchronous`` (docs/distributed.md).

    Args:
        sample_interval: steps per segment (fewer when an episode ends).
        max_in_flight: segments handed over and not yet learned, at most (0: :meth:`learn` waits
            for each update).

    Raises:
        ValueError: an option out of its range, named in the message.
    """

    def __init__(self, *, sample_interval: int = 5, max_in_flight: int = 0) -> None:
        super().__init__()
        self.sample_interval = check_int("sample_interval", sample_interval, 1)
        self.max_in_flight = check_int("max_in_flight", max_in_flight, 0, 1_000)
        self._cache: List[Transition[np.ndarray]] = []
        self._versions: List[Optional[int]] = []  # the weights version of each cached step
        self._version_of: Optional[Callable[[], Optional[int]]] = None
        self._episode_over = False

    def _set_transport(self, communicator: Communicator) -> None:
        super()._set_transport(communicator)
        self._version_of = getattr(communicator, "weights_version", None)  # a transport need not tell

    def _on_unbind(self) -> None:
        self._version_of = None  # no transport travels with the helper

    def _store(self, transition: Transition[np.ndarray], episode_over: bool) -> None:
        # Checked arrays may be the agent's own (no copy when the dtype already
        # fits); an agent that reuses an observation buffer in place would
        # otherwise change the cached steps.
        self._cache.append(copy_transition(transition))
        version_of = self._version_of
        self._versions.append(None if version_of is None else version_of())
        self._episode_over = episode_over

    def abandon_episode(self) -> None:
        """Drop the cached steps of the episode under way (they never reach an update)."""
        self._cache = []
        self._versions = []
        self._episode_over = False

    def learn(self) -> Optional[Costs]:
        """Send the cached segment when it is full or its episode is over: waits for its update and
        returns its costs, or, with ``max_in_flight``, hands it over and returns the costs of the
        last update finished meanwhile (None when none finished or nothing was sent)."""
        segment = self._due_segment()
        if segment is None:
            return None
        if not self.max_in_flight:
            return self.communicator.learn(segment)
        comm = self.communicator
        finished = comm.take_costs(wait=False)
        while comm.batches_in_flight() >= self.max_in_flight:
            finished += comm.take_costs(wait=True)  # the bound: wait for the oldest
        comm.put_batch(segment)
        return finished[-1] if finished else None

    def _due_segment(self) -> Optional[Transition[np.ndarray]]:
        """The cached segment, taken out, when it is full or its episode is over; else None."""
        if not self._cache or (len(self._cache) < self.sample_interval and not self._episode_over):
            return None
        cache, self._cache = self._cache, []
        versions, self._versions = self._versions, []
        return _stack_segment(cache, versions)

    def hand_over(self) -> None:
        """Hand the cached segment over when :meth:`learn` would send it, without waiting for its update
        (with ``max_in_flight``: :meth:`learn`, which never waits beyond its bound)."""
        if self.max_in_flight:
            super().hand_over()
            return
        segment = self._due_segment()
        if segment is not None:
            self.communicator.put_batch(segment)

    def wait_for_updates(self) -> Optional[Costs]:
        """Wait for the updates of the segments :meth:`hand_over` sent; the costs of the last one (None: none)."""
        if self.max_in_flight:
            return super().wait_for_updates()
        comm, finished = self.communicator, []
        while comm.batches_in_flight():
            finished += comm.take_costs(wait=True)
        return finished[-1] if finished else None

    def finish(self) -> None:
        """Wait for the segments still in flight, so every segment sent is learned (or dropped as stale)."""
        _wait_for_flights(self._comm, self.max_in_flight, list)


class ExpReplayHelper(AgentHelper):
    """Keeps a replay buffer and sends sampled batches at a fixed update-to-data ratio.

    Learning starts once ``warmup_steps`` transitions are stored. From then on
    every stored step earns ``updates_per_step`` updates, and :meth:`learn`
    sends one sampled batch per update earned, each learned as one update of
    its own (the wrapper never joins replay samples). After the ``n``-th step
    since the buffer was warm is stored and learned on, the helper has sent
    exactly ``ceil(n * updates_per_step)`` batches (the first at once), in
    threads, cooperative or processes placement alike: a robot of many agents
    makes ``updates_per_step`` updates per env step of all its agents
    together. ``0.25`` is one update every 4 steps (SB3's ``train_freq=4``),
    ``2`` two updates per step.

    Works with any off-policy algorithm; two options change what is replayed:

    - ``n_step > 1``: each stored transition spans up to ``n_step`` env steps
      (:class:`~parl.experience.n_step.NStepAccumulator`): its reward is the
      discounted sum of the rewards on the way and the batch carries
      ``bootstrap_steps``, which algorithms turn into ``gamma ** steps`` with
      ``batch.discount(gamma)``. ``gamma`` here discounts those sums and must be
      the algorithm's own. The last ``store_data`` of an episode must say
      ``terminated`` or ``truncated``, or transitions would span two episodes.
    - ``prioritized=True``: transitions are drawn by priority
      (:class:`~parl.experience.prioritized_replay_buffer.PrioritizedReplayBuffer`),
      the batch carries importance ``weights``, and the per-row ``td_error`` the
      algorithm returns from ``learn`` becomes the priorities of the rows sent.

    Learning without waiting: with ``max_in_flight=k >= 1`` :meth:`learn` hands
    each batch over (``Communicator.put_batch``) and returns before it is
    learned, so the agent acts while the training thread updates; at most
    ``k`` of this agent's batches are in flight, and a batch due beyond that
    waits for the oldest. The batches sent are the same as with waiting, so
    the update-to-data ratio is exactly as set, only up to ``k`` batches
    later; a batch is sampled before the priorities of the ones still in
    flight are updated (prioritized replay). The default, 0, waits for each
    update.

    Args:
        capacity: transitions kept by this agent.
        batch_size: transitions per batch sent.
        warmup_steps: transitions stored before the first batch.
        updates_per_step: updates (batches sent) per stored step after warm-up, in [1e-6, 1000]:
            the update-to-data ratio.
        seed: seeds this helper's sampling.
        prioritized: sample by priority instead of uniformly.
        alpha: priority exponent, in [0, 1] (prioritized only).
        beta_start: importance-weight exponent at the start, in [0, 1]; it reaches 1 after
            ``beta_steps`` of this agent's steps (prioritized only). The steps so far are the
            counter ``replay_added``, so a resumed run goes on annealing where it stopped.
        beta_steps: this agent's steps over which beta anneals to 1 (0: 1 from the start).
        priority_epsilon: added to ``|td_error|`` so no priority is 0 (prioritized only).
        n_step: env steps per stored transition.
        gamma: discount of the n-step reward sums (n_step > 1 only); must match the algorithm's.
        max_in_flight: batches handed over and not yet learned, at most (0: :meth:`learn` waits
            for each update).
        frame_store: keep frame-stacked inputs once per frame
            (:class:`~parl.experience.frame_store.FrameStore`): ``"auto"`` those of uint8 specs of shape
            ``[k, H, W]`` with ``k < H, W`` (channel-first stacks such as ``[4, 84, 84]``), True the
            same but the model must have one, False none. Batches are the same either way.
        sample_interval: deprecated since 0.2.0: stored steps between batches, the same as
            ``updates_per_step=1/sample_interval`` (None: ``updates_per_step`` decides).

    Raises:
        ValueError: an option is out of its range (named in the message); at bind, ``frame_store=True``
            and no input spec is a frame stack.
    """

    learns_off_policy = True

    def __init__(
        self,
        *,
        capacity: int = 100_000,
        batch_size: int = 64,
        warmup_steps: int = 1000,
        updates_per_step: float = 1.0,
        seed: Optional[int] = None,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_steps: int = 100_000,
        priority_epsilon: float = 1e-6,
        n_step: int = 1,
        gamma: float = 0.99,
        max_in_flight: int = 0,
        frame_store: Union[bool, Literal["auto"]] = "auto",
        sample_interval: Optional[int] = None,
    ) -> None:
        super().__init__()
        if sample_interval is not None:
            from parl.experience.sample_interval import updates_per_step_of

            updates_per_step = updates_per_step_of(sample_interval, updates_per_step)
        self.capacity = check_int("capacity", capacity, 1)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.warmup_steps = check_int("warmup_steps", warmup_steps, 0)
        self.updates_per_step = check_range("updates_per_step", updates_per_step, 1e-6, 1_000.0)
        self._ratio = Fraction(self.updates_per_step).limit_denominator(1_000_000)
        if not isinstance(prioritized, bool):
            raise ValueError(f"prioritized must be True or False, got {prioritized!r}")
        self.prioritized = prioritized
        self.alpha = check_range("alpha", alpha, 0.0, 1.0)
        self.beta_start = check_range("beta_start", beta_start, 0.0, 1.0)
        self.beta_steps = check_int("beta_steps", beta_steps, 0)
        self.priority_epsilon = check_positive("priority_epsilon", priority_epsilon)
        self.n_step = check_int("n_step", n_step, 1)
        self.gamma = check_range("gamma", gamma, 0.0, 1.0)
        self.max_in_flight = check_int("max_in_flight", max_in_flight, 0, 1_000)
        self.frame_store: FrameStoreSetting = check_frame_store(frame_store)
        self._slots_in_flight: Deque[np.ndarray] = deque()  # prioritized: the rows of each batch in flight
        self._rng = np.random.default_rng(seed)
        self._steps_ready = 0  # steps stored with the buffer warm
        self._updates_sent = 0  # batches sent since then
        self._n_step = NStepAccumulator(self.n_step, gamma=self.gamma) if self.n_step > 1 else None
        self.buffer: Optional[Union[ReplayBuffer, PrioritizedReplayBuffer]] = None
        self._writer: Optional[TransitionWriter] = None  # set by store_only
        self._restored_added = 0  # transitions added before a resume, until the buffer exists

    def _on_bind(self, communicator: Communicator) -> None:
        # The four attributes of the Communicator interface (a transport need not be a Communicator).
        specs = TaskSpecs(
            communicator.input_specs, communicator.state_specs, communicator.action_specs, communicator.reward_specs
        )
        self.buffer = replay_buffer_for(self, specs, bootstrap_steps=self._n_step is not None)
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            self.buffer.added = self._restored_added

    def _on_unbind(self) -> None:
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            self._restored_added = self.buffer.added
        self.buffer = None

    def counters(self) -> Dict[str, int]:
        """``replay_added`` (transitions added to the buffer, which anneal beta) when prioritized;
        none for uniform replay."""
        if not self.prioritized:
            return {}
        return {
            "replay_added": self.buffer.added
            if isinstance(self.buffer, PrioritizedReplayBuffer)
            else self._restored_added
        }

    def restore_counters(self, counters: Mapping[str, int]) -> None:
        """Take up ``replay_added`` (prioritized only): beta goes on from where it was, over an
        empty buffer, since replayed experience is not saved."""
        if not self.prioritized:
            return
        self._restored_added = read_counter(counters, "replay_added", type(self).__name__)
        if isinstance(self.buffer, PrioritizedReplayBuffer):
            self.buffer.added = self._restored_added

    def store_only(self, writer: TransitionWriter) -> None:
        """From now on hand every transition to ``writer`` instead of this helper's buffer (after the
        n-step sums, so what is stored is what this helper would store) and send no batches: a
        learner elsewhere samples them (distributed replay: :mod:`parl.runtime.ray.replay`)."""
        self._writer = writer

    def _store(self, transition: Transition[np.ndarray], episode_over: bool) -> None:
        writer, buffer = self._writer, self.buffer
        store: Callable[[Transition[np.ndarray]], object]
        if writer is not None:
            store = writer.add
        else:
            assert buffer is not None  # made at bind
            store = buffer.add
        if self._n_step is None:
            store(transition)
        else:
            for n_step_transition in self._n_step.add(transition, episode_over):
                store(n_step_transition)
        if writer is not None:
            if episode_over:
                writer.flush()
            return
        assert buffer is not None
        if len(buffer) >= max(self.warmup_steps, 1):
            self._steps_ready += 1

    def abandon_episode(self) -> None:
        """Drop the n-step sums the episode under way had not completed; what is stored stays."""
        if self._n_step is not None:
            self._n_step.clear()

    def updates_due(self) -> int:
        """Batches :meth:`learn` would send now: the updates earned by the ``n`` steps stored since the
        buffer held ``warmup_steps`` (``ceil(n * updates_per_step)``, computed exactly) less those sent."""
        ratio = self._ratio  # a fraction, so 10 steps at 0.1 earn exactly 1 (10 * 0.1 < 1 in floats)
        earned = -(-self._steps_ready * ratio.numerator // ratio.denominator)  # rounded up: the first at warm-up
        return earned - self._updates_sent

    def learn(self) -> Optional[Costs]:
        """Send one sampled batch per update due (see :meth:`updates_due`), each waited for in turn,
        or handed over with at most ``max_in_flight`` in flight; returns the costs of the last
        update finished, or None when none finished."""
        if self._writer is not None:
            return None  # the learner samples the stored transitions itself
        if self.max_in_flight:
            return self._hand_over()
        costs = None
        buffer = self.buffer
        assert buffer is not None  # made at bind
        for _ in range(self.updates_due()):
            self._updates_sent += 1
            if not isinstance(buffer, PrioritizedReplayBuffer):
                costs = self.communicator.learn(buffer.sample(self.batch_size, self._rng))
                continue
            batch, slots = buffer.sample(self.batch_size, self._rng)
            costs = self.communicator.learn(batch)
            self._update_priorities(slots, costs)
        return costs

    def _hand_over(self) -> Optional[Costs]:
        """:meth:`learn` with batches handed over, at most ``max_in_flight`` in flight."""
        comm, buffer = self.communicator, self.buffer
        assert buffer is not None  # made at bind
        finished = self._taken(comm.take_costs(wait=False))
        for _ in range(self.updates_due()):
            if comm.batches_in_flight() >= self.max_in_flight:
                finished += self._taken(comm.take_costs(wait=True))  # the bound: wait for the oldest
            self._updates_sent += 1
            if not isinstance(buffer, PrioritizedReplayBuffer):
                comm.put_batch(buffer.sample(self.batch_size, self._rng))
                continue
            batch, slots = buffer.sample(self.batch_size, self._rng)
            comm.put_batch(batch)
            self._slots_in_flight.append(slots)
        finished += self._taken(comm.take_costs(wait=False))
        return finished[-1] if finished else None

    def finish(self) -> None:
        """Wait for the batches still in flight (their priorities updated), so every batch sent is learned."""
        _wait_for_flights(self._comm, self.max_in_flight, self._taken)

    def _taken(self, finished: List[Costs]) -> List[Costs]:
        """``finished`` (costs of handed-over batches, oldest first), after updating the priorities of
        their rows (prioritized replay)."""
        if self.prioritized:
            for costs in finished:
                self._update_priorities(self._slots_in_flight.popleft(), costs)
        return finished

    def _update_priorities(self, slots: np.ndarray, costs: Mapping[str, object]) -> None:
        """The rows in ``slots`` take the priorities of their update's ``td_error``; the rows of an
        update the task skipped (a non-finite loss or gradient: no ``td_error``) keep theirs."""
        td_errors = _td_errors(costs, len(slots))
        if td_errors is not None:
            assert isinstance(self.buffer, PrioritizedReplayBuffer)  # only prioritized replay sends rows' slots
            self.buffer.update_priorities(slots, td_errors)


def _wait_for_flights(comm: Optional[Communicator], max_in_flight: int, taken: Callable[[List[Costs]], object]) -> None:
    """Wait until every batch ``comm`` has in flight is learned, handing each finished lot of costs to
    ``taken``; nothing to wait for without a communicator or with ``max_in_flight`` 0 (none handed over)."""
    if comm is None or not max_in_flight:
        return
    while comm.batches_in_flight():
        taken(comm.take_costs(wait=True))


def _td_errors(costs: Mapping[str, object], rows: int) -> Optional[np.ndarray]:
    """This batch's per-row ``td_error`` from the costs of one update; None when the task skipped it."""
    td_error = costs.get("td_error")
    if td_error is None and costs.get("skipped_updates"):
        return None
    if td_error is None:
        raise ValueError(
            "prioritized replay needs Algorithm.learn to return a per-row 'td_error' (one optimizer step per "
            f"batch), got costs {sorted(costs)}"
        )
    td_error = np.asarray(td_error).reshape(-1)
    if td_error.size != rows:
        raise ValueError(f"td_error has {td_error.size} values, the batch sent has {rows} rows")
    return td_error


def _stack_segment(transitions: List[Transition[np.ndarray]], versions: List[Optional[int]]) -> Transition[np.ndarray]:
    """One agent's consecutive transitions as a batch marked as one time-ordered segment, so the wrapper
    may join it with other agents' segments, with each row's weights version where all are known."""
    stamped = None if None in versions else np.array(versions, dtype=np.int64).reshape(-1, 1)
    return join(transitions, np.stack, sequence_lengths=(len(transitions),), behaviour_version=stamped)
