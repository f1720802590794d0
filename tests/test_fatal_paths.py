"""Every fatal end of ``parl train`` keeps the work: the robot is stopped, the final checkpoint and
result.json (with the stop reason and one line on the cause) are written, the exit status is not
zero, and the terminal gets one line per problem with the traceback in ``<log_dir>/parl.log``."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import gymnasium
import numpy as np
import pytest

import parl.experiment.train.trainer as trainer_module
from parl.experiment.cli.commands import main
from parl.experiment.config.callbacks import Callback, Callbacks
from parl.experiment.train.run_log import LOG_FILE
from parl.runtime.manager import Manager, StopTimeoutError
from parl.testing.robots import cartpole_a2c_config, write_config

CONFIG = {**cartpole_a2c_config(), "python_path": [str(Path(__file__).resolve().parent)]}


def train(tmp_path: Path, capsys: pytest.CaptureFixture, changes: Mapping[str, object]) -> Tuple[int, Dict, List[str]]:
    """``parl train`` on CONFIG with ``changes``: (exit status, result.json, stderr's lines)."""
    path = write_config(tmp_path / "robot.yaml", CONFIG, changes, log_dir=tmp_path / "run")
    status = main(["train", str(path), "--quiet"])
    _, err = capsys.readouterr()
    result = json.loads((tmp_path / "run" / "result.json").read_text(encoding="utf-8"))
    return status, result, err.splitlines()


def assert_saved(tmp_path: Path, result: Dict[str, object]) -> None:
    """The final checkpoint is there, at the env steps result.json gives, and holds trained weights."""
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("ckpt-*"))
    assert checkpoints and result["checkpoint"] == str(checkpoints[-1])
    assert checkpoints[-1].name == f"ckpt-{result['env_steps']:010d}"
    robot = json.loads((checkpoints[-1] / "robot.json").read_text(encoding="utf-8"))
    assert robot["step"] == result["env_steps"] > 0


def assert_one_line_each(lines: List[str], tmp_path: Path) -> None:
    assert not any("Traceback" in line or line.startswith("  File ") for line in lines), lines
    log = (tmp_path / "run" / LOG_FILE).read_text(encoding="utf-8")
    assert "Traceback (most recent call last)" in log


