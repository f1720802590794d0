"""What a Manager keeps of finished episodes: running totals of all of them, the records of the last
``episode_window``, and new_episodes handing each record out once."""

from __future__ import annotations

import threading
import time

import pytest

import parl
from parl.runtime.episode_log import DEFAULT_WINDOW, EpisodeLog, EpisodeTotals

from toys import WAIT, CountEnv, EchoAgent, echo_algorithm_func


def record(agent_id: int, episode: int, steps: int = 3, reward: float = 1.5) -> dict:
    return {"agent_id": agent_id, "episode": episode, "seconds": 0.0, "steps": steps, "reward": reward}


def test_totals_count_every_episode_and_the_window_keeps_the_last() -> None:
    log = EpisodeLog(window=4)
    for i in range(10):
        log.add(record(i % 2, i // 2, steps=i, reward=float(i)))
    assert log.totals() == EpisodeTotals(episodes=10, steps=45, reward_sum=45.0)
    assert log.totals().reward_mean == 4.5
    assert log.agent_totals() == {0: EpisodeTotals(5, 20, 20.0), 1: EpisodeTotals(5, 25, 25.0)}
    assert [r["steps"] for r in log.recent()] == [6, 7, 8, 9]


def test_reading_at_least_once_per_window_sees_every_record_once() -> None:
    log = EpisodeLog(window=5)
    seen = []
    n = 0
    for burst in [0, 1, 5, 3, 5, 2, 0, 4]:  # never more than the window between two reads
        for _ in range(burst):
            log.add(record(0, n))
            n += 1
        seen += [r["episode"] for r in log.read_new()]
    assert seen == list(range(n)) and log.missed == 0
    assert log.read_new() == []


def test_records_that_left_the_window_unread_are_counted_as_missed() -> None:
    log = EpisodeLog(window=3)
    for i in range(8):
        log.add(record(0, i))
    assert [r["episode"] for r in log.read_new()] == [5, 6, 7]
    assert log.missed == 5 and log.totals().episodes == 8


def test_concurrent_writers_lose_nothing_for_a_reader_within_the_window() -> None:
    log = EpisodeLog(window=10_000)
    writers = [threading.Thread(target=lambda a=a: [log.add(record(a, i)) for i in range(2000)]) for a in range(4)]
    seen = []
    for writer in writers:
        writer.start()
    while any(w.is_alive() for w in writers):
        seen += log.read_new()
    seen += log.read_new()
    assert sorted((r["agent_id"], r["episode"]) for r in seen) == [(a, i) for a in range(4) for i in range(2000)]
    assert log.totals().episodes == 8000 and log.missed == 0


@pytest.mark.parametrize("window", [0, -1, 2.5])
def test_a_bad_window_is_named(window) -> None:
    with pytest.raises(ValueError, match=f"episode_window.*{window}"):
        parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, episode_window=window)


def test_the_managers_episode_memory_is_bounded_by_its_window() -> None:
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, episode_window=50)
    for code in range(4):
        manager.add_agent(EchoAgent(CountEnv(code, length=1), num_games=150), {"T": parl.OnPolicyHelper()})
    manager.start()
    episodes = manager.join(timeout=WAIT * 4)
    assert manager.errors == []
    assert len(episodes) == 50 and episodes == manager.episodes()
    assert manager.episode_totals() == EpisodeTotals(episodes=600, steps=600, reward_sum=600.0)
    assert {a: t.episodes for a, t in manager.agent_episode_totals().items()} == {0: 150, 1: 150, 2: 150, 3: 150}
    assert len(manager.new_episodes()) == 50 and manager.missed_episodes == 550


def test_new_episodes_hands_out_every_record_of_a_run_once() -> None:
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())})
    assert manager.episode_window == DEFAULT_WINDOW
    for code in range(4):
        manager.add_agent(EchoAgent(CountEnv(code, length=2), num_games=100), {"T": parl.OnPolicyHelper()})
    manager.start()
    seen = []
    while manager.running():
        seen += manager.new_episodes()
        time.sleep(0.002)
    manager.join(timeout=WAIT * 4)
    seen += manager.new_episodes()
    assert sorted((r["agent_id"], r["episode"]) for r in seen) == [(a, i) for a in range(4) for i in range(100)]
    assert manager.missed_episodes == 0
