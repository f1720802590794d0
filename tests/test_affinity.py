"""Thread placement: the plan per mode, and what agent threads actually run with."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

import parl
from parl import affinity, core_claims
from parl.core_claims import CoreClaim

from toys import CountEnv, EchoAgent, echo_algorithm_func

ALLOWED = sorted(os.sched_getaffinity(0))

#: Run as ``python -c HOLD_EVERY_CORE <folder> <cores>``: claims every core, prints them, and holds them
#: until its stdin closes.
HOLD_EVERY_CORE = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("core_claims", {core_claims.__file__!r})  # no parl import: fast
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
CoreClaim = module.CoreClaim
cores = [int(c) for c in sys.argv[2].split(",")]
claims = [CoreClaim(sys.argv[1]) for _ in cores]
print(*[claim.take(cores) for claim in claims], flush=True)
sys.stdin.read()
"""


def test_unknown_placement_is_named():
    with pytest.raises(ValueError, match="thread_placement.*'fast'"):
        affinity.plan("fast")
    with pytest.raises(ValueError, match="thread_placement"):
        parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="fast")


def test_os_placement_pins_nothing():
    assert affinity.plan("os") == (None, None)


def test_one_core_and_split_plans():
    agents, training = affinity.plan("one_core")
    split_agents, split_training = affinity.plan("split")
    if len(ALLOWED) < 2:  # nothing to choose between: placement is left to the OS
        assert (agents, training, split_agents, split_training) == (None, None, None, None)
    else:
        assert agents == training == {ALLOWED[0]}
        assert split_agents == {ALLOWED[0]} and split_training == set(ALLOWED[1:])


class RecordingAgent(EchoAgent):
    """Records the affinity and scheduling policy its thread runs with."""

    def run_one_episode(self):
        self.cpus = os.sched_getaffinity(0)
        self.policy = os.sched_getscheduler(0)
        return super().run_one_episode()


@pytest.mark.parametrize("placement", ["auto", "one_core", "os"])
def test_agent_threads_run_where_planned(placement, tmp_path, monkeypatch):
    # Claims of its own: robots elsewhere on the machine (another test worker, a training run) holding
    # every core would leave this one's threads to the OS (see the test of that below).
    monkeypatch.setattr(core_claims, "CLAIMS_FOLDER", str(tmp_path))
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement=placement)
    agent = RecordingAgent(CountEnv(0), num_games=1)
    manager.add_agent(agent, {"T": parl.OnPolicyHelper()})
    manager.start()
    planned = manager.runner.context.agent_cpus  # one core no other robot holds (core claims), if any
    manager.join(timeout=10)
    assert manager.errors == []
    if affinity.plan(placement)[0] is None:
        assert planned is None and agent.cpus == set(ALLOWED) and agent.policy == os.SCHED_OTHER
    else:
        assert len(planned) == 1 and planned <= set(ALLOWED)
        assert agent.cpus == planned and agent.policy == os.SCHED_BATCH
    assert os.sched_getaffinity(0) == set(ALLOWED)  # the calling (main) thread is never pinned


def test_auto_keeps_few_agent_threads_on_one_core_and_leaves_many_to_the_os():
    limit = affinity.ONE_CORE_MAX_AGENT_THREADS
    assert [affinity.resolve("auto", n) for n in (0, 1, 8, limit, limit + 1, 1024)] == [
        "one_core",
        "one_core",
        "one_core",
        "one_core",
        "os",
        "os",
    ]
    assert [affinity.resolve(p, 1024) for p in ("one_core", "split", "os")] == ["one_core", "split", "os"]
    assert affinity.plan("auto", limit + 1) == (None, None)
    assert affinity.plan("auto", limit) == affinity.plan("one_core")


