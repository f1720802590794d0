"""Agents in worker processes (``placement="processes"``): what worker processes alone do.

Agents are spread over the workers and their counters reach the parent; a SIGKILLed worker is
reported, or restarted; workers end on stop before a stuck prediction returns, and die with their
parent; outputs beyond the specs cross the shared-memory slots. What every placement keeps
(replies, learning, errors, stop, pause) is tests/test_placement_contract.py.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Dict, Set

import gymnasium
import pytest
from learning import train_example_config

import parl
from parl.experiment.train.trainer import env_steps
from parl.runtime.processes.worker_pool import WorkerError
from parl.utils.gym_agent import GymAgent

from toys import (
    PREDICT_BLOCK,
    WAIT,
    CountEnv,
    EchoAgent,
    EchoAlgorithm,
    ReportingEchoAgent,
    Sender,
    echo_algorithm_func,
    wait_for,
)


class CountGymEnv(CountEnv):
    """A CountEnv with the action space GymAgent needs."""

    action_space = gymnasium.spaces.Discrete(2)


@pytest.fixture
def make_manager(make_manager):
    """``make_manager(workers=2, restart_workers=False, **task_settings)``: an echo task "T" with
    agents in worker processes; stopped after the test, with every worker process checked gone."""
    return lambda workers=2, restart_workers=False, **settings: make_manager(
        placement=parl.ProcessesOptions(workers=workers, restart_workers=restart_workers), **settings
    )


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie, dead but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped between the kill and the read
        return False


def pids_of(manager: parl.Manager) -> Dict[int, Set[int]]:
    """Agent id -> the pids its recorded episodes were played in."""
    out: Dict[int, Set[int]] = {}
    for record in manager.episodes():
        out.setdefault(record["agent_id"], set()).add(record["pid"])
    return out


# -- agents over the workers, and their counters ----------------------------------------------------


def test_agents_are_spread_over_the_workers_and_the_parent_sees_their_counters(make_manager) -> None:
    manager = make_manager(workers=2)
    agents, games = 6, 3
    for code in range(agents):
        manager.add_agent(
            ReportingEchoAgent(CountEnv(code, length=6), num_games=games), {"T": parl.OnPolicyHelper(sample_interval=3)}
        )
    manager.start()
    manager.join(timeout=WAIT * 4)
    assert manager.errors == []
    # Agent i ran in worker i % 2: two processes, neither of them this one.
    pids = pids_of(manager)
    assert all(len(p) == 1 for p in pids.values())
    worker_pids = {i: next(iter(p)) for i, p in pids.items()}
    assert len(set(worker_pids.values())) == 2 and os.getpid() not in worker_pids.values()
    assert all(worker_pids[i] == worker_pids[i % 2] for i in range(agents))
    # The parent's copies of the agents carry the workers' counters.
    assert [a.episode for a in manager.agents] == [games] * agents


def test_live_total_steps_reach_the_parent(make_manager) -> None:
    manager = make_manager(workers=2)
    for code in range(2):
        manager.add_agent(GymAgent(CountGymEnv(code, length=5), task="T", seed=code), {"T": parl.OnPolicyHelper()})
    manager.start()
    assert wait_for(lambda: env_steps(manager, 0) >= 200)
    assert all(a.total_steps > 0 and a.episode > 0 for a in manager.agents)
    manager.stop()
    finished = sum(int(e["steps"]) for e in manager.episodes())
    assert finished <= env_steps(manager, 0) <= finished + 2 * 5


# -- a killed worker -------------------------------------------------------------------------------


def _start_four_agents(manager: parl.Manager) -> None:
    for code in range(4):
        manager.add_agent(ReportingEchoAgent(CountEnv(code, length=5)), {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.start()
    assert wait_for(lambda: all(len(pids_of(manager).get(i, ())) == 1 for i in range(4)))


def test_a_sigkilled_worker_is_reported_by_name_and_the_other_goes_on(make_manager) -> None:
    manager = make_manager(workers=2)
    _start_four_agents(manager)
    pids = {i: next(iter(p)) for i, p in pids_of(manager).items()}
    os.kill(pids[1], signal.SIGKILL)  # worker 1 runs agents 1 and 3
    assert wait_for(lambda: len(manager.errors) == 2)
    assert sorted(e.agent_id for e in manager.errors) == [1, 3]
    for error in manager.errors:
        assert isinstance(error, parl.AgentError) and isinstance(error.original, WorkerError)
        assert error.original.name == "parl-worker-1" and error.original.pid == pids[1]
        assert error.original.agent_ids == [1, 3]
        message = str(error)
        assert "parl-worker-1" in message and "SIGKILL" in message and "[1, 3] end" in message
    # Worker 0 goes on.
    played = len(manager.episodes())
    assert wait_for(lambda: len(manager.episodes()) > played + 10)
    assert {e["agent_id"] for e in manager.episodes()[played:]} == {0, 2}
    assert manager.running()
    start = time.monotonic()
    manager.stop()
    assert time.monotonic() - start < 5.0
    assert not manager.running()
    assert not any(alive(pid) for pid in pids.values())


def test_a_sigkilled_worker_is_restarted_when_so_configured(make_manager) -> None:
    manager = make_manager(workers=2, restart_workers=True)
    _start_four_agents(manager)
    pids = {i: next(iter(p)) for i, p in pids_of(manager).items()}
    killed_at = len(manager.episodes())
    os.kill(pids[1], signal.SIGKILL)
    # Agents 1 and 3 play on in a new process, from where their counters were.
    assert wait_for(lambda: all(len(pids_of(manager)[i]) == 2 for i in (1, 3)))
    assert manager.errors == []
    later = manager.episodes()[killed_at:]
    for i in (1, 3):
        before = [e["episode"] for e in manager.episodes()[:killed_at] if e["agent_id"] == i]
        after = [e["episode"] for e in later if e["agent_id"] == i and e["pid"] != pids[i]]
        assert after and after[0] >= max(before) + 1 and after == list(range(after[0], after[0] + len(after)))
    new_pid = next(iter(pids_of(manager)[1] - {pids[1]}))
    start = time.monotonic()
    manager.stop()
    assert time.monotonic() - start < 5.0
    assert not any(alive(pid) for pid in list(pids.values()) + [new_pid])


# -- stopping ------------------------------------------------------------------------------------------


def test_workers_end_on_stop_before_a_stuck_prediction_returns(make_manager) -> None:
    # Agents waiting on a prediction stuck inside the algorithm end at once, and their processes
    # with them; stop itself returns once the wrapper's thread is free.
    manager = make_manager(workers=2)
    for code in range(4):
        manager.add_agent(
            ReportingEchoAgent(CountEnv(code, marker=PREDICT_BLOCK), num_games=3), {"T": parl.OnPolicyHelper()}
        )
    algorithm = manager.tasks["T"].algorithm
    manager.start()
    assert algorithm.entered.wait(WAIT)  # the prediction loop is stuck inside the algorithm
    pids = [p.pid for p in multiprocessing.active_children() if p.name.startswith("parl-worker-")]
    assert len(pids) == 2
    stopper = Sender(manager.stop, "stopper")
    stopper.start()
    assert wait_for(lambda: not any(alive(pid) for pid in pids))
    assert not stopper.done.is_set()
    algorithm.gate.set()
    assert stopper.done.wait(WAIT) and stopper.error is None
    assert manager.errors == [] and manager.episodes() == []


_ORPHAN_SCRIPT = """
import multiprocessing, sys, time
sys.path.insert(0, {tests!r})

