"""The placement contract's multi-agent part: a robot whose agents play multi-agent environments
(:class:`~parl.multiagent.PettingZooAgent`, one helper per environment agent) keeps it in every placement.

:class:`~parl.testing.PlacementContract` holds these tests (its ``robot`` fixture runs them once per
placement case). The environments are those of :mod:`parl.testing.multiagent_envs`, echo environments
whose every row of a batch names its environment copy, its environment agent and its time:

- several environment agents of several environment copies on one task: every agent's transitions
  reach the task in order, its trajectory closed when it leaves (terminated or truncated), with its
  own rewards; an agent entering mid-episode starts a trajectory of its own; every prediction served;
- two tasks by pattern: each task gets the transitions of its own agents only (on-policy segments on
  one, replay samples on the other);
- a turn-based (AEC) environment: a player's transition spans from one of its turns to its next.

These tests skip where pettingzoo is not installed.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np
import pytest

import parl
from parl.multiagent import PettingZooAgent
from parl.testing.echo import EchoAlgorithm
from parl.testing.placement_cases import Robots

#: How long the multi-agent robots may take to play their games (a loaded 2-core machine).
PLAY_SECONDS = 20.0

#: Longer than any episode, so each on-policy segment is one agent's whole trajectory.
WHOLE_TRAJECTORY = 100

#: ComingAndGoingEnv's times (see its docstring): agent index -> (first time, last time, terminated).
LENGTH, END_AT, CUT_AT, ENTER_AT = 6, 2, 4, 3
TRAJECTORIES: Dict[int, Tuple[int, int, bool]] = {
    0: (0, LENGTH - 1, False),  # blue_stay: truncated at the end
    1: (0, END_AT - 1, True),  # blue_end: terminated
    2: (0, CUT_AT - 1, False),  # red_cut: truncated early
    3: (ENTER_AT, LENGTH - 1, False),  # red_late: enters, truncated at the end
}


class ReportingPettingZooAgent(PettingZooAgent):
    """A PettingZooAgent whose episode records also carry ``mismatches`` (actions its environment saw
    that were not the echo of the acting agent's observation) and ``pid``: they reach the test from
    any placement."""

    def run_one_episode(self) -> Dict[str, Any]:
        return {**super().run_one_episode(), "mismatches": self.env.mismatches, "pid": os.getpid()}


def pettingzoo_envs() -> Any:
    """:mod:`parl.testing.multiagent_envs`, or a skip where pettingzoo is not installed."""
    pytest.importorskip("pettingzoo")
    from parl.testing import multiagent_envs

    return multiagent_envs


def add_multiagent(
    manager: parl.Manager, agents: Sequence[PettingZooAgent], helper: Mapping[str, Any], tasks: Sequence[str]
) -> None:
    """Add ``agents``, each with one helper per environment agent: ``helper[task]()`` for its task."""
    for agent in agents:
        keys = agent.helper_tasks(list(tasks))
        manager.add_agent(agent, {key: helper[task]() for key, task in keys.items()})


def learned_rows(algorithm: EchoAlgorithm) -> List[Tuple[int, float, float]]:
    """(echo value, reward, next_episode_end) of every row ``algorithm`` learned, in learning order."""
    return [
        (int(value), float(reward), float(end))
        for obs, rewards, ends in zip(algorithm.learn_batches, algorithm.learn_rewards, algorithm.learn_ends)
        for value, reward, end in zip(obs[:, 0], rewards, ends)
    ]


def learned_segments(algorithm: EchoAlgorithm) -> List[List[Tuple[int, float, float]]]:
    """The rows ``algorithm`` learned, cut into the segments they came in."""
    rows, out, start = learned_rows(algorithm), [], 0
    for lengths in algorithm.learn_lengths:
        for length in lengths:
            out.append(rows[start : start + length])
            start += length
    return out


def expected_trajectory(code: int, index: int) -> List[Tuple[int, float, float]]:
    """The rows of agent ``index`` of ComingAndGoingEnv ``code`` in one episode: value, reward, end."""
    first, last, terminated = TRAJECTORIES[index]
    rows = []
    for time in range(first, last + 1):
        value = 1000 * code + 100 * index + time
        rows.append((value, float(value), 1.0 if terminated and time == last else 0.0))
    return rows


def echo_algorithm_of(manager: parl.Manager, name: str) -> EchoAlgorithm:
    """The EchoAlgorithm of ``manager``'s task ``name``."""
    algorithm = manager.tasks[name].algorithm
    assert isinstance(algorithm, EchoAlgorithm), type(algorithm).__name__
    return algorithm


class MultiAgentContract:
    """The multi-agent tests of the placement contract (see the module docstring); each takes the
    contract's ``robot`` fixture."""

    def test_env_agents_of_several_env_copies_on_one_task_each_learn_their_own_trajectories(
        self, robot: Robots
    ) -> None:
        envs = pettingzoo_envs()
        copies, games = 3, 2
        manager = robot()
        agents = [
            ReportingPettingZooAgent(
                envs.ComingAndGoingEnv(code, length=LENGTH, end_at=END_AT, cut_at=CUT_AT, enter_at=ENTER_AT),
                policy_mapping="T",
                num_games=games,
            )
            for code in range(copies)
        ]
        add_multiagent(manager, agents, {"T": lambda: parl.OnPolicyHelper(sample_interval=WHOLE_TRAJECTORY)}, ["T"])
        manager.start()
        episodes = manager.join(timeout=PLAY_SECONDS)
        assert manager.errors == []
        assert len(episodes) == copies * games
        steps_per_episode = sum(last - first + 1 for first, last, _ in TRAJECTORIES.values())
        assert all(e["steps"] == LENGTH for e in episodes)
        assert max(e["mismatches"] for e in episodes) == 0  # every agent got its own replies
        assert manager.wrappers["T"].stats.snapshot().predictions == copies * games * steps_per_episode

        # Each segment is one environment agent's whole trajectory of one episode, in order, with its
        # own rewards, closed where it left: next_episode_end 1 where terminated, 0 where truncated.
        segments = learned_segments(echo_algorithm_of(manager, "T"))
        by_agent: Dict[Tuple[int, int], List[List[Tuple[int, float, float]]]] = {}
        for segment in segments:
            owners = {(value // 1000, value % 1000 // 100) for value, _, _ in segment}
            assert len(owners) == 1, f"a segment of several environment agents: {segment}"
            by_agent.setdefault(owners.pop(), []).append(segment)
        expected = {
            (code, index): [expected_trajectory(code, index)] * games
            for code in range(copies)
            for index in TRAJECTORIES
        }
        assert by_agent == expected

    def test_two_tasks_by_pattern_each_get_their_own_agents_transitions(self, robot: Robots) -> None:
        envs = pettingzoo_envs()
        copies, games = 2, 2
        manager = robot(tasks=("blue", "red"))
        agents = [
            ReportingPettingZooAgent(
                envs.ComingAndGoingEnv(code, length=LENGTH, end_at=END_AT, cut_at=CUT_AT, enter_at=ENTER_AT),
                policy_mapping={"blue_*": "blue", "red_*": "red"},
                num_games=games,
            )
            for code in range(copies)
        ]
        helpers = {
            "blue": lambda: parl.OnPolicyHelper(sample_interval=WHOLE_TRAJECTORY),
            "red": lambda: parl.ExpReplayHelper(capacity=100, batch_size=2, warmup_steps=2, seed=1),
        }
        add_multiagent(manager, agents, helpers, ["blue", "red"])
        manager.start()
        episodes = manager.join(timeout=PLAY_SECONDS)
        assert manager.errors == []
        assert len(episodes) == copies * games and max(e["mismatches"] for e in episodes) == 0
        blue_returns = [sum(r for _, r, _ in expected_trajectory(c, i)) for c in range(copies) for i in (0, 1)]
        assert sorted(e["reward_blue"] for e in episodes) == sorted(
            np.mean(blue_returns[2 * c : 2 * c + 2]) for c in range(copies) for _ in range(games)
        )
        blue_segments = learned_segments(echo_algorithm_of(manager, "blue"))
        assert sorted(blue_segments) == sorted(
            expected_trajectory(c, i) for c in range(copies) for i in (0, 1) for _ in range(games)
        )
        red_rows = learned_rows(echo_algorithm_of(manager, "red"))
        assert red_rows, "the red task learned nothing"
        red_transitions = {row for c in range(copies) for i in (2, 3) for row in expected_trajectory(c, i)}
        assert set(red_rows) <= red_transitions  # replay samples of red agents' own transitions only
        per_copy = {"blue": 6 + 2, "red": 4 + 3}
        for name, steps in per_copy.items():
            assert manager.wrappers[name].stats.snapshot().predictions == copies * games * steps

    def test_players_of_a_turn_based_env_learn_from_their_turn_to_their_next(self, robot: Robots) -> None:
        envs = pettingzoo_envs()
        copies, games, players, rounds = 2, 2, 3, 2
        manager = robot()
        agents = [
            ReportingPettingZooAgent(
                envs.TurnTakingEnv(code, players=players, rounds=rounds), policy_mapping="T", num_games=games
            )
            for code in range(copies)
        ]
        add_multiagent(manager, agents, {"T": lambda: parl.OnPolicyHelper(sample_interval=WHOLE_TRAJECTORY)}, ["T"])
        manager.start()
        episodes = manager.join(timeout=PLAY_SECONDS)
        assert manager.errors == []
        assert len(episodes) == copies * games and max(e["mismatches"] for e in episodes) == 0
        assert all(e["steps"] == players * rounds for e in episodes)
        turns = players * rounds
        expected = []
        for code in range(copies):
            for player in range(players):
                rows = []
                for turn in range(player, turns, players):
                    value = 1000 * code + 100 * player + turn
                    # Its own turn's reward, then 1 from each turn of the others until its next turn
                    # (or the game's end): the last one closes the game, terminated.
                    others = min(turn + players, turns) - turn - 1
                    rows.append((value, float(value + others), 1.0 if turn + players >= turns else 0.0))
                expected.extend([rows] * games)
        assert sorted(learned_segments(echo_algorithm_of(manager, "T"))) == sorted(expected)
