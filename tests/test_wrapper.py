"""ComputationWrapper under concurrency: how requests are batched (max_batchsize, min_batchsize,
max_training_batchsize, training_timeout), and what the threads placement alone does on stop.

What every placement keeps (replies, learning, errors, stop, pause) is tests/test_placement_contract.py.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Sequence

import numpy as np
import pytest

import parl

from toys import (
    LEARN_BLOCK,
    PREDICT_BLOCK,
    WAIT,
    CountEnv,
    EchoAgent,
    EchoAlgorithm,
    Sender,
    acquire_n,
    count_puts,
    echo_batch,
    echo_obs,
    parl_threads,
    senders,
)


def requests_behind_a_blocked_loop(wrapper, request: str, codes: Sequence[int]) -> List[Sender]:
    """Block the wrapper's prediction loop (``request`` "predict") or training loop ("learn") with such a
    request of agent 99 held inside the algorithm, queue one request of each agent of ``codes`` behind it,
    then open the gate; returns the senders of ``codes`` (in order) once all, the blocker's too, have
    finished without error."""

    def call(code: int, marker: float = 0.0) -> Callable[[], object]:
        if request == "predict":
            return lambda: wrapper.communicator(code).predict({"obs": echo_obs(code, 0, marker)}, None)
        return lambda: wrapper.communicator(code).learn(echo_batch(code, marker=marker))

    algorithm = wrapper.task.algorithm
    puts = count_puts(wrapper.prediction_queue if request == "predict" else wrapper.training_queue)
    blocker = Sender(call(99, PREDICT_BLOCK if request == "predict" else LEARN_BLOCK), "blocker")
    blocker.start()
    assert algorithm.entered.wait(WAIT)
    waiting = [Sender(call(code), str(code)) for code in codes]
    for s in waiting:
        s.start()
    assert acquire_n(puts, len(waiting) + 1)
    algorithm.gate.set()
    for s in [blocker] + waiting:
        assert s.done.wait(WAIT) and s.error is None, s.error
    return waiting


def queued_learners(wrapper, codes: Sequence[int]) -> List[Sender]:
    """Started senders, one per agent of ``codes``, each learning one echo batch; returns once all their
    batches are on the training queue."""
    puts = count_puts(wrapper.training_queue)
    learners = [Sender(lambda c=c: wrapper.communicator(c).learn(echo_batch(c)), str(c)) for c in codes]
    for s in learners:
        s.start()
    assert acquire_n(puts, len(learners))
    return learners


def learner_held_inside_learn(wrapper) -> Sender:
    """A started sender of agent 9 whose update the algorithm holds (until its gate opens); returns once the
    training thread is inside ``learn``."""
    learner = Sender(lambda: wrapper.communicator(9).learn(echo_batch(9, marker=LEARN_BLOCK)), "learner")
    learner.start()
    assert wrapper.task.algorithm.entered.wait(WAIT)
    return learner


# -- prediction batches ---------------------------------------------------------


def test_a_full_prediction_batch_is_capped_by_max_batchsize(make_wrapper) -> None:
    wrapper = make_wrapper(max_batchsize=3)
    algorithm = wrapper.task.algorithm
    waiting = requests_behind_a_blocked_loop(wrapper, "predict", range(7))
    assert [len(b) for b in algorithm.prediction_batches] == [1, 3, 3, 1]
    assert all(int(s.result[0]["action"][0]) == 1000 * c for c, s in enumerate(waiting))


# -- min_batchsize ----------------------------------------------------------------


def test_learn_waits_for_min_batchsize_agents(make_wrapper) -> None:
    wrapper = make_wrapper(min_batchsize=3, training_timeout=60.0)
    algorithm = wrapper.task.algorithm
    first = queued_learners(wrapper, (0, 1))
    # Two agents' batches are queued; with min_batchsize=3 nobody may be trained yet.
    assert not first[0].done.wait(0.3)
    assert algorithm.learn_batches == []
    third = Sender(lambda: wrapper.communicator(2).learn(echo_batch(2)), "2")
    third.start()
    for s in first + [third]:
        assert s.done.wait(WAIT) and s.error is None
        assert s.result["rows"] == 6.0  # every sender got the costs of the joint batch
    assert len(algorithm.learn_batches) == 1
    assert senders(algorithm.learn_batches[0]) == [0, 1, 2]
    assert wrapper.task.update_steps == 1
    assert (wrapper.stats.training_batches, wrapper.stats.training_requests) == (1, 3)


def test_an_update_waits_for_no_more_agents_than_can_send_as_the_placement_says(make_wrapper) -> None:
    wrapper = make_wrapper(min_batchsize=3, training_timeout=60.0)
    algorithm = wrapper.task.algorithm
    absent = [0]
    wrapper.limit_batch_wait(lambda: absent[0])
    (first,) = queued_learners(wrapper, (0,))
    assert not first.done.wait(0.2) and algorithm.learn_batches == []  # none absent: it waits for three
    absent[0] = 2  # two cannot send: the waiting update is read again and learns the one batch at once
    assert first.done.wait(WAIT) and first.error is None and first.result["rows"] == 2.0
    absent[0] = 5  # more than min_batchsize: an update still waits for at least one batch
    assert wrapper.wanted_batches() == 1
    absent[0] = 0
    assert wrapper.wanted_batches() == 3
    assert [senders(b) for b in algorithm.learn_batches] == [[0]]


def test_max_training_batchsize_caps_the_batches_joined_per_update(make_wrapper) -> None:
    wrapper = make_wrapper(max_training_batchsize=2)
    algorithm = wrapper.task.algorithm
    requests_behind_a_blocked_loop(wrapper, "learn", (0, 1, 2))
    joined = [senders(b) for b in algorithm.learn_batches[1:]]
    assert sorted(len(j) for j in joined) == [1, 2]  # three waiting batches: one update of two, one of one
    assert sorted(c for j in joined for c in j) == [0, 1, 2]


def test_min_batchsize_above_max_training_batchsize_is_refused() -> None:
    task = parl.ComputationTask("T", EchoAlgorithm())
    with pytest.raises(ValueError, match=r"min_batchsize \(3\).*\(2\)"):
        parl.ComputationWrapper(task, batching=parl.Batching(min_batchsize=3, max_training_batchsize=2))


def test_a_lone_batch_is_trained_after_the_timeout(make_wrapper) -> None:
    timeout = 0.1
    wrapper = make_wrapper(min_batchsize=3, training_timeout=timeout)
    algorithm = wrapper.task.algorithm
    start = time.monotonic()
    costs = wrapper.communicator(5).learn(echo_batch(5, rows=4))
    elapsed = time.monotonic() - start
    assert timeout <= elapsed < WAIT
    assert costs["rows"] == 4.0 and np.isfinite(costs["loss"])
    assert [senders(b) for b in algorithm.learn_batches] == [[5]]
    assert wrapper.task.update_steps == 1


# -- draining before a stop ----------------------------------------------------------------


def test_drain_learns_the_queued_batches_without_waiting_for_min_batchsize(make_wrapper) -> None:
    # The step budget is reached while two agents' last segments wait for a third (min_batchsize=3,
    # a long training_timeout): drain learns them at once, and stop then fails nothing.
    wrapper = make_wrapper(min_batchsize=3, training_timeout=60.0)
    algorithm = wrapper.task.algorithm
    waiting = queued_learners(wrapper, (0, 1))
    assert not waiting[0].done.wait(0.2) and algorithm.learn_batches == []
    start = time.monotonic()
    assert wrapper.drain(timeout=WAIT)
    assert time.monotonic() - start < WAIT
    for s in waiting:
        assert s.done.wait(WAIT) and s.error is None and s.result["rows"] == 4.0
    assert [senders(b) for b in algorithm.learn_batches] == [[0, 1]]
    # Predictions are held from the drain on: no agent steps past the end.
    predicting = Sender(lambda: wrapper.communicator(3).predict({"obs": echo_obs(3, 0)}, None), "3")
    predicting.start()
    assert not predicting.done.wait(0.3) and wrapper.paused
    wrapper.stop()
    assert predicting.done.wait(WAIT) and isinstance(predicting.error, parl.core.errors.StoppedError)
    assert wrapper.task.update_steps == 1


def test_drain_waits_for_the_update_under_way_and_gives_up_at_its_timeout(make_wrapper) -> None:
    wrapper = make_wrapper()
    algorithm = wrapper.task.algorithm
    learner = learner_held_inside_learn(wrapper)
    start = time.monotonic()
    assert not wrapper.drain(timeout=0.2)  # the update has not ended: not drained
    assert 0.2 <= time.monotonic() - start < WAIT
    drainer = Sender(lambda: wrapper.drain(timeout=WAIT), "drainer")
    drainer.start()
    assert not drainer.done.wait(0.2)
    algorithm.gate.set()
    assert drainer.done.wait(WAIT) and drainer.result is True
    assert learner.done.wait(WAIT) and learner.error is None


def test_drain_of_a_paused_or_stopped_wrapper_returns_at_once(make_wrapper) -> None:
    wrapper = make_wrapper(min_batchsize=2, training_timeout=60.0)
    (waiting,) = queued_learners(wrapper, (0,))
    wrapper.pause()
    start = time.monotonic()
    assert not wrapper.drain(timeout=WAIT)
    assert time.monotonic() - start < 1.0
    wrapper.stop()
    assert waiting.done.wait(WAIT) and isinstance(waiting.error, parl.core.errors.StoppedError)
    assert not wrapper.drain(timeout=WAIT)
    with pytest.raises(ValueError, match="timeout"):
        wrapper.drain(timeout=0.0)


# -- stopping ----------------------------------------------------------------------------


def _agent_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("parl-agent-")]


def test_stop_ends_agent_threads_before_a_stuck_prediction_returns(make_manager) -> None:
    # Agents blocked on a prediction stuck inside the algorithm end at once; stop itself returns
    # once the wrapper's thread is free. (Cooperative agents run in the thread that is stuck.)
    manager = make_manager()
    for code in range(4):
        manager.add_agent(EchoAgent(CountEnv(code, marker=PREDICT_BLOCK), num_games=3), {"T": parl.OnPolicyHelper()})
    algorithm = manager.tasks["T"].algorithm
    manager.start()
    assert algorithm.entered.wait(WAIT)  # the prediction loop is stuck inside the algorithm
    assert len(_agent_threads()) == 4
    stopper = Sender(manager.stop, "stopper")
    stopper.start()
    for thread in _agent_threads():
        thread.join(WAIT)
    assert _agent_threads() == []
    assert not stopper.done.is_set() and not algorithm.gate.is_set()
    algorithm.gate.set()  # now the prediction loop can end too
    assert stopper.done.wait(WAIT) and stopper.error is None
    assert parl_threads() == []


def test_stop_waits_past_its_timeout_for_the_update_under_way(make_wrapper) -> None:
    # An update cannot be interrupted: a stop during one returns once it has ended (the task is then
    # whole and can be saved), not at its timeout with the training thread still inside the task.
    wrapper = make_wrapper()
    algorithm = wrapper.task.algorithm
    learner = learner_held_inside_learn(wrapper)
    stopper = Sender(lambda: wrapper.stop(timeout=0.05), "stopper")
    stopper.start()
    assert learner.done.wait(WAIT) and isinstance(learner.error, parl.core.errors.StoppedError)
    assert not stopper.done.wait(0.3) and wrapper.alive  # well past the timeout, still waiting
    algorithm.gate.set()
    assert stopper.done.wait(WAIT) and stopper.error is None
    assert not wrapper.alive and wrapper.task.update_steps == 1
