"""An agent whose environment step never returns, in every placement: the watchdog names it once per
stall, ``Manager.stop`` returns it instead of raising, and ``parl train`` stopped by a signal still
writes its final checkpoint, then names the agent in one line and exits with status 3."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any, Dict, Iterator, Optional

import gymnasium
import pytest

import parl
from parl.experiment.cli.commands import EXIT_STUCK, load_trained_tasks, main
from parl.experiment.config.robot_config import load_config
from parl.experiment.train import trainer as trainer_module
from parl.runtime.watchdog import StuckAgent, describe_stuck
from parl.testing.robots import cartpole_a2c_config, write_config

from toys import WAIT, CountEnv, EchoAgent, FileEvent, echo_algorithm_func, wait_for

STALL = 0.3  # the watchdog's stall_seconds in these tests
STUCK_ID = 1  # the agent that gets stuck

# -- a Manager of echo agents ---------------------------------------------------------------------


class StuckEnv(CountEnv):
    """A CountEnv whose step ``stuck_at`` of its first episode waits on ``release`` (at most ``WAIT`` x 6)."""

    def __init__(self, code: int, release: FileEvent, stuck_at: int = 3) -> None:
        super().__init__(code, length=10)
        self.release, self.stuck_at = release, stuck_at

    def step(self, action: int):
        if self.episode == 0 and self.t == self.stuck_at:
            self.release.wait(6 * WAIT)
        return super().step(action)


@pytest.fixture
def release() -> Iterator[FileEvent]:
    """Lets a stuck environment go on at the end of the test (its thread then ends), in whichever
    process it runs."""
    event = FileEvent()
    yield event
    event.set()


def test_the_watchdog_names_a_stuck_agent_once_and_stop_returns_it(robot, release, caplog) -> None:
    manager = parl.Manager(
        {"T": parl.TaskSettings(echo_algorithm_func())},
        placement=robot.case.placement_options(),
        thread_placement="os",
        stall_seconds=STALL,
    )
    robot.managers.append(manager)  # stopped, and checked for leftovers, after the test
    manager.add_agent(EchoAgent(CountEnv(0)), {"T": parl.OnPolicyHelper(sample_interval=2)})
    manager.add_agent(EchoAgent(StuckEnv(STUCK_ID, release)), {"T": parl.OnPolicyHelper(sample_interval=2)})
    caplog.set_level(logging.WARNING, logger="parl")
    manager.start()
    assert wait_for(lambda: STUCK_ID in manager.stalled())
    time.sleep(4 * STALL)  # several checks of the watchdog in the same stall
    assert list(manager.stalled()) == [STUCK_ID]  # the other agent plays on, or waits for its prediction
    warnings = [r.getMessage() for r in caplog.records if "in its environment" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith(f"agent {STUCK_ID} has been in its environment for"), warnings
    start = time.monotonic()
    not_stopped = manager.stop(timeout=1.0)
    assert time.monotonic() - start < 1.0 + WAIT
    assert [s.agent_id for s in not_stopped] == [STUCK_ID] and not_stopped[0].seconds >= 4 * STALL
    assert manager.not_stopped == not_stopped
    release.set()
    assert wait_for(lambda: not manager.running())


def test_without_a_watchdog_nothing_is_stalled_but_stop_still_names_the_stuck_agent(release) -> None:
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, thread_placement="os", stall_seconds=None)
    manager.add_agent(EchoAgent(StuckEnv(0, release, stuck_at=0)), {"T": parl.OnPolicyHelper()})
    try:
        manager.start()
        assert wait_for(lambda: manager.in_environment().get(0, 0.0) >= STALL)
        assert manager.stalled() == {}
        assert [s.agent_id for s in manager.stop(timeout=0.5)] == [0]
    finally:
        release.set()
        manager.stop()
    assert not manager.running() and manager.stop() == []


def test_a_bad_stall_seconds_is_refused() -> None:
    with pytest.raises(ValueError, match="stall_seconds"):
        parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, stall_seconds=0)


def test_the_stop_line_names_one_agent_or_several() -> None:
    assert describe_stuck([StuckAgent(2, 31.2)]) == "agent 2 did not stop (stuck in its environment for 31 s)"
    assert (
        describe_stuck([StuckAgent(2, 31.2), StuckAgent(5, 12.0)])
        == "agents 2, 5 did not stop (stuck in their environment for 31 s, 12 s)"
    )


# -- parl train ----------------------------------------------------------------------------------

#: Set by the test: lets a stuck CartPole go on (in this process; a worker process is killed instead).
_RELEASE = threading.Event()


class StuckCartPole(gymnasium.Wrapper):
    """CartPole whose episode seeded with ``stuck_seed`` (agent 1's first) waits at step 5 on ``_RELEASE``."""

    def __init__(self, stuck_seed: int) -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        self.stuck_seed = stuck_seed
        self.stuck = False
        self.t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        self.stuck, self.t = seed == self.stuck_seed, 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        self.t += 1
        if self.stuck and self.t == 5:
            _RELEASE.wait(6 * WAIT)
        return self.env.step(action)


CONFIG = {
    **cartpole_a2c_config(hidden_sizes=(16,), learning_rate=2e-3, sample_interval=4, max_env_steps=10_000_000),
    # the two agents reset their first episodes with seeds 0 and 1: agent STUCK_ID meets the stuck seed
    "env": {"factory": f"{__name__}.StuckCartPole", "kwargs": {"stuck_seed": STUCK_ID}},
    "checkpoint": {"every_steps": None, "every_minutes": None, "keep": 2},
}


def interrupt_once_stuck(managers: list) -> threading.Thread:
    """A thread that sends SIGINT to this process once the trainer's agent 1 has been stuck in its
    environment (at its 5th step) for a second, or after ``WAIT`` x 6, so a failing test ends too."""

    def stuck() -> bool:
        if not managers:
            return False
        agent = managers[0].agents[STUCK_ID]
        return agent.total_steps >= 4 and managers[0].in_environment().get(STUCK_ID, 0.0) >= 1.0

    def run() -> None:
        wait_for(stuck, timeout=6 * WAIT)
        if managers and managers[0].running() and not managers[0].not_stopped:  # the trainer's handler is on
            os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=run, name="interrupt-once-stuck")
    thread.start()
    return thread