class RaisingCallback(Callback):
    """Raises (or exits, or returns a number) in ``hook`` once ``after`` episodes have ended."""

    def __init__(self, hook: str = "on_episode_end", how: str = "raise", after: int = 3) -> None:
        self.hook, self.how, self.after, self.episodes = hook, how, after, 0

    def _act(self, hook: str) -> Optional[str]:
        if hook != self.hook or self.episodes < self.after:
            return None
        if self.how == "raise":
            raise ValueError("the callback's own bug")
        if self.how == "exit":
            raise SystemExit(4)
        return 7  # type: ignore[return-value] - a hostile return value

    def on_episode_end(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        self.episodes += 1
        return self._act("on_episode_end")

    def on_update(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        return self._act("on_update")


@pytest.mark.parametrize(
    "how, line",
    [
        ("raise", "RaisingCallback.on_episode_end raised ValueError: the callback's own bug"),
        ("exit", "RaisingCallback.on_episode_end raised SystemExit(4)"),
        ("return", "RaisingCallback.on_episode_end returned int; expected None or a text"),
    ],
)
def test_a_failing_callback_stops_the_run_which_is_saved_and_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, how: str, line: str
) -> None:
    callback = {"class": "test_fatal_paths.RaisingCallback", "how": how}
    status, result, lines = train(tmp_path, capsys, {"callbacks": [callback]})
    assert status == 1
    assert result["stop_reason"] == f"callback error: callback {line}"
    assert result["error"] == f"callback {line}" and math.isnan(result["final_eval"])
    assert_saved(tmp_path, result)
    problem = [x for x in lines if x.startswith("parl train:")]
    assert problem == [f"parl train: callback {line}; final checkpoint {result['checkpoint']}"]
    if how != "return":
        assert_one_line_each(lines, tmp_path)


def test_callbacks_go_on_past_a_failed_one_which_is_not_called_again() -> None:
    class Counting(Callback):
        def __init__(self) -> None:
            self.calls = 0

        def on_episode_end(self, step: int, values: Mapping[str, float]) -> Optional[str]:
            self.calls += 1
            return "x" * 500 + "\nsecond line"

    broken, counting = RaisingCallback(after=0), Counting()
    callbacks = Callbacks([broken, counting])
    for step in range(3):
        callbacks.episode_end(step, {})
    assert broken.episodes == 1 and counting.calls == 3
    assert callbacks.error == "callback RaisingCallback.on_episode_end raised ValueError: the callback's own bug"
    assert callbacks.stop_reason == f"callback error: {callbacks.error}"
    alone = Callbacks([Counting()])
    alone.episode_end(0, {})
    assert alone.error is None and "\n" not in alone.stop_reason and len(alone.stop_reason) <= 210


class NaNAfter(gymnasium.Wrapper):
    """CartPole whose observations turn NaN after ``after`` steps."""

    def __init__(self, env: gymnasium.Env, after: int) -> None:
        super().__init__(env)
        self.after, self.steps = after, 0

    def step(self, action: object) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.steps >= self.after:
            obs = np.full_like(obs, np.nan)
        return obs, reward, terminated, truncated, info


def nan_cartpole(after: int = 400) -> gymnasium.Env:
    return NaNAfter(gymnasium.make("CartPole-v1"), after)


def test_a_nan_observation_stops_the_run_which_is_saved(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    status, result, lines = train(tmp_path, capsys, {"env": {"factory": "test_fatal_paths.nan_cartpole"}})
    assert status == 1 and result["stop_reason"] == "agents failed"
    assert "NaN" in result["error"] or "finite" in result["error"], result["error"]
    assert_saved(tmp_path, result)
    assert_one_line_each(lines, tmp_path)


@pytest.mark.parametrize("stuck", ["scheduler", "wrapper"])
def test_a_stop_that_times_out_saves_unless_an_update_may_be_under_way(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, stuck: str
) -> None:
    # A thread that outlives Manager.stop (a stalled scheduler, say) does not cost the run's checkpoint
    # unless a wrapper thread, which may be inside an update, is the one still running.
    real_stop = Manager.stop

    def stop(self: Manager, timeout: float = 5.0) -> list:
        real_stop(self, timeout)
        threads, wrappers = (["parl-scheduler"], []) if stuck == "scheduler" else ([], ["RL"])
        raise StopTimeoutError(timeout, threads, wrappers)

    monkeypatch.setattr(Manager, "stop", stop)
    status, result, lines = train(tmp_path, capsys, {"train": {"max_env_steps": 600}})
    assert result["stop_reason"] == "step budget" and result["env_steps"] >= 600
    if stuck == "scheduler":
        assert status == 0
        assert_saved(tmp_path, result)
        assert any("threads still running" in line and "saved all the same" in line for line in lines), lines
    else:
        assert status == 1 and result["checkpoint"] is None
        assert result["checkpoint_error"] == "the threads of tasks ['RL'] did not stop"
        assert not list((tmp_path / "run" / "checkpoints").glob("ckpt-*"))
        assert f"parl train: final checkpoint not written: {result['checkpoint_error']}" in lines


def test_a_signal_while_the_robot_is_built_ends_the_run_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_build = trainer_module.build_manager

    def build(config: object) -> Manager:
        manager = real_build(config)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the robot is built
        return manager

    monkeypatch.setattr(trainer_module, "build_manager", build)
    status, result, lines = train(tmp_path, capsys, {})
    assert status == 0 and result["stop_reason"] == "signal SIGINT" and result["env_steps"] == 0
    assert not any("Traceback" in line for line in lines)


def test_a_signal_during_the_final_evaluation_ends_it_and_the_result_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def final_evaluation(self: object, *args: object) -> float:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the signal ends this at once
        raise AssertionError("the signal did not end the final evaluation")

    monkeypatch.setattr(trainer_module.Trainer, "_final_evaluation", final_evaluation)
    start = time.monotonic()
    status, result, lines = train(tmp_path, capsys, {"train": {"max_env_steps": 600}})
    assert time.monotonic() - start < 25
    assert status == 0 and result["stop_reason"] == "step budget" and math.isnan(result["final_eval"])
    assert_saved(tmp_path, result)
    assert "parl train: final evaluation interrupted by SIGTERM; the run is saved without it" in lines


def test_faults_restart_agents_plays_on_past_failures_until_the_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # Each environment turns NaN after 400 steps: every agent is restarted (with a fresh one) three
    # times, and the fourth failure ends the run, which is saved.
    changes = {"env": {"factory": "test_fatal_paths.nan_cartpole"}, "faults": {"restart_agents": 3}}
    status, result, lines = train(tmp_path, capsys, changes)
    assert status == 1 and result["stop_reason"] == "agents failed"
    assert 3 <= result["agent_restarts"] <= 6 and result["env_steps"] >= 4 * 400
    assert_saved(tmp_path, result)
    assert any("restarted (1 of 3)" in line for line in lines), lines
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert max(row.get("robot/agent_restarts", 0) for row in rows) >= 3


def _wait_until_it_catches(pid: int, signum: int, timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has a handler for ``signum`` (its SigCgt mask in /proc), so that a signal
    sent then meets the handler however slowly the machine starts the process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status").read_text()
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        if caught & (1 << (signum - 1)):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} set no handler for signal {signum} in {timeout} s")


def test_ctrl_c_while_the_parl_command_starts_is_one_line_and_status_130(tmp_path: Path) -> None:
    command = Path(sys.executable).parent / "parl"
    process = subprocess.Popen([str(command), "train", "missing.yaml"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    # Python catches SIGINT from its start; the entry point sets its SIGTERM handler right after its SIGINT one
    _wait_until_it_catches(process.pid, signal.SIGTERM)
    process.send_signal(signal.SIGINT)  # importing paddle takes seconds: parl is still starting
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err.strip().splitlines() == ["parl: stopped by SIGINT while starting (no run under way; nothing to save)"]
