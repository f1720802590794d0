"""ComputationWrapper and Manager under concurrency: routing, batching, min_batchsize, errors, stopping."""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Tuple

import numpy as np
import pytest

import parl
from parl.core.errors import StoppedError

from toys import (
    LEARN_BLOCK,
    LEARN_FAIL,
    PREDICT_BLOCK,
    PREDICT_FAIL,
    WAIT,
    CountEnv,
    EchoAgent,
    EchoAlgorithm,
    ToyFailure,
    acquire_n,
    count_puts,
    echo_algorithm_func,
    echo_batch,
    echo_obs,
    parl_threads,
    senders,
)


def run_threads(targets: Dict[str, callable]) -> Dict[str, object]:
    """Run each target in its own thread; returns name -> result or raised exception."""
    results: Dict[str, object] = {}

    def call(name, target):
        try:
            results[name] = target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            results[name] = exc

    threads = [threading.Thread(target=call, args=(n, t), name=f"sender-{n}") for n, t in targets.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 4)
    assert not any(t.is_alive() for t in threads)
    return results


class Sender(threading.Thread):
    """Calls ``fn`` in a thread and records the result or exception; ``done`` is set when it returns."""

    def __init__(self, fn, name: str) -> None:
        super().__init__(name=f"sender-{name}", daemon=True)
        self.fn, self.result, self.error, self.done = fn, None, None, threading.Event()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001
            self.error = exc
        finally:
            self.done.set()


def queue_behind_a_blocked_loop(
    wrapper, queue, blocking_call, calls: Dict[int, callable]
) -> Tuple[Sender, List[Sender]]:
    """Block the loop serving ``queue`` with ``blocking_call``, queue every call of ``calls`` behind it,
    then open the gate; returns the blocker and the senders of ``calls`` (in order), all finished."""
    algorithm = wrapper.task.algorithm
    puts = count_puts(queue)
    blocker = Sender(blocking_call, "blocker")
    blocker.start()
    assert algorithm.entered.wait(WAIT)
    waiting = [Sender(call, str(code)) for code, call in calls.items()]
    for s in waiting:
        s.start()
    assert acquire_n(puts, len(calls) + 1)
    algorithm.gate.set()
    for s in [blocker] + waiting:
        assert s.done.wait(WAIT)
    return blocker, waiting


# -- routing and batching -------------------------------------------------------


def test_64_agents_each_get_their_own_replies(make_wrapper) -> None:
    wrapper = make_wrapper(max_batchsize=64)
    agents, requests = 64, 25
    start = threading.Barrier(agents)

    def agent(code: int):
        comm = wrapper.communicator(code)
        start.wait()
        wrong = []
        for k in range(requests):
            actions, states = comm.predict({"obs": echo_obs(code, k)}, None)
            if states != {} or actions["action"].shape != (1,) or int(actions["action"][0]) != 1000 * code + k:
                wrong.append((k, actions, states))
        return wrong

    results = run_threads({str(code): (lambda c=code: agent(c)) for code in range(agents)})
    assert all(r == [] for r in results.values()), {k: v for k, v in results.items() if v != []}
    stats = wrapper.stats
    assert stats.predictions == agents * requests
    assert sum(len(b) for b in wrapper.task.algorithm.prediction_batches) == agents * requests
    assert stats.max_prediction_batch > 1, "64 agents at once were never batched"
    assert stats.prediction_batches < agents * requests
    assert stats.max_prediction_batch <= 64


def test_64_agents_in_a_manager(make_manager) -> None:
    manager = make_manager(max_batchsize=64)
    for code in range(64):
        manager.add_agent(
            EchoAgent(CountEnv(code, length=6), num_games=2), {"T": parl.OnPolicyHelper(sample_interval=3)}
        )
    manager.start()
    episodes = manager.join(timeout=WAIT * 4)
    assert manager.errors == []
    assert len(episodes) == 128
    assert all(e["steps"] == 6 and e["reward"] == 6.0 for e in episodes)
    assert all(a.replies == 12 and a.mismatches == 0 for a in manager.agents)
    stats = manager.wrappers["T"].stats
    assert stats.max_prediction_batch > 1
    assert stats.training_requests == 64 * 4  # 12 steps in chunks of 3 per agent
    # Every training row reached the algorithm with its sender's own data.
    rows = np.concatenate(manager.tasks["T"].algorithm.learn_batches)
    assert len(rows) == 64 * 12
    expected = [1000 * c + s for c in range(64) for s in range(6) for _ in range(2)]  # two episodes each
    assert sorted(int(v) for v in rows[:, 0]) == sorted(expected)


