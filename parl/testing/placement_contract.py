"""The placement contract: what every placement of agents keeps, as a pytest test class to subclass
from any repository.

    from parl.runtime import registry
    from parl.testing import PlacementCase, PlacementContract

    registry.register("mine", "my_package.runner:MyRunner", options=MyOptions)   # MyOptions: a frozen dataclass

    class TestMyPlacement(PlacementContract):
        cases = [PlacementCase("mine", {"workers": 2})]

Without ``cases`` the class runs over every registered placement (:func:`placement_cases`). Each test
takes the fixture ``robot`` (a :class:`~parl.testing.placement_cases.Robots` of the case), so it runs
once per case; a test that watches predictions inside the Manager's own tasks
(``@in_process_predictions``) does not run for a placement registered ``predicts_in_copies`` (its
agents act through copies of the tasks elsewhere). A case on Ray needs the session fixture
``ray_cluster``: put ``from parl.testing import ray_cluster`` in the ``conftest.py`` beside the test.

The agents are echo agents (:mod:`parl.testing.echo`): each checks that every reply is its own, and
their episode records carry what they saw, so the checks read the same whether the agents ran in this
process or in worker processes. The contract:

- many agents each get their own replies and learn (on-policy segments and replay samples reach the task);
- an agent whose environment raises is reported (agent, episode, original error) and the others go on;
- a failing prediction (raising, or answering the wrong number of rows) fails every agent of its batch
  with a RemoteError, and later requests are served; the same for a failing update;
- a bad sample fails only the agent that sent it, with a ValueError naming the problem;
- stop returns within 5 s (agents playing, paused, waiting on training, or behind a stuck prediction)
  and leaves no thread or process running;
- pause holds every agent at its next prediction until resume, waits for an update under way and starts no other;
- an agent may use two tasks; a helper that overrides predict is called;
- a seeded robot plays the same episodes as in threads;
- the transport of each placement keeps the Communicator contract (ValueError, RemoteError and
  StoppedError in the caller, which may go on), and requests after stop raise StoppedError;
- agents of multi-agent environments, one helper per environment agent, each learn their own
  trajectories (:mod:`parl.testing.multiagent_contract`).
- agents that hand their segments over keep stepping while an update is slow, their staleness is
  counted and bounded, and nothing handed over is lost at a drain (:mod:`parl.testing.async_contract`).

This module imports pytest (its fixtures); ``import parl.testing`` imports it only when one of its
names is asked for.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pytest

import parl
from parl.core.errors import StoppedError
from parl.runtime import registry
from parl.serving.communicator import InProcessCommunicator
from parl.testing.async_contract import AsyncLearnerContract
from parl.testing.echo import (
    LEARN_BLOCK,
    LEARN_FAIL,
    PREDICT_BLOCK,
    PREDICT_FAIL,
    WAIT,
    CountEnv,
    OnceMarkedEnv,
    ReportingEchoAgent,
    SeededCountEnv,
    ToyFailure,
    TwoTaskAgent,
    echo_algorithm,
    echo_algorithm_func,
    echo_batch,
    echo_obs,
    replay_sample,
    senders,
)
from parl.testing.multiagent_contract import MultiAgentContract
from parl.testing.placement_cases import PlacementCase, Robots, placement_cases
from parl.testing.watching import Arrivals, QueueWatch, Sender, announcing, settles, stays, wait_for

F = Callable[..., Any]

#: The attribute :func:`in_process_predictions` sets on a test.
_IN_PROCESS = "parl_in_process_predictions"


def in_process_predictions(test: F) -> F:
    """Mark ``test`` as watching predictions inside the Manager's own tasks and wrappers (queue
    watches, gates, a patched ``task.predict``): it runs only over placements whose agents predict
    through those tasks (not one registered ``predicts_in_copies``)."""
    setattr(test, _IN_PROCESS, True)
    return test


def parametrize_cases(metafunc: Any, cases: Sequence[PlacementCase]) -> None:
    """pytest's ``pytest_generate_tests`` work for a test that takes ``placement_case`` (or ``robot``):
    one run per case of ``cases``, less the placements that predict in copies for a test marked
    :func:`in_process_predictions`."""
    if "placement_case" not in metafunc.fixturenames:
        return
    if getattr(metafunc.function, _IN_PROCESS, False):
        cases = [case for case in cases if not registry.entry(case.placement).predicts_in_copies]
    metafunc.parametrize("placement_case", list(cases), ids=[case.id for case in cases], indirect=True)


def prepare_case(request: Any, monkeypatch: Any) -> PlacementCase:
    """The placement case of this test run (``request.param``) with its fixtures set up and prepared."""
    case: PlacementCase = request.param
    for name in case.fixtures:
        try:
            request.getfixturevalue(name)
        except pytest.FixtureLookupError as exc:
            raise pytest.UsageError(
                f"placement case {case.id!r} needs the fixture {name!r}: add `from parl.testing import {name}` "
                "to the conftest.py beside the test"
            ) from exc
    if case.prepare is not None:
        case.prepare(monkeypatch)
    return case


def robots_of(case: PlacementCase) -> Iterator[Robots]:
    """The ``robot`` fixture's work: Robots of ``case``, every Manager stopped after the test, which must
    leave no thread or process behind."""
    robots = Robots(case)
    yield robots
    robots.close()
    assert robots.leftovers() == []


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[object]:
    """A local Ray cluster on 127.0.0.1, joined by this process: a head and two more nodes of one CPU
    each, started once per test session by the first test that needs it and shut down at the end
    (every process of it is this session's; nothing else is stopped)."""
    from parl.runtime.ray_cluster.local_cluster import start_local_cluster, stop_local_cluster

    cluster = start_local_cluster(nodes=3)
    yield cluster
    stop_local_cluster(cluster)


#: The bound every stop must keep.
STOP_SECONDS = 5.0


def add_agents(manager: parl.Manager, agents: Sequence[parl.Agent], helper: Callable[[int], parl.AgentHelper]) -> None:
    """Add ``agents`` to task "T" of ``manager``, agent ``i`` of them with ``helper(i)``."""
    for i, agent in enumerate(agents):
        manager.add_agent(agent, {"T": helper(i)})


def episodes_by_agent(episodes: Sequence[Mapping[str, Any]]) -> Dict[int, List[Mapping[str, Any]]]:
    """Agent id -> its episode records, in episode order."""
    out: Dict[int, List[Mapping[str, Any]]] = {}
    for record in sorted(episodes, key=lambda e: (e["agent_id"], e["episode"])):
        out.setdefault(int(record["agent_id"]), []).append(record)
    return out


def every_step(codes: Iterable[int], games: int, length: int) -> List[int]:
    """Sorted ``obs[0]`` of every step of ``games`` episodes of ``length`` steps of each CountEnv code."""
    return sorted(1000 * c + s for c in codes for _ in range(games) for s in range(length))


def wait_until_held(manager: parl.Manager, arrivals: Arrivals, predictions: QueueWatch, count: int) -> None:
    """Wait until ``count`` agents of a paused robot sit in a prediction: they announced it on
    ``arrivals``, and where their requests go through the wrapper's prediction queue, are on it."""
    assert arrivals.wait(count), "the agents never reached their prediction"
    # An agent announces before its request is sent; a request through the queue is seen there. (A
    # cooperative agent parks before the scheduler, in the same thread, can look at anything.)
    through_queue = not registry.entry(manager.placement).predicts_in_copies and all(
        type(helper.communicator).predict is InProcessCommunicator.predict
        for agent in manager.agents
        for helper in agent.helpers.values()
    )
    if through_queue:
        assert predictions.wait(lambda w: len(w.puts) >= count)


def timed_stop(manager: parl.Manager) -> float:
    """Seconds ``manager.stop()`` took."""
    start = time.monotonic()
    manager.stop()
    return time.monotonic() - start


# -- replies and learning -------------------------------------------------------------------------


class CountingHelper(parl.OnPolicyHelper):
    """A helper class with its own predict (counting calls) around the base class's."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def predict(self, inputs, states=None):
        self.calls += 1
        return super().predict(inputs, states)


class CountingAgent(ReportingEchoAgent):
    """Its records also carry ``helper_calls``: the predict calls its helper counted (None: a plain helper)."""

    def run_one_episode(self) -> Dict[str, Any]:
        return {**super().run_one_episode(), "helper_calls": getattr(self.helpers["T"], "calls", None)}


# -- errors -------------------------------------------------------------------------------------------


#: A marker that makes the task answer one row too few for its batch (see ``answers_one_row_short``).
ANSWER_SHORT = -5.0


def answers_one_row_short(task: parl.ComputationTask) -> None:
    """Make ``task`` answer one row of actions too few for a batch holding the ANSWER_SHORT marker."""
    predict = task.predict

    def predict_short(inputs, states, **kwargs):
        actions, next_states = predict(inputs, states, **kwargs)
        if (inputs["obs"][:, 1] == ANSWER_SHORT).any():
            actions = {name: values[:-1] for name, values in actions.items()}
        return actions, next_states

    vars(task)["predict"] = predict_short  # shadows the method for this task


#: Bad samples: how an agent makes one from its inputs, and what the ValueError says.
BAD_SAMPLES: Dict[str, Tuple[Callable[[dict], dict], str]] = {
    "wrong-shape": (
        lambda inputs: {"obs": np.zeros(3, np.float32)},
        "task 'T' input 'obs': expected shape [2], got [3]",
    ),
    "unconvertible-dtype": (
        lambda inputs: {"obs": np.array(["a", "b"])},
        "task 'T' input 'obs': expected dtype float32",
    ),
    "missing-key": (lambda inputs: {}, "task 'T' input: expected keys ['obs'], got []"),
}


def seeded_episodes(manager: parl.Manager) -> List[tuple]:
    """Six seeded agents play three games each in ``manager``; their sorted episode records."""
    add_agents(
        manager,
        [ReportingEchoAgent(SeededCountEnv(code), num_games=3, seed=100 + code) for code in range(6)],
        lambda i: parl.OnPolicyHelper(sample_interval=3),
    )
    manager.start()
    episodes = manager.join(timeout=WAIT * 2)
    assert manager.errors == []
    return sorted(
        (e["agent_id"], e["episode"], e["steps"], e["reward"], e["replies"], e["mismatches"]) for e in episodes
    )


@functools.lru_cache(maxsize=1)
def seeded_episodes_in_threads() -> Tuple[tuple, ...]:
    """:func:`seeded_episodes` in placement "threads" (played once per test session)."""
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, placement="threads", thread_placement="os")
    try:
        return tuple(seeded_episodes(manager))
    finally:
        manager.stop()


# -- the transport: the Communicator contract, in the caller ---------------------------------------------


def outcome(call: Callable[[], object]) -> Tuple[str, str]:
    """What ``call()`` gave: ("ok", its value) or (the kind of error, its message)."""
    try:
        return "ok", str(call())
    except StoppedError as exc:
        return "StoppedError", str(exc)
    except parl.RemoteError as exc:
        return "RemoteError", str(exc)
    except ValueError as exc:
        return "ValueError", str(exc)


#: The step number of the requests a ProbeAgent sends until the robot stops.
UNTIL_STOPPED = 9


class ProbeAgent(parl.Agent):
    """Calls its transport (the communicator of its helper of task "T") directly, in one episode,
    and returns what every call gave: the record reaches the test from any placement."""

    def run_one_episode(self) -> Dict[str, Any]:
        comm = self.helpers["T"].communicator
        code = self.env.code

        def echo(step: int, marker: float = 0.0) -> int:
            return int(comm.predict({"obs": echo_obs(code, step, marker)})[0]["action"][0])

        seen: Dict[str, Any] = {"transport": type(comm).__name__}
        seen["bad sample"] = outcome(lambda: comm.predict({"obs": np.zeros(3, np.float32)}))
        seen["good sample"] = outcome(lambda: echo(1))
        seen["failing batch"] = outcome(lambda: echo(2, PREDICT_FAIL))
        seen["after the failing batch"] = outcome(lambda: echo(3))
        seen["failing update"] = outcome(lambda: comm.learn(echo_batch(code, marker=LEARN_FAIL)))
        seen["update"] = outcome(lambda: comm.learn(echo_batch(code, rows=3))["rows"])
        while True:  # until the robot stops
            try:
                echo(UNTIL_STOPPED)
            except StoppedError:
                break
        seen["predict after stop"] = outcome(lambda: echo(UNTIL_STOPPED + 1))
        seen["learn after stop"] = outcome(lambda: comm.learn(echo_batch(code)))
        return {"reward": 0.0, "steps": 0, **seen}


class PlacementContract(MultiAgentContract, AsyncLearnerContract):
    """The placement contract as a pytest test class: subclass it as ``Test...``, with ``cases``.

    Each test takes ``robot``, parametrized by :meth:`pytest_generate_tests` over :attr:`cases`.
    """

    #: The placements under contract; None: every registered placement (:func:`placement_cases`).
    cases: Optional[Sequence[PlacementCase]] = None

    def pytest_generate_tests(self, metafunc: Any) -> None:
        """pytest's hook for this class: every test runs once per case."""
        parametrize_cases(metafunc, placement_cases() if self.cases is None else self.cases)

    @pytest.fixture
    def placement_case(self, request: Any, monkeypatch: Any) -> PlacementCase:
        """The placement case of this test run, prepared."""
        return prepare_case(request, monkeypatch)

    @pytest.fixture
    def robot(self, placement_case: PlacementCase) -> Iterator[Robots]:
        """``robot(tasks=("T",), ...)``: a Manager of echo tasks in the case's placement (Robots)."""
        yield from robots_of(placement_case)

    def expected_transport(self, case: PlacementCase) -> Optional[str]:
        """The class name of the transport ``case`` gives its agents (None: not checked), for the
        built-in placements; override it to check your own."""
        from parl.runtime.cooperative import runner as cooperative

        return {
            "threads": "InProcessCommunicator",
            "cooperative": "CooperativeCommunicator" if cooperative.EXTENSION is None else "_ParkedInC",
            "cooperative-python": "CooperativeCommunicator",
            "processes": "ShmCommunicator",
        }.get(case.id)

    # -- replies and learning ---------------------------------------------------------------------

    def test_many_agents_each_get_their_own_replies_and_learn(self, robot: Robots) -> None:
        manager = robot()
        on_policy, replay, games, length = range(16), range(16, 32), 2, 6
        add_agents(
            manager,
            [ReportingEchoAgent(CountEnv(code, length=length), num_games=games) for code in range(32)],
            lambda i: (
                parl.OnPolicyHelper(sample_interval=4)
                if i in on_policy
                else parl.ExpReplayHelper(capacity=100, batch_size=4, warmup_steps=4, updates_per_step=0.5, seed=i)
            ),
        )
        manager.start()
        episodes = manager.join(timeout=WAIT * 4)
        assert manager.errors == []
        assert len(episodes) == 32 * games
        assert all(e["steps"] == length and e["reward"] == length and e["mismatches"] == 0 for e in episodes)
        last = {i: records[-1] for i, records in episodes_by_agent(episodes).items()}
        assert {i: e["replies"] for i, e in last.items()} == {i: games * length for i in range(32)}
        # The costs of every update came back to its agent: two segments an episode on-policy, and for
        # replay one update every other step from the 4th (warm-up) of its 12: ceil(9 * 0.5) = 5.
        assert {i: e["learned"] for i, e in last.items()} == {i: 2 * games if i in on_policy else 5 for i in range(32)}

        algorithm = echo_algorithm(manager.tasks["T"])
        if not registry.entry(manager.placement).predicts_in_copies:
            predicted = np.concatenate(algorithm.prediction_batches)
            assert sorted(int(v) for v in predicted[:, 0]) == every_step(range(32), games, length)
        snapshot = manager.wrappers["T"].stats.snapshot()
        assert snapshot.predictions == snapshot.timed_predictions == 32 * games * length
        assert snapshot.prediction_seconds > 0  # the latency the agents saw

        segments = [b for b in algorithm.learn_batches if senders(b)[0] in on_policy]
        samples = [b for b in algorithm.learn_batches if senders(b)[0] in replay]
        assert len(segments) + len(samples) == len(algorithm.learn_batches)
        assert all(set(senders(b)) <= set(on_policy) for b in segments)  # segments joined with segments only
        assert sorted(int(v) for b in segments for v in b[:, 0]) == every_step(on_policy, games, length)
        assert len(samples) == 5 * len(replay)
        assert all(len(b) == 4 and len(senders(b)) == 1 and (b[:, 0] % 1000 < length).all() for b in samples)
        assert manager.tasks["T"].update_steps == len(algorithm.learn_batches)

    def test_a_helper_that_overrides_predict_is_called_and_plain_helpers_reach_the_task(self, robot: Robots) -> None:
        manager = robot()
        add_agents(
            manager,
            [CountingAgent(CountEnv(code), num_games=2) for code in range(2)],
            lambda i: CountingHelper() if i == 0 else parl.OnPolicyHelper(),
        )
        manager.start()
        last = {i: records[-1] for i, records in episodes_by_agent(manager.join(timeout=WAIT)).items()}
        assert manager.errors == []
        assert [(e["replies"], e["mismatches"], e["helper_calls"]) for e in last.values()] == [
            (10, 0, 10),
            (10, 0, None),
        ]
        assert manager.wrappers["T"].stats.predictions == 20

    def test_an_agent_uses_two_tasks(self, robot: Robots) -> None:
        manager = robot(tasks=("goal", "follow"))
        agents, games, length = 8, 3, 5
        for code in range(agents):
            helpers = {"goal": parl.OnPolicyHelper(sample_interval=5), "follow": parl.OnPolicyHelper(sample_interval=2)}
            manager.add_agent(TwoTaskAgent(CountEnv(code, length=length), num_games=games), helpers)
        manager.start()
        episodes = manager.join(timeout=WAIT * 2)
        assert manager.errors == [] and len(episodes) == agents * games
        assert all(e["mismatches"] == 0 for e in episodes)
        for name, offset in (("goal", 0), ("follow", 500_000)):
            assert manager.wrappers[name].stats.predictions == agents * games * length
            rows = np.concatenate(echo_algorithm(manager.tasks[name]).learn_batches)
            assert sorted(int(v) - offset for v in rows[:, 0]) == every_step(range(agents), games, length)

    # -- errors ---------------------------------------------------------------------------------------

    def test_an_agent_whose_environment_raises_is_reported_and_the_others_go_on(self, robot: Robots) -> None:
        manager = robot()
        games = 4
        add_agents(
            manager,
            [
                ReportingEchoAgent(CountEnv(code, fail_at=(1, 2) if code == 1 else None), num_games=games)
                for code in range(4)
            ],
            lambda i: parl.OnPolicyHelper(sample_interval=2),
        )
        manager.start()
        episodes = manager.join(timeout=WAIT * 2)
        assert len(manager.errors) == 1
        error = manager.errors[0]
        assert isinstance(error, parl.AgentError) and isinstance(error.original, ToyFailure)
        assert (error.agent_id, error.episode) == (1, 1)
        message = str(error)
        assert message.startswith("agent 1 failed in episode 1") and "env 1 exploded in episode 1 at step 2" in message
        assert "Traceback (most recent call last)" in message and "_explode" in message and "run_one_episode" in message
        played = {i: [e["episode"] for e in records] for i, records in episodes_by_agent(episodes).items()}
        assert played == {0: list(range(games)), 1: [0], 2: list(range(games)), 3: list(range(games))}

    @in_process_predictions
    @pytest.mark.parametrize("failure", ["raises", "answers_too_few_rows"])
    def test_a_failing_prediction_fails_every_agent_of_its_batch_and_later_ones_are_served(
        self, robot: Robots, failure: str
    ) -> None:
        agents, batch_size, games, failing_code = 8, 4, 2, 1
        manager = robot(max_batchsize=batch_size)
        marker = PREDICT_FAIL if failure == "raises" else ANSWER_SHORT
        if failure == "answers_too_few_rows":
            answers_one_row_short(manager.tasks["T"])
        arrivals, predictions = Arrivals(), QueueWatch(manager.wrappers["T"].prediction_queue)

        def mark_first_request(inputs: dict, episode: int) -> dict:
            if episode == 0 and inputs["obs"][0] % 1000 == 0:
                return {"obs": np.array([inputs["obs"][0], marker], np.float32)}
            return inputs

        add_agents(
            manager,
            [
                ReportingEchoAgent(
                    CountEnv(code, length=3),
                    num_games=games,
                    corrupt=announcing(arrivals, mark_first_request if code == failing_code else None),
                )
                for code in range(agents)
            ],
            lambda i: parl.OnPolicyHelper(),
        )
        # Every agent's first request waits, paused, so the batches are made of waiting requests only.
        manager.pause()
        manager.start()
        wait_until_held(manager, arrivals, predictions, agents)
        manager.resume()
        episodes = manager.join(timeout=WAIT * 2)

        batches = echo_algorithm(manager.tasks["T"]).prediction_batches
        failing = [i for i, b in enumerate(batches) if (b[:, 1] == marker).any()]
        assert len(failing) == 1
        doomed = senders(batches[failing[0]])
        assert failing_code in doomed and len(doomed) >= 2
        assert sorted(e.agent_id for e in manager.errors) == doomed
        expected = "ToyFailure" if failure == "raises" else f"answered {len(doomed) - 1} rows of 'action' for a batch"
        for error in manager.errors:
            assert isinstance(error.original, parl.RemoteError) and error.episode == 0
            assert "prediction in task 'T' failed" in str(error) and expected in str(error)
        assert len({id(e.original) for e in manager.errors}) == len(doomed)  # one RemoteError per agent
        # The others played on: their later requests were served after the failing batch.
        survivors = sorted(set(range(agents)) - set(doomed))
        assert survivors and failing[0] < len(batches) - 1
        played = episodes_by_agent(episodes)
        assert all(len(played[i]) == games and played[i][-1]["mismatches"] == 0 for i in survivors)

    def test_a_failing_update_fails_every_agent_of_its_batch_and_later_ones_are_learned(self, robot: Robots) -> None:
        manager = robot()
        wrapper, task = manager.wrappers["T"], manager.tasks["T"]
        algorithm = echo_algorithm(task)
        training = QueueWatch(wrapper.training_queue)
        doomed, survivors, length = (0, 1, 2), (3, 4, 5), 4
        add_agents(
            manager,
            [ReportingEchoAgent(OnceMarkedEnv(c, length, LEARN_FAIL if c == 1 else 0.0), num_games=2) for c in doomed]
            + [ReportingEchoAgent(CountEnv(c, length=length), num_games=3) for c in survivors],
            lambda i: (
                parl.OnPolicyHelper(sample_interval=length)
                if i in doomed
                else parl.ExpReplayHelper(capacity=100, batch_size=4, warmup_steps=4, updates_per_step=0.5, seed=i)
            ),
        )
        # An update of the test's own holds the training loop while the doomed agents' first segments
        # queue behind it; it is a replay sample, so it is learned alone. The pause keeps every agent
        # from sending anything before the loop has taken it.
        blocker = Sender(lambda: wrapper.communicator(99).learn(replay_sample(99, marker=LEARN_BLOCK)), "blocker")
        manager.pause()
        blocker.start()
        assert training.wait(lambda w: w.senders_put() == {99})
        manager.start()
        assert training.wait(lambda w: len(w.takes) == 1)
        manager.resume()
        assert algorithm.entered.wait(WAIT)
        assert training.wait(lambda w: w.senders_put() >= set(doomed))
        algorithm.gate.set()
        assert blocker.done.wait(WAIT) and blocker.error is None and blocker.result["rows"] == 2.0
        episodes = manager.join(timeout=WAIT * 2)

        failing = [i for i, b in enumerate(algorithm.learn_batches) if (b[:, 1] == LEARN_FAIL).any()]
        assert len(failing) == 1 and senders(algorithm.learn_batches[failing[0]]) == list(doomed)
        assert sorted(e.agent_id for e in manager.errors) == list(doomed)
        for error in manager.errors:
            assert isinstance(error.original, parl.RemoteError) and error.episode == 0
            message = str(error)
            assert (
                "training in task 'T' failed" in message
                and "ToyFailure" in message
                and "_maybe_block_or_fail" in message
            )
        assert len({id(e.original) for e in manager.errors}) == len(doomed)
        # The failed update changed nothing; the survivors' later samples were learned after it.
        assert task.update_steps == len(algorithm.learn_batches) - 1
        assert failing[0] < len(algorithm.learn_batches) - 1
        played = episodes_by_agent(episodes)
        assert all(len(played[i]) == 3 and played[i][-1]["learned"] == 5 for i in survivors)

    @pytest.mark.parametrize("bad", list(BAD_SAMPLES))
    def test_a_bad_sample_fails_only_the_agent_that_sent_it(self, robot: Robots, bad: str) -> None:
        make_bad, message = BAD_SAMPLES[bad]
        manager = robot()
        add_agents(
            manager,
            [ReportingEchoAgent(CountEnv(0), num_games=2, corrupt=lambda inputs, episode: make_bad(inputs))]
            + [ReportingEchoAgent(CountEnv(code), num_games=2) for code in (1, 2, 3)],
            lambda i: parl.OnPolicyHelper(),
        )
        manager.start()
        episodes = manager.join(timeout=WAIT)
        assert [(e.agent_id, e.episode) for e in manager.errors] == [(0, 0)]
        assert isinstance(manager.errors[0].original, ValueError) and message in str(manager.errors[0])
        played = episodes_by_agent(episodes)
        assert 0 not in played
        assert all(len(played[i]) == 2 and played[i][-1]["mismatches"] == 0 for i in (1, 2, 3))

    # -- stop -----------------------------------------------------------------------------------------

    @pytest.mark.parametrize("waiting", ["playing", "paused", "learning"])
    def test_stop_ends_every_agent_within_5_s_and_leaves_nothing_running(self, robot: Robots, waiting: str) -> None:
        agents = 4
        # Learning: each agent's first segment waits for min_batchsize 5 segments, which never come.
        settings: Dict[str, Any] = (
            {"min_batchsize": agents + 1, "training_timeout": 60.0} if waiting == "learning" else {}
        )
        manager = robot(**settings)
        arrivals = Arrivals()
        predictions = QueueWatch(manager.wrappers["T"].prediction_queue)
        training = QueueWatch(manager.wrappers["T"].training_queue)
        add_agents(
            manager,
            [ReportingEchoAgent(CountEnv(code), corrupt=announcing(arrivals)) for code in range(agents)],  # never done
            lambda i: parl.OnPolicyHelper(sample_interval=1 if waiting == "learning" else 2),
        )
        if waiting == "paused":
            manager.pause()
        manager.start()
        if waiting == "playing":
            assert wait_for(lambda: len(manager.episodes()) >= 2 * agents)
        elif waiting == "paused":
            wait_until_held(manager, arrivals, predictions, agents)
        else:
            assert training.wait(lambda w: w.senders_put() == set(range(agents)))
        assert manager.running()
        assert timed_stop(manager) < STOP_SECONDS
        assert robot.leftovers() == [] and not manager.running()
        assert manager.errors == []  # agents stopped while waiting end quietly
        if waiting != "playing":
            assert manager.episodes() == [] and echo_algorithm(manager.tasks["T"]).learn_batches == []

    @in_process_predictions
    def test_stop_reports_a_stuck_prediction_and_ends_everything_once_it_returns(self, robot: Robots) -> None:
        manager = robot()
        add_agents(
            manager,
            [ReportingEchoAgent(CountEnv(code, marker=PREDICT_BLOCK), num_games=2) for code in range(4)],
            lambda i: parl.OnPolicyHelper(),
        )
        algorithm = echo_algorithm(manager.tasks["T"])
        manager.start()
        assert algorithm.entered.wait(WAIT)  # every agent waits on a prediction stuck inside the algorithm
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r"still running 0.5 s after stop: \[.+\]"):
            manager.stop(timeout=0.5)
        assert time.monotonic() - start < STOP_SECONDS
        algorithm.gate.set()
        assert timed_stop(manager) < STOP_SECONDS
        assert robot.leftovers() == [] and not manager.running()
        assert manager.errors == [] and manager.episodes() == []

    # -- pause ----------------------------------------------------------------------------------------

    @pytest.mark.parametrize("when", ["before-start", "while-playing"])
    def test_pause_holds_every_agent_at_its_next_prediction_until_resume(self, robot: Robots, when: str) -> None:
        agents = 4
        manager = robot()
        arrivals = Arrivals()
        predictions = QueueWatch(manager.wrappers["T"].prediction_queue)
        add_agents(
            manager,
            [ReportingEchoAgent(CountEnv(code, length=3), corrupt=announcing(arrivals)) for code in range(agents)],
            lambda i: parl.OnPolicyHelper(sample_interval=2),
        )
        algorithm, stats = echo_algorithm(manager.tasks["T"]), manager.wrappers["T"].stats
        in_copies = registry.entry(manager.placement).predicts_in_copies

        def predicted() -> int:
            """Predictions answered so far: rows the task saw, or those its copies counted."""
            return stats.predictions if in_copies else sum(len(b) for b in algorithm.prediction_batches)

        def progress() -> Tuple[int, int]:
            return len(manager.episodes()), predicted()

        if when == "before-start":
            manager.pause()
            manager.start()
            wait_until_held(manager, arrivals, predictions, agents)
            assert stays(progress, 0.3) and progress() == (0, 0)  # nothing was served
        else:
            manager.start()
            assert wait_for(lambda: len(manager.episodes()) >= 2 * agents)
            manager.pause()
            under_way = predicted()
            assert settles(progress, quiet=0.3)
            # At most the one batch already on its way when pause returned: each agent is held at its next prediction.
            assert predicted() - under_way <= agents
        held, _ = progress()
        manager.resume()
        assert wait_for(lambda: len(manager.episodes()) >= held + 2 * agents)
        assert manager.errors == []

    def test_pause_waits_for_the_update_under_way_and_starts_no_other(self, robot: Robots) -> None:
        manager = robot()
        add_agents(
            manager,
            [ReportingEchoAgent(CountEnv(0, marker=LEARN_BLOCK)), ReportingEchoAgent(CountEnv(1))],
            lambda i: parl.OnPolicyHelper(sample_interval=2),
        )
        task = manager.tasks["T"]
        algorithm = echo_algorithm(task)
        manager.start()
        assert algorithm.entered.wait(WAIT)  # an update is under way, held inside learn
        pausing = Sender(manager.pause, "pause")
        pausing.start()
        assert not pausing.done.wait(0.3)  # pause waits for that update
        algorithm.gate.set()
        assert pausing.done.wait(WAIT) and pausing.error is None
        updates = task.update_steps
        assert stays(lambda: (task.update_steps, len(algorithm.learn_batches)), 0.3)  # no update starts
        manager.resume()
        assert wait_for(lambda: task.update_steps > updates)
        assert manager.errors == []

    # -- the same episodes in every placement --------------------------------------------------------

    def test_a_seeded_robot_plays_the_same_episodes_as_in_threads(self, robot: Robots) -> None:
        episodes = seeded_episodes(robot())
        assert len({e[2] for e in episodes}) > 1, "the seeds gave every episode the same length"
        assert tuple(episodes) == seeded_episodes_in_threads()

    # -- the transport: the Communicator contract, in the caller ---------------------------------------

    @in_process_predictions
    def test_the_transport_keeps_the_communicator_contract_and_requests_after_stop_raise(self, robot: Robots) -> None:
        manager = robot()
        helper = parl.OnPolicyHelper()
        manager.add_agent(ProbeAgent(CountEnv(7), num_games=1), {"T": helper})
        algorithm = echo_algorithm(manager.tasks["T"])
        manager.start()
        assert wait_for(
            lambda: any((b[:, 0] == 7000 + UNTIL_STOPPED).any() for b in list(algorithm.prediction_batches))
        )
        assert timed_stop(manager) < STOP_SECONDS
        (record,) = manager.episodes()
        assert manager.errors == []
        assert record["transport"] == (self.expected_transport(robot.case) or record["transport"])
        # A sample that breaks the specs raises ValueError in the caller, which goes on.
        assert record["bad sample"] == ("ValueError", "task 'T' input 'obs': expected shape [2], got [3]")
        assert record["good sample"] == ("ok", "7001")
        # A failing batch raises RemoteError in the caller, with the task's traceback; the caller goes on.
        kind, message = record["failing batch"]
        assert (
            kind == "RemoteError" and "prediction in task 'T' failed" in message and "_maybe_block_or_fail" in message
        )
        assert record["after the failing batch"] == ("ok", "7003")
        kind, message = record["failing update"]
        assert kind == "RemoteError" and "training in task 'T' failed" in message and "ToyFailure" in message
        assert record["update"] == ("ok", "3.0")
        # Stopped: the request that waited and every later one raise StoppedError, in the agent ...
        assert record["predict after stop"][0] == record["learn after stop"][0] == "StoppedError"
        # ... and in this process, through the helper bound to the Manager's task.
        with pytest.raises(StoppedError):
            helper.predict({"obs": echo_obs(7, 0)})
        with pytest.raises(StoppedError):
            helper.communicator.learn(echo_batch(7))
