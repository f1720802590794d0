"""`parl train / eval / plot` end to end on a small A2C CartPole robot: the log dir, metrics,
checkpoints, resuming, signals, reproducibility."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
import yaml

from parl.experiment.cli.commands import main
from parl.experiment.config.build import task_settings
from parl.experiment.config.robot_config import load_config
from parl.experiment.train.checkpoints import CheckpointManager
from parl.experiment.train.trainer import Trainer
from parl.testing import robots

REPO = Path(__file__).resolve().parents[1]

SMALL = {
    **robots.cartpole_a2c_config(hidden_sizes=(32,), learning_rate=2e-3, sample_interval=16, max_env_steps=3000),
    "evaluation": {"every_steps": 1000, "episodes": 2},
    "checkpoint": {"every_steps": 1000, "keep": 2},
}


def write_config(tmp_path: Path, changes: Dict[str, object], name: str = "small") -> Path:
    return robots.write_config(tmp_path / f"{name}.yaml", SMALL, changes, log_dir=tmp_path / "runs" / name)


def metric_rows(log_dir: str) -> List[Dict[str, object]]:
    with open(os.path.join(log_dir, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def episode_returns(log_dir: str) -> List[float]:
    return [row["episode/reward"] for row in metric_rows(log_dir) if "episode/reward" in row]


def test_train_writes_config_metrics_and_checkpoints_then_eval_and_plot_read_them(tmp_path, capsys) -> None:
    config = write_config(tmp_path, {})
    log_dir = str(tmp_path / "runs" / "small")
    assert main(["train", str(config), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "step budget" in out
    assert yaml.safe_load(Path(log_dir, "config.yaml").read_text())["tasks"]["RL"]["algorithm"]["gamma"] == 0.99
    rows = metric_rows(log_dir)
    tags = set().union(*rows)
    for tag in (
        "episode/reward",
        "episode/length",
        "episode/seconds",
        "episode/reward_per_second",
        "eval/mean_return",
        "task/RL/grad_norm",
        "task/RL/learning_rate",
        "task/RL/prediction_batch",
        "task/RL/prediction_latency_ms",
        "task/RL/training_batch",
        "robot/env_steps_per_second",
    ):
        assert tag in tags, tag
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(log_dir))
    latest = CheckpointManager(os.path.join(log_dir, "checkpoints")).latest()
    assert latest is not None and int(latest[-10:]) >= 3000

    assert main(["eval", str(config), "--checkpoint", log_dir, "--episodes", "3"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["episodes"] == 3 and len(summary["returns"]) == 3
    assert summary["mean_return"] == pytest.approx(sum(summary["returns"]) / 3)

    png = tmp_path / "curves.png"
    assert main(["plot", log_dir, "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_config_error_is_one_line_and_exit_status_2(tmp_path, capsys) -> None:
    tasks = json.loads(json.dumps(SMALL["tasks"]))
    tasks["RL"]["algorithm"]["gamma"] = 1.5
    path = write_config(tmp_path, {"tasks": tasks}, name="bad")
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tasks.RL.algorithm.gamma" in err and "1.5" in err


def test_resume_without_a_checkpoint_says_so(tmp_path, capsys) -> None:
    assert main(["train", str(write_config(tmp_path, {})), "--resume", "--quiet"]) == 1
    assert "no checkpoint" in capsys.readouterr().err


def test_one_agent_and_one_seed_give_identical_episode_returns(tmp_path) -> None:
    # A fixed number of games, so both runs stop at the same point (a step budget is checked by
    # polling); evaluations every 500 steps run beside the training, as in any run.
    results = []
    for run in ("a", "b"):
        agent = {"class": "parl.utils.GymAgent", "num_games": 60}
        changes = {"agents": 1, "log_dir": str(tmp_path / run), "agent": agent}
        config = load_config(str(write_config(tmp_path, changes, name=run)), ["evaluation.every_steps=500"])
        result = Trainer(config, progress=False).run()
        assert result["stop_reason"] == "agents finished their games"
        results.append(episode_returns(config.log_dir))
    assert len(results[0]) == 60
    assert len(set(results[0])) > 10
    assert results[0] == results[1]


def test_resume_continues_counters(tmp_path) -> None:
    path = str(write_config(tmp_path, {}))
    first = Trainer(load_config(path), progress=False).run()
    again = Trainer(load_config(path, ["train.max_env_steps=5000"]), resume=True, progress=False).run()
    assert again["resumed_from"] == first["checkpoint"]
    assert again["env_steps"] >= 5000
    assert again["updates"]["RL"] > first["updates"]["RL"]
    assert again["episodes"] > first["episodes"]


def _spawn(config: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "parl", "train", str(config), "--quiet", *extra],
        cwd=str(REPO),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_writes_the_final_checkpoint_and_exits_cleanly(tmp_path, signum: int) -> None:
    config = write_config(tmp_path, {"train": {"max_env_steps": 10_000_000}, "checkpoint": {"every_minutes": 60.0}})
    log_dir = str(tmp_path / "runs" / "small")
    proc = _spawn(config)
    metrics = Path(log_dir, "metrics.jsonl")
    try:
        _wait_for(lambda: metrics.exists() and metrics.stat().st_size > 2000, 60, "episodes in metrics.jsonl")
        assert CheckpointManager(os.path.join(log_dir, "checkpoints")).latest() is None
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert f"signal {signal.Signals(signum).name}" in out
    manager = CheckpointManager(os.path.join(log_dir, "checkpoints"))
    latest = manager.latest()
    assert latest is not None
    counters = json.loads(Path(latest, "robot.json").read_text())["counters"]
    assert counters["env_steps"] > 0


def test_sigkill_during_checkpoint_writes_never_breaks_resume(tmp_path) -> None:
    # Checkpoints every 50 env steps: a random kill lands inside a write most of the time.
    config = write_config(
        tmp_path,
        {"train": {"max_env_steps": 10_000_000}, "checkpoint": {"every_steps": 50, "keep": 2}},
    )
    checkpoints = CheckpointManager(str(tmp_path / "runs" / "small" / "checkpoints"))
    rng = random.Random(0)
    steps_seen = []
    for attempt in range(6):
        proc = _spawn(config, *(["--resume"] if attempt else []))
        try:
            baseline = steps_seen[-1] if steps_seen else -1

            def saved_or_ended(proc: subprocess.Popen = proc, baseline: int = baseline) -> bool:
                latest = checkpoints.latest()
                return (latest is not None and int(latest[-10:]) > baseline) or proc.poll() is not None

            _wait_for(saved_or_ended, 60, "a new checkpoint")
            assert proc.poll() is None, proc.communicate()[1]
            time.sleep(rng.uniform(0.0, 0.6))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=30)
        latest = checkpoints.latest()
        assert latest is not None
        counters = json.loads(Path(latest, "robot.json").read_text())["counters"]
        assert counters["env_steps"] == int(latest[-10:])
        steps_seen.append(counters["env_steps"])
    # Every resume went on from where the last kill left it.
    assert steps_seen == sorted(steps_seen) and steps_seen[-1] > steps_seen[0]
    tasks = {"RL": task_settings(load_config(str(config)), "RL").make_task("RL")}
    assert checkpoints.load(checkpoints.latest(), tasks)["env_steps"] == steps_seen[-1]


def test_an_unwritable_log_dir_is_one_line_and_exit_status_2(tmp_path, capsys) -> None:
    (tmp_path / "a_file").write_text("")
    config = write_config(tmp_path, {"log_dir": str(tmp_path / "a_file" / "run")})
    assert main(["train", str(config), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "not writable" in err and "a_file" in err and err.count("\n") == 1, err


def test_a_new_subcommand_is_a_function_and_a_table_entry(monkeypatch, capsys) -> None:
    from parl.experiment.cli import commands

    def hello(args) -> int:
        print(f"hello {args.name}")
        return 7

    entry = commands.Command("hello", "say hello", (commands.Argument(("name",)),), hello)
    monkeypatch.setattr(commands, "COMMANDS", commands.COMMANDS + (entry,))
    assert main(["hello", "robot"]) == 7
    assert capsys.readouterr().out == "hello robot\n"
    assert "hello" in commands.build_parser().format_help()


def test_every_subcommand_dispatches_to_its_own_function(monkeypatch) -> None:
    from parl.experiment.cli import commands

    called: List[str] = []
    table = tuple(
        commands.Command(c.name, c.help, c.arguments, lambda args, name=c.name: called.append(name) or 0)
        for c in commands.COMMANDS
    )
    monkeypatch.setattr(commands, "COMMANDS", table)
    argv = {
        "train": ["train", "x.yaml"],
        "tune": ["tune", "x.yaml", "--grid", "seed=1,2"],
        "serve": ["serve", "x.yaml"],
        "eval": ["eval", "x.yaml", "--checkpoint", "best"],
        "export": ["export", "run", "-o", "out"],
        "plot": ["plot", "run"],
    }
    assert sorted(argv) == sorted(c.name for c in commands.COMMANDS)
    for args in argv.values():
        assert main(args) == 0
    assert called == list(argv)