@pytest.mark.parametrize(
    "placement, agents, expected",
    [
        ("threads", 8, "one_core"),
        ("threads", affinity.ONE_CORE_MAX_AGENT_THREADS + 1, "os"),
        ("cooperative", affinity.ONE_CORE_MAX_AGENT_THREADS + 1, "one_core"),
    ],
)
def test_the_managers_default_placement_is_auto_by_agent_threads(placement, agents, expected):
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, placement=placement)
    assert manager.thread_placement == "auto"
    for code in range(agents):
        manager.add_agent(EchoAgent(CountEnv(code), num_games=0), {"T": parl.OnPolicyHelper()})
    assert manager.placed_threads() == expected


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to place robots apart")
def test_robots_side_by_side_take_cores_no_other_robot_holds(tmp_path, monkeypatch) -> None:
    # Two robots started together (in two processes or, as here, one) put their agents on different
    # cores; a third, with every core held, is crowded; a stopped robot gives its core back.
    monkeypatch.setattr(core_claims, "CLAIMS_FOLDER", str(tmp_path))
    allowed = sorted(os.sched_getaffinity(0))
    claims = [CoreClaim(str(tmp_path)) for _ in range(len(allowed) + 1)]
    cores = [claim.take(allowed) for claim in claims]
    assert cores[:-1] == allowed and cores[-1] is None
    assert [claim.crowded for claim in claims] == [False] * len(allowed) + [True]
    assert claims[-1].same_process_core == allowed[0]  # every core held, the first by this process
    assert affinity.plan("one_core", 1, cores[1]) == ({allowed[1]}, {allowed[1]})
    assert affinity.plan("split", 1, cores[1]) == ({allowed[1]}, set(allowed) - {allowed[1]})
    assert affinity.plan("one_core", 1, None) == ({allowed[0]}, {allowed[0]})  # sharing: the first core
    claims[0].release()
    assert claims[-1].take(allowed) == allowed[0] and not claims[-1].crowded
    for claim in claims:
        claim.release()

    managers = []
    for _ in range(2):
        manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="one_core")
        manager.start()
        managers.append(manager)
    try:
        assert {m._core_claim.core for m in managers} == set(allowed[:2])
    finally:
        for manager in managers:
            manager.stop()
    assert all(m._core_claim.core is None for m in managers)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to place robots apart")
def test_a_robot_finding_every_core_held_by_other_processes_leaves_its_threads_to_the_os(
    tmp_path, monkeypatch, caplog
) -> None:
    # Pinned to the first core, it would share that core with the other process's robot for its whole
    # run while other cores may come free; unpinned, the OS places its threads where there is room.
    monkeypatch.setattr(core_claims, "CLAIMS_FOLDER", str(tmp_path))
    allowed = sorted(os.sched_getaffinity(0))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_EVERY_CORE, str(tmp_path), ",".join(map(str, allowed))],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().split() == [str(c) for c in allowed]
        manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="one_core")
        try:
            with caplog.at_level("INFO", logger="parl"):
                manager.start()
            claim = manager._core_claim
            assert claim.crowded and claim.core is None and claim.same_process_core is None
            assert manager._runner.context.agent_cpus is None
            assert "threads left to the OS" in caplog.text
        finally:
            manager.stop()
    finally:
        holder.communicate("", timeout=30)  # its stdin closes: it lets the claims go and ends
    alone = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="one_core")
    alone.start()
    try:  # with the cores free again, a robot pins as before
        assert alone._runner.context.agent_cpus == {alone._core_claim.core}
    finally:
        alone.stop()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to place robots apart")
def test_a_second_robot_of_one_process_with_every_core_held_shares_that_process_core(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(core_claims, "CLAIMS_FOLDER", str(tmp_path))
    allowed = sorted(os.sched_getaffinity(0))
    others = [CoreClaim(str(tmp_path)) for _ in allowed[1:]]  # every core but the first
    first = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="one_core")
    second = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="one_core")
    try:
        assert [claim.take(allowed[1:]) for claim in others] == allowed[1:]
        first.start()
        assert first._core_claim.core == allowed[0]
        second.start()
        assert second._core_claim.crowded and second._core_claim.same_process_core == allowed[0]
        assert second._runner.context.agent_cpus == {allowed[0]}
    finally:
        second.stop()
        first.stop()
        for claim in others:
            claim.release()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores to place robots apart")
def test_a_robot_inside_claim_cores_pins_to_the_claimed_cores(tmp_path, monkeypatch) -> None:
    # parl tune's trials: claim_cores(2) holds two cores for this thread; the trial's robot finds them
    # held, by this process, and pins its agents to one of them.
    monkeypatch.setattr(core_claims, "CLAIMS_FOLDER", str(tmp_path))
    with core_claims.claim_cores(2, str(tmp_path)) as cores:
        assert cores is not None
        manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="one_core")
        manager.start()
        try:
            assert manager._core_claim.same_process_core in cores
            assert manager._runner.context.agent_cpus == {manager._core_claim.same_process_core}
        finally:
            manager.stop()
    assert +core_claims._HELD_HERE == Counter()  # the block gave its cores back
