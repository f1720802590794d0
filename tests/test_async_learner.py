"""The asynchronous learner: staleness accounting and its bound, the worker processes' hand-over, the options.

The placement contract's cases of learning without waiting run over every placement in
tests/test_placement_contract.py (:mod:`parl.testing.async_contract`).
"""

from __future__ import annotations

import time
from typing import Dict, List

import numpy as np
import pytest

import parl
from parl.core.errors import RemoteError
from parl.runtime.ray.options import RayOptions
from parl.serving.staleness import Staleness, segment_version
from parl.validation import ParameterError

from toys import (
    LEARN_BLOCK,
    LEARN_FAIL,
    WAIT,
    CountEnv,
    EchoAlgorithm,
    ReportingEchoAgent,
    echo_batch,
    replay_sample,
    wait_for,
)


def segment(code: int, rows: int, version: int) -> parl.Transition:
    """Agent ``code``'s time-ordered segment of ``rows`` steps, acted with weights ``version``."""
    return echo_batch(code, rows=rows)._replace(
        sequence_lengths=(rows,), behaviour_version=np.full((rows, 1), version, np.int64)
    )


# -- staleness -------------------------------------------------------------------------------


def test_versions_behind_are_the_latest_less_the_segments_oldest_row() -> None:
    latest = [7]
    staleness = Staleness(lambda: latest[0])
    assert staleness.versions_behind(7) == 0 and staleness.versions_behind(4) == 3
    assert staleness.versions_behind(9) == 0  # never below 0 (a copy told of a version first)
    assert segment_version(np.array([[5], [3], [4]], np.int64)) == 3 and segment_version(None) is None
    latest[0] = 8
    assert staleness.versions_behind(4) == 4  # read anew each time


def test_the_bound_drops_and_counts_the_segments_beyond_it_and_the_metrics_tell() -> None:
    staleness = Staleness(lambda: 5, max_staleness=1)
    fresh, stale = staleness.split(["a", "b", "c", "d"], [5, 4, 2, None])
    assert fresh == ["a", "b", "d"] and stale == ["c"]  # None: not measured, learned
    assert staleness.dropped_segments == 1 and staleness.measured_segments == 2 and staleness.total_staleness == 1
    assert staleness.metrics("RL") == {
        "async/RL/dropped_segments": 1.0,
        "async/RL/staleness_mean": 0.5,
        "async/RL/staleness_max": 1.0,
    }
    assert staleness.metrics("RL") == {"async/RL/dropped_segments": 1.0}  # none learned since
    unbounded = Staleness(lambda: 100)
    assert unbounded.split(["old"], [0]) == (["old"], []) and unbounded.total_staleness == 100
    with pytest.raises(ValueError, match="max_staleness"):
        Staleness(lambda: 0, max_staleness=-1)


def test_the_wrapper_drops_a_stale_segment_at_learn_time_and_answers_it_with_empty_costs(make_wrapper) -> None:
    wrapper = make_wrapper()
    wrapper.bound_staleness(0)
    comm = wrapper.communicator(0)
    assert wrapper.weights_version == 0 and comm.weights_version() == 0
    assert comm.learn(segment(0, rows=2, version=0))["rows"] == 2.0  # of the latest weights: learned
    assert wrapper.weights_version == 1 and comm.weights_version() == 1
    assert comm.learn(segment(1, rows=3, version=0)) == {}  # one version behind: dropped
    assert comm.learn(echo_batch(2, rows=4))["rows"] == 4.0  # a replay sample carries no version
    assert wrapper.staleness.dropped_segments == 1 and wrapper.weights_version == 2
    assert [len(b) for b in wrapper.task.algorithm.learn_batches] == [2, 4]