import parl
from toys import CountEnv, EchoAgent, echo_algorithm_func
manager = parl.Manager({{"T": parl.TaskSettings(echo_algorithm_func())}},
                       placement=parl.ProcessesOptions(workers=2), thread_placement="os")
for code in range(2):
    manager.add_agent(EchoAgent(CountEnv(code)), {{"T": parl.OnPolicyHelper()}})
manager.start()
print(*[p.pid for p in multiprocessing.active_children()], flush=True)
time.sleep(60)
"""


def test_workers_die_with_their_parent() -> None:
    script = _ORPHAN_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)))
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids), line
    finally:
        parent.kill()
        parent.wait(WAIT)
    assert wait_for(lambda: not any(alive(pid) for pid in pids))


def test_workers_setting_is_checked() -> None:
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="workers must be an integer"):
            parl.ProcessesOptions(workers=bad)
        with pytest.raises(ValueError, match="workers must be an integer"), pytest.warns(DeprecationWarning):
            parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, placement="processes", workers=bad)


# -- the setting ----------------------------------------------------------------------------------


def test_an_example_trains_unchanged_in_worker_processes(tmp_path) -> None:
    # A target above CartPole's highest return (500): A2C in worker processes can reach 475 within the
    # budget on some runs, and the run must end at its budget.
    result = train_example_config(
        "a2c_cartpole", tmp_path, seed=0, budget=3_000, target=1_000.0, overrides=("placement=processes",)
    )
    assert result["stop_reason"] == "step budget"
    assert 3_000 <= result["env_steps"] <= 3_000 + 1_000
    assert result["updates"]["RL"] > 0 and result["episodes"] > 0


class ExtraOutputAlgorithm(EchoAlgorithm):
    """Echoes, and returns one more output than the action specs declare."""

    def predict(self, inputs, states, *, deterministic=False):
        actions, next_states = super().predict(inputs, states)
        return {**actions, "doubled": inputs["obs"] * 2}, next_states


class OutputKeysAgent(EchoAgent):
    def run_one_episode(self) -> Dict[str, float]:
        actions, _ = self.helpers["T"].predict({"obs": self.env.reset()[0]})
        return {"reward": 0.0, "steps": 0, "keys": sorted(actions), "doubled": float(actions["doubled"][0])}


def test_outputs_beyond_the_specs_reach_the_agent_as_with_threads() -> None:
    results = {}
    for placement in ("threads", parl.ProcessesOptions(workers=1)):
        settings = parl.TaskSettings(lambda: ExtraOutputAlgorithm())
        manager = parl.Manager({"T": settings}, placement=placement, thread_placement="os")
        manager.add_agent(OutputKeysAgent(CountEnv(3), num_games=1), {"T": parl.OnPolicyHelper()})
        manager.start()
        episodes = manager.join(timeout=WAIT)
        assert manager.errors == []
        results[manager.placement] = [(e["keys"], e["doubled"]) for e in episodes]
    assert results["processes"] == results["threads"] == [(["action", "doubled"], 6000.0)]