@pytest.mark.parametrize("placement", ["threads", "cooperative", "processes"])
def test_a_signal_with_an_agent_stuck_writes_the_final_checkpoint_and_names_it(
    tmp_path, monkeypatch, capsys, placement: str
) -> None:
    block = {"name": placement, "workers": 2} if placement == "processes" else placement
    path = write_config(tmp_path / "stuck.yaml", CONFIG, {"placement": block}, log_dir=tmp_path / "run")
    managers: list = []
    build = trainer_module.build_manager
    monkeypatch.setattr(trainer_module, "build_manager", lambda config: managers.append(build(config)) or managers[-1])
    _RELEASE.clear()
    interrupter = interrupt_once_stuck(managers)
    try:
        status = main(["train", str(path), "--quiet"])
    finally:
        interrupter.join(6 * WAIT)
        _RELEASE.set()
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert status == EXIT_STUCK, (out, err)
    lines = [line for line in err.splitlines() if line.startswith("parl train:")]
    assert len(lines) == 1, err
    head, checkpoint, agents = lines[0].split("; ")
    assert head == "parl train: stopped by SIGINT"
    assert agents.startswith(f"agent {STUCK_ID} did not stop (stuck in its environment for ")
    assert checkpoint.startswith("final checkpoint ")
    tasks, _, counters = load_trained_tasks(load_config(str(path)), checkpoint[len("final checkpoint ") :])
    assert counters["env_steps"] > 0 and set(tasks) == {"RL"}
    manager = managers[0]
    assert [s.agent_id for s in manager.not_stopped] == [STUCK_ID]
    assert wait_for(lambda: not manager.running())  # released: the stuck agent ends