def test_an_on_policy_helper_stamps_each_row_with_the_weights_version_it_acted_with() -> None:
    algorithm = EchoAlgorithm()
    manager = parl.Manager({"T": parl.TaskSettings(lambda: algorithm)}, placement="threads", thread_placement="os")
    seen: List[np.ndarray] = []
    original = algorithm.learn

    def learn(batch: parl.Transition) -> Dict[str, object]:
        seen.append(batch.behaviour_version.numpy())
        return original(batch)

    algorithm.learn = learn  # type: ignore[method-assign]

    manager.add_agent(
        ReportingEchoAgent(CountEnv(0, length=6), num_games=1), {"T": parl.OnPolicyHelper(sample_interval=2)}
    )
    manager.start()
    assert len(manager.join(timeout=WAIT)) == 1 and manager.errors == []
    # Waiting for each update: every segment is acted with the weights of all updates before it.
    assert [v.reshape(-1).tolist() for v in seen] == [[0, 0], [1, 1], [2, 2]]


# -- the worker processes' hand-over ------------------------------------------------------------


class ProcessHandOverAgent(parl.Agent):
    """In a worker process: hands over a replay sample whose update is held, then two more (the second
    failing), predicting on while the costs come back, and reports what it saw."""

    def __init__(self) -> None:
        super().__init__(CountEnv(0), num_games=1)

    def run_one_episode(self) -> Dict[str, object]:
        helper = self.helpers["T"]
        comm = helper.communicator
        comm.put_batch(replay_sample(0, rows=2, marker=LEARN_BLOCK))
        comm.put_batch(replay_sample(0, rows=3, marker=LEARN_FAIL))
        comm.put_batch(replay_sample(0, rows=4))
        in_flight = comm.batches_in_flight()
        results: List[object] = []
        deadline = time.monotonic() + WAIT
        while len(results) < 3 and time.monotonic() < deadline:
            helper.predict({"obs": np.array([1.0, 0.0], np.float32)})  # its wait may read costs first
            try:
                results += [costs["rows"] for costs in comm.take_costs(wait=False)]
            except RemoteError as exc:
                results.append("failed: ToyFailure" if "ToyFailure" in str(exc) else str(exc))
            time.sleep(0.01)
        return {"reward": 0.0, "steps": 1, "in_flight": in_flight, "results": results}


def test_the_worker_processes_hand_batches_over_and_take_their_costs_in_order() -> None:
    algorithm = EchoAlgorithm()
    manager = parl.Manager(
        {"T": parl.TaskSettings(lambda: algorithm)},
        placement=parl.ProcessesOptions(workers=1),
        thread_placement="os",
    )
    manager.add_agent(ProcessHandOverAgent(), {"T": parl.OnPolicyHelper()})
    wrapper = manager.wrappers["T"]
    try:
        manager.start()
        assert algorithm.entered.wait(WAIT)  # the first batch's update is under way, held
        # put_batch returned while it was held: the three batches reached the parent before the gate opened.
        assert wait_for(lambda: wrapper.training_queue.puts == 3)
        algorithm.gate.set()
        episodes = manager.join(timeout=WAIT * 2)
    finally:
        algorithm.gate.set()
        manager.stop()
    assert manager.errors == [] and len(episodes) == 1
    record = episodes[0]
    assert record["in_flight"] == 3
    assert record["results"] == [2.0, "failed: ToyFailure", 4.0]  # in the order handed over


# -- options ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [RayOptions, parl.ProcessesOptions])
def test_the_asynchronous_options_are_checked_naming_the_option(kind: type) -> None:
    assert kind(asynchronous=True, segments_in_flight=3, max_staleness=2).segments_in_flight == 3
    with pytest.raises(ParameterError, match="asynchronous.*'yes'"):
        kind(asynchronous="yes")
    with pytest.raises(ValueError, match="segments_in_flight.*0"):
        kind(segments_in_flight=0)
    with pytest.raises(ValueError, match="max_staleness.*-1"):
        kind(max_staleness=-1)


def test_an_on_policy_helper_checks_its_segments_in_flight() -> None:
    with pytest.raises(ValueError, match="max_in_flight.*-1"):
        parl.OnPolicyHelper(max_in_flight=-1)