class CountingHelper(parl.OnPolicyHelper):
    """A helper class with its own predict (counting calls) around the base class's."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def predict(self, inputs, states=None):
        self.calls += 1
        return super().predict(inputs, states)


@pytest.mark.parametrize("placement", ["threads", "cooperative"])
def test_a_helper_that_overrides_predict_is_called_and_plain_helpers_reach_the_task(placement: str) -> None:
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, placement=placement)
    counting, plain = CountingHelper(), parl.OnPolicyHelper()
    manager.add_agent(EchoAgent(CountEnv(0), num_games=2), {"T": counting})
    manager.add_agent(EchoAgent(CountEnv(1), num_games=2), {"T": plain})
    manager.start()
    manager.join(timeout=WAIT)
    manager.stop()
    assert manager.errors == []
    assert counting.calls == 10
    assert [a.replies for a in manager.agents] == [10, 10] and all(a.mismatches == 0 for a in manager.agents)
    assert manager.wrappers["T"].stats.predictions == 20


def test_a_full_prediction_batch_is_capped_by_max_batchsize(make_wrapper) -> None:
    wrapper = make_wrapper(max_batchsize=3)
    algorithm = wrapper.task.algorithm
    blocker, waiting = queue_behind_a_blocked_loop(
        wrapper,
        wrapper.prediction_queue,
        lambda: wrapper.communicator(99).predict({"obs": echo_obs(99, 0, PREDICT_BLOCK)}, None),
        {c: (lambda c=c: wrapper.communicator(c).predict({"obs": echo_obs(c, 0)}, None)) for c in range(7)},
    )
    assert all(s.error is None for s in [blocker] + waiting)
    assert [len(b) for b in algorithm.prediction_batches] == [1, 3, 3, 1]
    assert all(int(s.result[0]["action"][0]) == 1000 * c for c, s in enumerate(waiting))


# -- min_batchsize ----------------------------------------------------------------


def test_learn_waits_for_min_batchsize_agents(make_wrapper) -> None:
    wrapper = make_wrapper(min_batchsize=3, training_timeout=60.0)
    algorithm = wrapper.task.algorithm
    puts = count_puts(wrapper.training_queue)
    first = [Sender(lambda c=c: wrapper.communicator(c).learn(echo_batch(c)), str(c)) for c in (0, 1)]
    for s in first:
        s.start()
    assert acquire_n(puts, 2)
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


def test_max_training_batchsize_caps_the_batches_joined_per_update(make_wrapper) -> None:
    wrapper = make_wrapper(max_training_batchsize=2)
    algorithm = wrapper.task.algorithm
    blocker, queued = queue_behind_a_blocked_loop(
        wrapper,
        wrapper.training_queue,
        lambda: wrapper.communicator(9).learn(echo_batch(9, marker=LEARN_BLOCK)),
        {c: (lambda c=c: wrapper.communicator(c).learn(echo_batch(c))) for c in (0, 1, 2)},
    )
    assert all(s.error is None for s in [blocker] + queued)
    joined = [senders(b) for b in algorithm.learn_batches[1:]]
    assert sorted(len(j) for j in joined) == [1, 2]  # three waiting batches: one update of two, one of one
    assert sorted(c for j in joined for c in j) == [0, 1, 2]


def test_min_batchsize_above_max_training_batchsize_is_refused() -> None:
    task = parl.ComputationTask("T", EchoAlgorithm())
    with pytest.raises(ValueError, match=r"min_batchsize \(3\).*\(2\)"):
        parl.ComputationWrapper(task, min_batchsize=3, max_training_batchsize=2)


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


# -- errors ---------------------------------------------------------------------------


def _check_remote_errors(errors: List[BaseException], where: str, function: str) -> None:
    assert len({id(e) for e in errors}) == len(errors), "each sender gets its own RemoteError"
    for error in errors:
        assert isinstance(error, parl.RemoteError)
        assert isinstance(error.original, ToyFailure)
        message = str(error)
        assert where in message and "ToyFailure" in message
        assert "Traceback (most recent call last)" in message and function in message
        assert error.remote_traceback in message


def test_a_failing_prediction_reaches_every_sender_in_its_batch(make_wrapper) -> None:
    wrapper = make_wrapper()
    algorithm = wrapper.task.algorithm
    # Hold the loop in one batch while three requests (one poisoned) queue up behind it.
    markers = {0: 0.0, 1: PREDICT_FAIL, 2: 0.0}
    blocker, batch = queue_behind_a_blocked_loop(
        wrapper,
        wrapper.prediction_queue,
        lambda: wrapper.communicator(9).predict({"obs": echo_obs(9, 0, PREDICT_BLOCK)}, None),
        {c: (lambda c=c: wrapper.communicator(c).predict({"obs": echo_obs(c, 0, markers[c])}, None)) for c in markers},
    )
    assert blocker.error is None and int(blocker.result[0]["action"][0]) == 9000
    assert senders(algorithm.prediction_batches[1]) == [0, 1, 2]
    _check_remote_errors([s.error for s in batch], "prediction in task 'T'", "_maybe_block_or_fail")
    # The loop goes on serving.
    actions, _ = wrapper.communicator(3).predict({"obs": echo_obs(3, 7)}, None)
    assert int(actions["action"][0]) == 3007
    assert wrapper.alive


def test_a_failing_update_reaches_every_sender_in_its_batch(make_wrapper) -> None:
    wrapper = make_wrapper()
    algorithm, task = wrapper.task.algorithm, wrapper.task
    markers = {0: 0.0, 1: LEARN_FAIL, 2: 0.0}
    blocker, batch = queue_behind_a_blocked_loop(
        wrapper,
        wrapper.training_queue,
        lambda: wrapper.communicator(9).learn(echo_batch(9, marker=LEARN_BLOCK)),
        {c: (lambda c=c: wrapper.communicator(c).learn(echo_batch(c, marker=markers[c]))) for c in markers},
    )
    assert blocker.error is None and blocker.result["rows"] == 2.0
    assert senders(algorithm.learn_batches[1]) == [0, 1, 2]
    _check_remote_errors([s.error for s in batch], "training in task 'T'", "_maybe_block_or_fail")
    assert task.update_steps == 1  # the blocker's batch was trained; the failed one made no update
    weights_after_failure = task.algorithm_weights()
    costs = wrapper.communicator(3).learn(echo_batch(3))
    assert costs["rows"] == 2.0 and task.update_steps == 2
    assert not np.array_equal(task.algorithm_weights()["model"]["fc.w"], weights_after_failure["model"]["fc.w"])
    assert wrapper.alive


def test_an_agent_whose_environment_raises_is_reported_and_the_others_go_on(make_manager) -> None:
    manager = make_manager()
    games = 5
    for code in range(3):
        env = CountEnv(code, fail_at=(1, 2) if code == 1 else None)
        manager.add_agent(EchoAgent(env, num_games=games), {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.start()
    episodes = manager.join(timeout=WAIT * 4)
    assert len(manager.errors) == 1
    error = manager.errors[0]
    assert isinstance(error, parl.AgentError) and isinstance(error.original, ToyFailure)
    assert (error.agent_id, error.episode) == (1, 1)
    message = str(error)
    assert message.startswith("agent 1 failed in episode 1")
    assert "env 1 exploded in episode 1 at step 2" in message
    assert "Traceback (most recent call last)" in message and "_explode" in message and "run_one_episode" in message
    per_agent = {i: sorted(e["episode"] for e in episodes if e["agent_id"] == i) for i in range(3)}
    assert per_agent == {0: list(range(games)), 1: [0], 2: list(range(games))}


# -- stopping ----------------------------------------------------------------------------


def _agent_threads(manager: parl.Manager) -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("parl-agent-")]


def test_stop_releases_agents_blocked_in_predict(make_manager) -> None:
    manager = make_manager()
    for code in range(4):
        manager.add_agent(EchoAgent(CountEnv(code, marker=PREDICT_BLOCK), num_games=3), {"T": parl.OnPolicyHelper()})
    algorithm = manager.tasks["T"].algorithm
    manager.start()
    assert algorithm.entered.wait(WAIT)  # the prediction loop is stuck inside the algorithm
    assert len(_agent_threads(manager)) == 4

    start = time.monotonic()
    stopper = Sender(manager.stop, "stopper")
    stopper.start()
    # The agents are released at once, although the algorithm has not returned.
    for thread in _agent_threads(manager):
        thread.join(WAIT)
    assert _agent_threads(manager) == []
    assert not stopper.done.is_set() and not algorithm.gate.is_set()
    algorithm.gate.set()  # now the prediction loop can end too
    assert stopper.done.wait(WAIT)
    assert stopper.error is None
    assert time.monotonic() - start < 5.0
    assert parl_threads() == []
    assert manager.errors == [] and manager.episodes() == []


def test_stop_reports_a_computation_that_never_returns(make_manager) -> None:
    manager = make_manager()
    manager.add_agent(EchoAgent(CountEnv(0, marker=PREDICT_BLOCK), num_games=1), {"T": parl.OnPolicyHelper()})
    algorithm = manager.tasks["T"].algorithm
    manager.start()
    assert algorithm.entered.wait(WAIT)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"still running 0.2 s after stop: \[.*'T'\]"):
        manager.stop(timeout=0.2)
    assert time.monotonic() - start < 2.0
    algorithm.gate.set()
    manager.stop()
    assert parl_threads() == []


def test_stop_releases_agents_blocked_in_learn(make_manager) -> None:
    manager = make_manager(min_batchsize=5, training_timeout=60.0)
    puts = count_puts(manager.wrappers["T"].training_queue)
    for code in range(2):
        manager.add_agent(EchoAgent(CountEnv(code), num_games=3), {"T": parl.OnPolicyHelper(sample_interval=1)})
    manager.start()
    assert acquire_n(puts, 2)  # both agents sent their first batch; 2 < min_batchsize
    start = time.monotonic()
    manager.stop()
    assert time.monotonic() - start < 5.0
    assert parl_threads() == []
    assert manager.tasks["T"].algorithm.learn_batches == []
    assert manager.errors == [] and manager.episodes() == []


def test_requests_after_stop_raise_stopped_error(make_wrapper) -> None:
    wrapper = make_wrapper()
    comm = wrapper.communicator(0)
    assert int(comm.predict({"obs": echo_obs(0, 1)}, None)[0]["action"][0]) == 1
    wrapper.stop()
    assert not wrapper.alive
    with pytest.raises(StoppedError):
        comm.predict({"obs": echo_obs(0, 2)}, None)
    with pytest.raises(StoppedError):
        comm.learn(echo_batch(0))


# -- pause ---------------------------------------------------------------------------


def _replies(manager: parl.Manager) -> int:
    return sum(agent.replies for agent in manager.agents)


def test_pause_holds_every_agent_at_its_next_prediction_until_resume(make_manager) -> None:
    manager = make_manager()
    for code in range(3):
        manager.add_agent(EchoAgent(CountEnv(code, length=4)), {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.start()
    deadline = time.monotonic() + WAIT
    while _replies(manager) < 30 and time.monotonic() < deadline:
        time.sleep(0.005)
    manager.pause()
    assert manager.wrappers["T"].paused
    time.sleep(0.1)  # a batch taken before the pause may still be answered
    held = _replies(manager)
    time.sleep(0.3)
    assert _replies(manager) == held
    manager.resume()
    assert not manager.wrappers["T"].paused
    deadline = time.monotonic() + WAIT
    while _replies(manager) <= held + 30 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert _replies(manager) > held + 30
    assert manager.errors == []


def test_stop_releases_paused_agents(make_manager) -> None:
    manager = make_manager()
    for code in range(2):
        manager.add_agent(EchoAgent(CountEnv(code)), {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.pause()  # before start: no prediction is ever served
    manager.start()
    time.sleep(0.1)
    assert _replies(manager) == 0
    start = time.monotonic()
    manager.stop()
    assert time.monotonic() - start < 2.0
    assert not manager.running()


def test_pause_waits_for_the_update_under_way_and_starts_no_other(make_manager) -> None:
    manager = make_manager()
    manager.add_agent(EchoAgent(CountEnv(0, marker=LEARN_BLOCK)), {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.add_agent(EchoAgent(CountEnv(1)), {"T": parl.OnPolicyHelper(sample_interval=2)})
    task = manager.tasks["T"]
    algorithm = task.algorithm
    manager.start()
    assert algorithm.entered.wait(WAIT)  # an update is under way, held inside learn
    pausing = Sender(manager.pause, "pauser")
    pausing.start()
    pausing.join(0.3)
    assert pausing.is_alive()  # pause() waits for that update
    algorithm.gate.set()
    pausing.join(WAIT)
    assert not pausing.is_alive()
    updates = task.update_steps
    time.sleep(0.3)
    assert task.update_steps == updates  # paused: no update starts
    manager.resume()
    deadline = time.monotonic() + WAIT
    while task.update_steps == updates and time.monotonic() < deadline:
        time.sleep(0.005)
    assert task.update_steps > updates
    assert manager.errors == []
