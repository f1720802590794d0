"""The update-to-data ratio of replay helpers: the same updates for the same env steps in every placement,
and replay samples never joined into one update (on-policy segments still are)."""

from __future__ import annotations

import math
import threading
from typing import List

import pytest

import parl

from toys import WAIT, CountEnv, EchoAgent, EchoAlgorithm, Robots, echo_batch, replay_sample

AGENTS = 4
GAMES = 5
EPISODE_STEPS = 7
WARMUP = 6


def expected_updates(updates_per_step: float) -> int:
    """What each agent's helper must send: one update per ``1 / updates_per_step`` steps from the
    step that fills the warm-up on (that step included), rounded up."""
    steps = GAMES * EPISODE_STEPS
    return AGENTS * math.ceil(round((steps - WARMUP + 1) * updates_per_step, 9))


@pytest.mark.parametrize(
    "updates_per_step, max_in_flight", [(0.25, 0), (0.5, 0), (1.0, 0), (1.5, 0), (0.5, 2), (1.5, 3)]
)
def test_every_placement_makes_the_updates_its_ratio_earns(
    robot: Robots, updates_per_step: float, max_in_flight: int
) -> None:
    # Every agent's batches may arrive at once (max_training_batchsize None joins up to 256 of them),
    # and thread timing decides which do; the count of updates must not depend on it, nor on batches
    # being handed over without waiting. The test runs in every placement case of the placement
    # contract (tests/conftest.py).
    manager = robot(min_batchsize=2, training_timeout=0.005)
    for code in range(AGENTS):
        helper = parl.ExpReplayHelper(
            capacity=100,
            batch_size=4,
            warmup_steps=WARMUP,
            updates_per_step=updates_per_step,
            seed=code,
            max_in_flight=max_in_flight,
        )
        manager.add_agent(EchoAgent(CountEnv(code, length=EPISODE_STEPS), num_games=GAMES), {"T": helper})
    manager.start()
    episodes = manager.join(timeout=WAIT * 4)
    assert manager.errors == []
    assert sum(e["steps"] for e in episodes) == AGENTS * GAMES * EPISODE_STEPS
    batches = manager.tasks["T"].algorithm.learn_batches
    assert len(batches) == manager.wrappers["T"].stats.snapshot().updates == expected_updates(updates_per_step)
    assert {len(batch) for batch in batches} == {4}  # one agent's sample per update, never two joined


def test_the_wrapper_joins_segments_but_learns_each_replay_sample_alone(make_wrapper) -> None:
    algorithm = EchoAlgorithm()
    wrapper = make_wrapper(algorithm, min_batchsize=5, training_timeout=1.0)
    requests = [
        (0, echo_batch(0, rows=3)),
        (1, replay_sample(1, 4)),
        (2, echo_batch(2, rows=2)),
        (3, replay_sample(3, 4)),
    ]
    requests.append((4, echo_batch(4, rows=1)))
    costs: List[dict] = [{} for _ in requests]

    def send(i: int, batch: parl.Transition) -> None:
        costs[i] = wrapper.communicator(i).learn(batch)

    threads = [threading.Thread(target=send, args=(i, batch)) for i, batch in requests]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    # Five batches taken at once: the two replay samples alone, the three segments as one update.
    assert sorted(len(batch) for batch in algorithm.learn_batches) == [4, 4, 6]
    assert wrapper.stats.snapshot().updates == 3
    assert [c["rows"] for c in costs] == [6.0, 4.0, 6.0, 4.0, 6.0]
