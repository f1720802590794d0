"""The worker transport trusts no pipe, and the parent watches its workers.

A frame written into a running Manager's worker pipe by another writer (a pickle, a message of
an unknown kind, a slot number of another worker's agent) is never run: it ends that worker,
reported by name in ``manager.errors``. A worker that stops answering (SIGSTOP) is reported within
the heartbeat timeout and ended, or restarted. Every process started is gone after each test. An
agent's exception crosses as data and is rebuilt without running its class's code.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, List

import pytest
from test_workers import alive, pids_of

import parl
from parl import wire
from parl.runtime.error_data import WorkerFailure, error_data, rebuild_error
from parl.runtime.processes.shm_transport import SLOT_NUMBER
from parl.runtime.processes.worker_pool import WorkerError, WorkerPool

from toys import WAIT, CountEnv, ReportingEchoAgent, echo_algorithm_func, wait_for

#: The heartbeat timeout of these tests: short, with room for a busy machine.
HEARTBEAT = 2.0

Make = Callable[..., parl.Manager]


@pytest.fixture
def running() -> Iterator[Make]:
    """``running(restart_workers=False, heartbeat_timeout=None)``: a started Manager of 4 echo agents
    in 2 worker processes (agents 1 and 3 in ``parl-worker-1``), each agent past its first episode;
    stopped after the test, which kills its worker processes, stopped ones included."""
    managers: List[parl.Manager] = []

    def make(restart_workers: bool = False, heartbeat_timeout: float = None) -> parl.Manager:
        options = parl.ProcessesOptions(workers=2, restart_workers=restart_workers, heartbeat_timeout=heartbeat_timeout)
        manager = parl.Manager(
            {"T": parl.TaskSettings(echo_algorithm_func())}, placement=options, thread_placement="os"
        )
        managers.append(manager)
        for code in range(4):
            agent = ReportingEchoAgent(CountEnv(code, length=5))
            manager.add_agent(agent, {"T": parl.OnPolicyHelper(sample_interval=2)})
        manager.start()
        assert wait_for(lambda: all(len(pids_of(manager).get(i, ())) == 1 for i in range(4)))
        return manager

    yield make
    for manager in managers:
        manager.stop()
        assert not manager.running()


def pool_of(manager: parl.Manager) -> WorkerPool:
    return manager._runner.pool


def write_into(fd: int, data: bytes) -> None:
    """Write ``data`` into the pipe whose read end is ``fd``, through its ``/proc`` path, as any
    process of the same user could."""
    foreign = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)
    try:
        os.write(foreign, data)
    finally:
        os.close(foreign)


class MakesMarker:
    """Unpickling this creates the marker file: the probe's payload."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def assert_worker_1_was_ended(manager: parl.Manager, pid: int, reason: str) -> None:
    """Agents 1 and 3 reported as ended with ``parl-worker-1`` for ``reason``; its process gone;
    worker 0 plays on."""
    assert wait_for(lambda: len(manager.errors) == 2, WAIT * 2)
    assert sorted(e.agent_id for e in manager.errors) == [1, 3]
    for error in manager.errors:
        assert isinstance(error.original, WorkerError) and error.original.name == "parl-worker-1"
        assert error.original.pid == pid and reason in error.original.reason
        assert f"parl-worker-1 (pid {pid}) was ended by the parent: " in str(error)
    assert wait_for(lambda: not alive(pid))
    played = len(manager.episodes())
    assert wait_for(lambda: {e["agent_id"] for e in manager.episodes()[played:]} == {0, 2}, WAIT * 2)


def test_a_pickle_written_into_a_worker_pipe_is_never_unpickled_and_ends_that_worker(running, tmp_path) -> None:
    manager = running()
    worker = pool_of(manager)._workers[1]
    pid = worker.process.pid
    marker = tmp_path / "unpickled"
    payload = pickle.dumps(MakesMarker(marker), protocol=pickle.HIGHEST_PROTOCOL)
    write_into(worker.message_fd, struct.pack("<I", len(payload)) + payload)  # the former framing
    assert_worker_1_was_ended(manager, pid, "its message pipe carried frame starts with")
    assert not marker.exists()


