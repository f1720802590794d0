"""Learning without waiting: Communicator.put_batch / take_costs, and ExpReplayHelper(max_in_flight=k).

A handed-over batch is learned while its agent goes on; its costs come back later, in the order the
batches were handed over, a failed update's error in its place; a helper keeps at most k batches in
flight and sends exactly the batches it would send waiting.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest

import parl
from parl.core.errors import RemoteError

from toys import LEARN_BLOCK, LEARN_FAIL, WAIT, CountEnv, EchoAlgorithm, EchoModel, replay_sample, specs


class HandOverAgent(parl.Agent):
    """Hands over a blocked batch, then two more (the second failing), and reads what comes back."""

    def __init__(self, algorithm: EchoAlgorithm) -> None:
        super().__init__(CountEnv(0), num_games=1)
        self.algorithm = algorithm
        self.seen: Dict[str, object] = {}

    def run_one_episode(self) -> Dict[str, float]:
        comm = self.helpers["T"].communicator
        comm.put_batch(replay_sample(0, rows=2, marker=LEARN_BLOCK))
        if not self.algorithm.entered.wait(WAIT):  # the training thread is inside the first update
            raise AssertionError("the first batch never reached the algorithm")
        comm.put_batch(replay_sample(0, rows=3, marker=LEARN_FAIL))
        comm.put_batch(replay_sample(0, rows=4))
        self.seen["in_flight"] = comm.batches_in_flight()
        self.seen["early"] = comm.take_costs(wait=False)
        self.algorithm.gate.set()
        results: List[object] = []
        while comm.batches_in_flight():
            try:
                results += [costs["rows"] for costs in comm.take_costs(wait=True)]
            except RemoteError as exc:
                results.append(type(exc.original).__name__)
        self.seen["results"] = results
        return {"reward": 0.0, "steps": 1}


@pytest.mark.parametrize("placement", ["threads", "cooperative"])
def test_handed_over_costs_come_back_in_order_with_a_failure_in_its_place(placement: str) -> None:
    algorithm = EchoAlgorithm()
    manager = parl.Manager({"T": parl.TaskSettings(lambda: algorithm)}, placement=placement, thread_placement="os")
    agent = HandOverAgent(algorithm)
    manager.add_agent(agent, {"T": parl.OnPolicyHelper()})
    try:
        manager.start()
        manager.join(timeout=WAIT * 2)
    finally:
        algorithm.gate.set()
        manager.stop()
    assert manager.errors == []
    assert agent.seen["in_flight"] == 3 and agent.seen["early"] == []
    assert agent.seen["results"] == [2.0, "ToyFailure", 4.0]


def test_the_default_hand_over_learns_at_once() -> None:
    """Transports without a hand-over of their own (the worker processes') learn in put_batch."""

    class Blocking(parl.Communicator):
        def __init__(self) -> None:
            self.learned: List[int] = []

        def predict(self, inputs, states=None):
            raise AssertionError("not used")

        def learn(self, batch):
            self.learned.append(len(batch.next_episode_end))
            return {"rows": float(self.learned[-1])}

    comm = Blocking()
    comm.put_batch(replay_sample(0, rows=2))
    comm.put_batch(replay_sample(0, rows=3))
    assert comm.learned == [2, 3] and comm.batches_in_flight() == 2
    assert comm.take_costs(wait=False) == [{"rows": 2.0}, {"rows": 3.0}]
    assert comm.batches_in_flight() == 0 and comm.take_costs(wait=True) == []


class LaggingCommunicator:
    """A transport whose updates finish only when the agent waits for them, one at a time."""

    def __init__(self, model: parl.Model) -> None:
        self.input_specs = specs(("obs", [2], "float32"))
        self.state_specs = []
        self.action_specs = specs(("action", [1], "int64"))
        self.reward_specs = specs(("reward", [1], "float32"))
        self.in_flight: List[dict] = []
        self.sent = 0
        self.waits = 0
        self.most_in_flight = 0

    def predict(self, inputs, states=None):
        raise AssertionError("not used")

    def learn(self, batch):
        raise AssertionError("a helper with max_in_flight hands batches over")

    def put_batch(self, batch) -> None:
        self.in_flight.append(batch)
        self.sent += 1
        self.most_in_flight = max(self.most_in_flight, len(self.in_flight))

    def take_costs(self, wait: bool = False):
        if not wait or not self.in_flight:
            return []
        self.waits += 1
        batch = self.in_flight.pop(0)
        rows = len(batch.next_episode_end)
        return [{"loss": 0.0, "td_error": np.full(rows, 2.0, np.float32)}]

    def batches_in_flight(self) -> int:
        return len(self.in_flight)


def store_steps(helper: parl.ExpReplayHelper, steps: int) -> None:
    for step in range(steps):
        obs = np.array([step, 0.0], np.float32)
        helper.store_data({"obs": obs}, {"action": np.array([1])}, 1.0, {"obs": obs + 1}, False, False)
        helper.learn()


@pytest.mark.parametrize("max_in_flight", [1, 2, 3])
def test_a_helper_keeps_at_most_its_bound_in_flight_and_sends_every_batch_due(max_in_flight: int) -> None:
    helper = parl.ExpReplayHelper(capacity=50, batch_size=4, warmup_steps=2, max_in_flight=max_in_flight, seed=0)
    comm = LaggingCommunicator(EchoModel())
    helper.bind(comm)
    store_steps(helper, 10)
    assert comm.sent == 9 and helper.updates_due() == 0  # one per step from the warm one on
    assert comm.most_in_flight == max_in_flight
    assert comm.waits == 9 - max_in_flight  # each batch beyond the bound waited for the oldest


def test_handed_over_td_errors_become_the_priorities_of_their_rows() -> None:
    helper = parl.ExpReplayHelper(capacity=50, batch_size=4, warmup_steps=2, max_in_flight=1, prioritized=True, seed=0)
    comm = LaggingCommunicator(EchoModel())
    helper.bind(comm)
    sampled: List[np.ndarray] = []
    updated: List[np.ndarray] = []
    sample, update = helper.buffer.sample, helper.buffer.update_priorities

    def record_sample(batch_size, rng):
        batch, slots = sample(batch_size, rng)
        sampled.append(slots)
        return batch, slots

    def record_update(slots, td_errors):
        assert np.all(td_errors == 2.0)
        updated.append(slots)
        update(slots, td_errors)

    helper.buffer.sample, helper.buffer.update_priorities = record_sample, record_update
    store_steps(helper, 6)
    assert comm.waits == 4 and len(sampled) == 5  # five batches sent, four learned
    assert [s.tolist() for s in updated] == [s.tolist() for s in sampled[:4]]  # each learned batch's own rows


def test_max_in_flight_is_checked() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        parl.ExpReplayHelper(max_in_flight=-1)
    with pytest.raises(ValueError, match="max_in_flight"):
        parl.ExpReplayHelper(max_in_flight=1.5)


def test_a_lagging_transport_is_only_waited_on_at_the_bound() -> None:
    """Nothing waits below the bound: an agent that never reaches it never blocks in learn."""
    helper = parl.ExpReplayHelper(capacity=50, batch_size=4, warmup_steps=1, max_in_flight=100, seed=0)
    comm = LaggingCommunicator(EchoModel())
    helper.bind(comm)
    store_steps(helper, 20)
    assert comm.waits == 0 and comm.sent == 20 and comm.most_in_flight == 20
