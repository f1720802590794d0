"""``parl serve``: the config's robot listens for RLX clients; Ctrl-C or SIGTERM, whenever it comes, writes
the final checkpoint and exits with status 0, and a restart resumes the robot's env step counter and
weights; it refuses to listen beyond loopback without a token. Each server is a child process of the
test, stopped by its pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import gymnasium as gym
import pytest
import yaml

import parl.rlx
from parl.experiment.cli.commands import main
from parl.experiment.train.checkpoints import CheckpointManager

from toys import serve_process, wait_for

REPO = Path(__file__).resolve().parents[1]
TOKEN = "0123456789abcdef0123456789abcdef"

#: A small PPO CartPole robot: segments of 8, an update per 2 of them, no periodic checkpoint.
CONFIG: Dict[str, object] = {
    "name": "served",
    "agents": 2,
    "env": {"id": "CartPole-v1"},
    "tasks": {
        "RL": {
            "model": {"class": "parl.models.MLPActorCritic", "hidden_sizes": [16]},
            "algorithm": {"class": "parl.algorithms.PPO", "epochs": 2},
            "helper": {"class": "parl.OnPolicyHelper", "sample_interval": 8},
            "batching": {"min_batchsize": 1, "training_timeout": 0.05},
        }
    },
    "train": {"max_env_steps": 1_000_000},
    "checkpoint": {"every_minutes": None},
}


def write_config(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "served.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "log_dir": str(tmp_path / "run"), **changes}), encoding="utf-8")
    return path


def interrupt(proc: subprocess.Popen) -> Tuple[str, str]:
    """Ctrl-C the server, its output once it has exited."""
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)


def checkpoint(log_dir: Path) -> Tuple[str, Dict[str, object]]:
    """The latest checkpoint's directory name and its robot.json."""
    latest = CheckpointManager(str(log_dir / "checkpoints")).latest()
    assert latest is not None, "no checkpoint"
    return os.path.basename(latest), json.loads(Path(latest, "robot.json").read_text())