@pytest.mark.parametrize(
    "pipe, data, reason",
    [
        ("message", wire.pack(["run", "os.system"]), "its message pipe carried a message that is not one of"),
        ("message", wire.pack(7), "its message pipe carried a message that is not one of"),
        ("message", wire.pack(["learn", 0, None]), "slot number 0, which is not one of parl-worker-1's agents'"),
        ("request", SLOT_NUMBER.pack(0), "its request pipe carried slot number 0, which is not one of"),
        ("request", SLOT_NUMBER.pack(10**6), "its request pipe carried slot number 1000000"),
    ],
)
def test_a_foreign_message_or_request_ends_that_worker_with_a_report(running, pipe: str, data: bytes, reason: str):
    manager = running()
    worker = pool_of(manager)._workers[1]  # slot 0 is agent 0's, in worker 0
    pid = worker.process.pid
    write_into(worker.message_fd if pipe == "message" else worker.request_fd, data)
    assert_worker_1_was_ended(manager, pid, reason)


def test_a_stopped_worker_is_reported_within_the_heartbeat_timeout_and_ended(running) -> None:
    manager = running(heartbeat_timeout=HEARTBEAT)
    pid = pool_of(manager).pids()["parl-worker-1"]
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    assert_worker_1_was_ended(manager, pid, f"(heartbeat_timeout {HEARTBEAT:g} s)")
    assert "it sent nothing for" in manager.errors[0].original.reason
    assert HEARTBEAT <= time.monotonic() - stopped


def test_a_stopped_worker_is_restarted_when_so_configured(running) -> None:
    manager = running(restart_workers=True, heartbeat_timeout=HEARTBEAT)
    pool = pool_of(manager)
    pid = pool.pids()["parl-worker-1"]
    os.kill(pid, signal.SIGSTOP)
    # Agents 1 and 3 play on in a new process; the stopped one is gone.
    assert wait_for(lambda: all(len(pids_of(manager)[i]) == 2 for i in (1, 3)), HEARTBEAT + WAIT)
    assert manager.errors == []
    assert len(pool.restarts) == 1 and "it sent nothing for" in pool.restarts[0].reason
    assert wait_for(lambda: not alive(pid))


def test_the_heartbeat_timeout_is_checked() -> None:
    for bad in (0, -1.0, "10"):
        with pytest.raises(ValueError, match="heartbeat_timeout must be a positive number"):
            parl.ProcessesOptions(heartbeat_timeout=bad)
        with pytest.raises(ValueError, match="heartbeat_timeout must be a positive number"):
            with pytest.warns(DeprecationWarning, match="placement=ProcessesOptions"):
                parl.Manager(
                    {"T": parl.TaskSettings(echo_algorithm_func())}, placement="processes", heartbeat_timeout=bad
                )


class LoudError(Exception):
    """An exception whose own __init__ must never run in the parent."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.count = 1

    def __reduce__(self):  # what pickle would have run
        raise AssertionError("pickled")


def test_an_error_crosses_as_data_and_is_rebuilt_without_running_its_code() -> None:
    def crossed(exc: BaseException) -> BaseException:
        return rebuild_error(wire.unpack(wire.pack(error_data(exc))))

    exit_ = crossed(SystemExit(0))
    assert type(exit_) is SystemExit and exit_.code == 0
    loud = crossed(LoudError("bad obs"))
    assert type(loud) is LoudError and str(loud) == "bad obs" and loud.count == 1
    for module, qualname in [("os", "system"), ("builtins", "object"), ("not_imported_anywhere", "Error"), ("a", "")]:
        data = {**error_data(ValueError("x")), "module": module, "qualname": qualname}
        rebuilt = rebuild_error(data)
        assert type(rebuilt) is WorkerFailure and str(rebuilt) == "ValueError('x')"
    assert "not_imported_anywhere" not in sys.modules
