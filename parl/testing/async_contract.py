"""The placement contract's cases of learning without waiting (:class:`AsyncLearnerContract`, a part of
:class:`~parl.testing.PlacementContract`).

Agents whose on-policy helpers hand their segments over (``OnPolicyHelper(max_in_flight=2)``, what
option ``asynchronous`` of placements ``ray`` and ``processes`` sets) must, in every placement:

- keep stepping while an update is slow, up to their segments in flight, and no further;
- have the staleness of their segments counted (each carries its weights version);
- have the segments beyond ``max_staleness`` dropped and counted (the placement's own option where it
  has one, else the task's wrapper bound);
- lose nothing at stop: every segment handed over before a drain is learned or counted as dropped.
"""

from __future__ import annotations

import parl
from parl.testing.echo import LEARN_BLOCK, WAIT, CountEnv, OnceMarkedEnv, ReportingEchoAgent, echo_algorithm
from parl.testing.placement_cases import Robots, open_gates
from parl.testing.watching import stays, wait_for

#: Segments each agent may have in flight in these cases.
IN_FLIGHT = 2


def _handing_over(interval: int = 2) -> parl.OnPolicyHelper:
    return parl.OnPolicyHelper(sample_interval=interval, max_in_flight=IN_FLIGHT)


def _bounded(robot: Robots, max_staleness: int) -> parl.Manager:
    """A robot of one echo task "T" whose segments more than ``max_staleness`` versions behind are dropped."""
    if robot.case.takes_option("max_staleness"):
        return robot(options={"max_staleness": max_staleness})
    manager = robot()
    manager.wrappers["T"].bound_staleness(max_staleness)
    return manager


def _learned_rows(manager: parl.Manager) -> int:
    return sum(len(batch) for batch in echo_algorithm(manager.tasks["T"]).learn_batches)


class AsyncLearnerContract:
    """The cases of learning without waiting, run over every placement case."""

    def test_an_agent_keeps_stepping_while_its_update_is_slow_up_to_its_segments_in_flight(self, robot: Robots) -> None:
        manager = robot()
        manager.add_agent(
            ReportingEchoAgent(CountEnv(0, length=12, marker=LEARN_BLOCK), num_games=1), {"T": _handing_over()}
        )
        wrapper, algorithm = manager.wrappers["T"], echo_algorithm(manager.tasks["T"])
        manager.start()
        assert algorithm.entered.wait(WAIT)  # the first segment's update is under way, held
        # The agent stepped on and handed the next segment over, then waits: at most IN_FLIGHT in flight.
        assert wait_for(lambda: wrapper.training_queue.puts >= IN_FLIGHT)
        assert stays(lambda: wrapper.training_queue.puts, 0.3) and wrapper.training_queue.puts == IN_FLIGHT
        open_gates(manager.tasks["T"])
        episodes = manager.join(timeout=WAIT * 2)
        assert manager.errors == [] and len(episodes) == 1 and episodes[0]["mismatches"] == 0
        assert _learned_rows(manager) == 12  # every segment learned once the update went on

    def test_the_staleness_of_every_segment_is_counted_and_within_its_segments_in_flight(self, robot: Robots) -> None:
        manager = robot()
        manager.add_agent(ReportingEchoAgent(CountEnv(0, length=8), num_games=3), {"T": _handing_over()})
        manager.start()
        assert len(manager.join(timeout=WAIT * 2)) == 3 and manager.errors == []
        staleness = manager.wrappers["T"].staleness
        assert staleness.measured_segments == 12 and staleness.dropped_segments == 0  # 3 games of 4 segments
        # A segment is acted after the updates of all but the IN_FLIGHT segments before it.
        assert 0 <= staleness.total_staleness <= IN_FLIGHT * 12
        row = staleness.metrics("T")
        assert 0.0 <= row["async/T/staleness_mean"] <= row["async/T/staleness_max"] <= IN_FLIGHT
        assert _learned_rows(manager) == 24

    def test_segments_beyond_max_staleness_are_dropped_and_counted(self, robot: Robots) -> None:
        manager = _bounded(robot, 0)
        env = OnceMarkedEnv(0, length=6, marker=LEARN_BLOCK, marked_episode=0)
        manager.add_agent(ReportingEchoAgent(env, num_games=2), {"T": _handing_over()})
        wrapper, task = manager.wrappers["T"], manager.tasks["T"]
        manager.start()
        assert echo_algorithm(task).entered.wait(WAIT)
        # The next segment is acted with the weights of before the held update: one version behind after it.
        assert wait_for(lambda: wrapper.training_queue.puts >= IN_FLIGHT)
        open_gates(task)
        assert len(manager.join(timeout=WAIT * 2)) == 2 and manager.errors == []
        dropped = wrapper.staleness.dropped_segments
        assert dropped >= 1 and wrapper.staleness.metrics("T")["async/T/dropped_segments"] == dropped
        assert _learned_rows(manager) + 2 * dropped == 12  # 6 segments of 2 steps: learned or dropped

    def test_every_segment_handed_over_before_a_drain_is_learned_or_dropped(self, robot: Robots) -> None:
        manager = _bounded(robot, 1)
        for code in range(3):
            manager.add_agent(ReportingEchoAgent(CountEnv(code, length=6), num_games=None), {"T": _handing_over()})
        wrapper = manager.wrappers["T"]
        manager.start()
        assert wait_for(lambda: wrapper.training_queue.puts >= 12)
        before = wrapper.training_queue.puts  # handed over before the drain: each learned or dropped
        assert manager.drain(WAIT) == []
        manager.stop()
        # An agent in the middle of its step when the drain began hands one more segment over (learned
        # too if it comes before the drain returns): never one learned twice, none of `before` lost.
        accounted = _learned_rows(manager) + 2 * wrapper.staleness.dropped_segments
        assert 2 * before <= accounted <= 2 * wrapper.training_queue.puts