def test_ctrl_c_writes_a_checkpoint_and_a_restart_resumes_its_step_counter_and_weights(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    proc, address = serve_process(str(config), "--bind", "127.0.0.1:0", "--no-eval", "--quiet")
    try:
        with parl.rlx.Client(address) as client:
            assert client.env_steps == 0
            played = parl.rlx.drive(gym.make("CartPole-v1"), client, episodes=12, seed=0)
        steps = sum(e.length for e in played)
        out, err = interrupt(proc)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped (signal SIGINT)" in out and "Traceback" not in err
    name, first = checkpoint(tmp_path / "run")
    assert first["counters"]["env_steps"] == steps and first["step"] == steps
    # A restart resumes from it: the step counter every welcome tells, and the same weights, which the
    # checkpoint written at the next Ctrl-C (nothing learned in between) holds bit for bit.
    proc, address = serve_process(str(config), "--bind", "127.0.0.1:0", "--no-eval", "--quiet")
    try:
        with parl.rlx.Client(address) as client:
            assert client.env_steps == steps
        out, err = interrupt(proc)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"resumed from {tmp_path / 'run' / 'checkpoints' / name}" in out
    again_name, again = checkpoint(tmp_path / "run")
    assert again_name == name and again["files"] == first["files"]  # the same weights, optimizer and counters
    assert again["counters"]["env_steps"] == steps


def stopped_cleanly(proc: subprocess.Popen, out: str, err: str, log_dir: Path, signame: str) -> Dict[str, object]:
    """Check that ``parl serve`` stopped by ``signame`` as any run stops: exit status 0, no traceback, the
    signal's name in its summary, its result.json and its log; the result."""
    assert proc.returncode == 0, err
    assert f"stopped (signal {signame})" in out and "Traceback" not in err and "Error" not in err, err
    result = json.loads((log_dir / "result.json").read_text())
    assert result["stop_reason"] == f"signal {signame}" and Path(result["checkpoint"]).is_dir()
    assert f"training stops: signal {signame}" in (log_dir / "parl.log").read_text()
    return result


def test_sigterm_while_clients_play_writes_the_final_checkpoint_and_exits_with_status_0(tmp_path: Path) -> None:
    proc, address = serve_process(str(write_config(tmp_path)), "--bind", "127.0.0.1:0", "--no-eval", "--quiet")
    played: List[parl.rlx.EpisodeResult] = []
    try:
        with parl.rlx.Client(address) as client:
            played += parl.rlx.drive(gym.make("CartPole-v1"), client, episodes=3, seed=0)
            client.init([0.0, 0.0, 0.0, 0.0])  # an episode under way when the signal comes
            proc.send_signal(signal.SIGTERM)
            with pytest.raises(parl.rlx.ServerError, match="shutdown"):
                for _ in range(10_000):
                    client.send(1.0, [0.0, 0.0, 0.0, 0.0])
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    result = stopped_cleanly(proc, out, err, tmp_path / "run", "SIGTERM")
    assert result["env_steps"] >= sum(e.length for e in played)


#: An environment factory whose module takes seconds to import: ``parl serve`` is still reading its config.
SLOW_IMPORT = """import pathlib, time
pathlib.Path(__file__).with_name("importing").touch()
time.sleep(3.0)


def cartpole():
    import gymnasium

    return gymnasium.make("CartPole-v1")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_the_config_is_read_stops_the_run_as_soon_as_it_begins(tmp_path: Path, signum: int) -> None:
    (tmp_path / "slow_env.py").write_text(SLOW_IMPORT, encoding="utf-8")
    config = write_config(tmp_path, env={"factory": "slow_env.cartpole"}, python_path=[str(tmp_path)])
    command = [sys.executable, "-m", "parl", "serve", str(config), "--bind", "127.0.0.1:0", "--no-eval", "--quiet"]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        command, cwd=REPO, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert wait_for(lambda: (tmp_path / "importing").exists() or proc.poll() is not None, timeout=120)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    result = stopped_cleanly(proc, out, err, tmp_path / "run", signal.Signals(signum).name)
    assert "listening" not in out and result["env_steps"] == 0  # the robot was built and saved, never started


def test_a_run_interrupted_before_it_begins_is_saved_without_listening(tmp_path: Path) -> None:
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.train.trainer import Trainer

    config = load_config(str(write_config(tmp_path)), ["placement.name=rlx", "placement.bind=127.0.0.1:0"])
    started = []
    trainer = Trainer(config, progress=False, evaluate=False, on_start=started.append)
    trainer.interrupt(signal.SIGTERM)
    trainer.interrupt(signal.SIGINT)  # the first counts
    result = trainer.run()
    assert result["stop_reason"] == "signal SIGTERM" and started == []
    assert Path(result["checkpoint"]).is_dir() and not trainer.manager.running()


def refusal(tmp_path: Path, capsys: pytest.CaptureFixture, *args: str) -> str:
    """What ``parl serve`` with ``args`` wrote on stderr; it must exit with status 2 before it listens."""
    assert main(["serve", str(write_config(tmp_path)), "--quiet", *args]) == 2
    return capsys.readouterr().err


def test_listening_beyond_loopback_needs_a_token_of_32_bytes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    err = refusal(tmp_path, capsys, "--bind", "0.0.0.0:0")
    assert err.startswith(
        "parl serve: placement.token_file: expected a secret of at least 32 bytes to listen on 0.0.0.0:0"
    )
    short = tmp_path / "short"
    short.write_text("abc\n")
    err = refusal(tmp_path, capsys, "--bind", "0.0.0.0:0", "--token-file", str(short))
    assert "placement.token_file: expected bytes, 32 to 4096 of them, got '<3>'" in err
    missing = refusal(tmp_path, capsys, "--token-file", str(tmp_path / "missing"))
    assert "placement.token_file: expected a file that can be read (No such file or directory)" in missing


def test_a_token_file_admits_its_clients_only(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    proc, address = serve_process(
        str(write_config(tmp_path)), "--bind", "127.0.0.1:0", "--token-file", str(token), "--quiet", "--no-eval"
    )
    try:
        with pytest.raises(parl.rlx.ServerError, match="unauthorized"):
            parl.rlx.Client(address)
        with parl.rlx.Client(address, TOKEN) as client:
            assert client.init([0.0, 0.0, 0.0, 0.0]) in (0, 1)
        out, err = interrupt(proc)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert TOKEN not in (tmp_path / "run" / "config.yaml").read_text()  # the file's path only
    rows: List[Dict[str, object]] = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert sum(row.get("rlx/errors", 0) for row in rows) == 1 and sum(row.get("rlx/accepted", 0) for row in rows) == 2


def test_an_address_in_use_is_one_line_and_exit_status_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        err = refusal(tmp_path, capsys, "--bind", f"127.0.0.1:{taken.getsockname()[1]}")
    finally:
        taken.close()
    assert err.startswith("parl serve: cannot listen on 127.0.0.1:") and "in use" in err and err.count("\n") == 1


def test_import_parl_does_not_import_rlx() -> None:
    code = "import sys, parl; print(sorted(m for m in sys.modules if 'rlx' in m))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
