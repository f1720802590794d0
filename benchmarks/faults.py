"""Fault campaign: every fatal path of ``parl train`` run for real, as a user would meet it, one row each.

    python benchmarks/faults.py [--only NAME ...] [--keep DIR]          # or: make faults

Each case writes a small CartPole config (A2C, two agents) and the code it needs to a folder of
its own, starts ``parl train`` on it as a subprocess, injects its fault (code that raises, a NaN
observation, a signal at a phase, a killed or stopped worker process) and checks what a run must
leave behind, whatever ends it (SIGKILL aside):

- ``result.json`` with the expected stop reason (none when the signal comes before the run began,
  while parl is still starting: then exit status 130 and one line);
- a final checkpoint (``ckpt-*`` under ``checkpoints/``, as ``result.json`` names it);
- the expected exit status;
- no Python traceback on the terminal (tracebacks go to ``<log_dir>/parl.log``).

The table gives each case's outcome and seconds; the script exits 1 when a case fails. The fast
cases are tests in ``make test`` too (tests/test_fatal_paths.py, tests/test_agent_failures.py);
this runs them end to end, with real signals and real worker processes, which take longer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from parl.testing.robots import cartpole_a2c_config

#: The ``parl`` command of this Python's environment (its entry point, as a user runs it).
PARL = [str(Path(sys.executable).parent / "parl")]
#: Seconds a case may take before it counts as hung.
CASE_TIMEOUT = 180.0

BASE_CONFIG: Dict[str, object] = {
    **cartpole_a2c_config(hidden_sizes=(16,), max_env_steps=100_000_000),
    "evaluation": {"every_steps": None, "episodes": 2},
    "python_path": ["."],
}

#: The code cases load (a module ``faulty.py`` beside each case's config).
FAULTY = """
import os, signal, time
import gymnasium
import numpy as np
import parl
from parl.experiment.config.callbacks import Callback


class NaNAfter(gymnasium.Wrapper):
    def __init__(self, env, after):
        super().__init__(env)
        self.after, self.steps = after, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return (np.full_like(obs, np.nan) if self.steps >= self.after else obs), reward, terminated, truncated, info


def nan_cartpole(after=2000):
    return NaNAfter(gymnasium.make("CartPole-v1"), after)


class RaisingAgent(parl.utils.GymAgent):
    def run_one_episode(self):
        if self.episode == 20:
            raise RuntimeError("the agent's own bug")
        return super().run_one_episode()


class HostileCallback(Callback):
    def __init__(self, how="raise", after=30):
        self.how, self.after, self.episodes = how, after, 0

    def on_episode_end(self, step, values):
        self.episodes += 1
        if self.episodes < self.after:
            return None
        if self.how == "raise":
            raise ValueError("the callback's own bug")
        if self.how == "exit":
            raise SystemExit(3)
        if self.how == "return":
            return {"not": "a text"}
        if self.how == "huge":
            return "x" * 10_000_000
        return None
"""


@dataclass
class Case:
    """One fault: the config changes, what to do to the running process, and what must follow."""

    name: str
    changes: Dict[str, object] = field(default_factory=dict)
    inject: Optional[Callable[[subprocess.Popen, Path], None]] = None
    stop_reason: str = ""  # the expected stop reason's start
    status: int = 1
    checkpoint: bool = True
    result: bool = True  # a result.json is expected (none when the signal comes before the run began)


def after_episodes(log_dir: Path, count: int, timeout: float = 60.0) -> None:
    """Wait until the run's metrics.jsonl holds ``count`` episode rows."""
    deadline = time.monotonic() + timeout
    path = log_dir / "metrics.jsonl"
    while time.monotonic() < deadline:
        if path.exists() and path.read_text(encoding="utf-8").count("episode/reward") >= count:
            return
        time.sleep(0.1)
    raise TimeoutError(f"fewer than {count} episodes within {timeout} s")


def send(signum: int, episodes: int = 30) -> Callable[[subprocess.Popen, Path], None]:
    def inject(process: subprocess.Popen, log_dir: Path) -> None:
        after_episodes(log_dir, episodes)
        process.send_signal(signum)

    return inject


def send_early(signum: int, seconds: float) -> Callable[[subprocess.Popen, Path], None]:
    def inject(process: subprocess.Popen, log_dir: Path) -> None:
        time.sleep(seconds)
        process.send_signal(signum)

    return inject


def send_in_final_evaluation(signum: int) -> Callable[[subprocess.Popen, Path], None]:
    def inject(process: subprocess.Popen, log_dir: Path) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list((log_dir / "checkpoints").glob("ckpt-*")):
            time.sleep(0.05)  # the final checkpoint comes before the final evaluation
        time.sleep(0.5)
        process.send_signal(signum)

    return inject


def children_of(pid: int) -> List[int]:
    """The processes whose parent is ``pid`` (worker processes are forked by a thread of it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def hit_worker(signum: int) -> Callable[[subprocess.Popen, Path], None]:
    def inject(process: subprocess.Popen, log_dir: Path) -> None:
        after_episodes(log_dir, 30)
        os.kill(children_of(process.pid)[0], signum)

    return inject


def send_once_started(signum: int) -> Callable[[subprocess.Popen, Path], None]:
    """The signal as soon as the run has begun (its config.yaml written): while the robot is built."""

    def inject(process: subprocess.Popen, log_dir: Path) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (log_dir / "config.yaml").exists():
            time.sleep(0.005)
        process.send_signal(signum)

    return inject


CASES: List[Case] = [
    Case("agent raises", {"agent": {"class": "faulty.RaisingAgent"}}, stop_reason="agents failed"),
    Case("NaN observation", {"env": {"factory": "faulty.nan_cartpole"}}, stop_reason="agents failed"),
    Case(
        "NaN observation, restart_agents 2",
        {"env": {"factory": "faulty.nan_cartpole"}, "faults": {"restart_agents": 2}},
        stop_reason="agents failed",
    ),
    *[
        Case(
            f"callback {how}",
            {"callbacks": [{"class": "faulty.HostileCallback", "how": how}]},
            stop_reason="callback error",
        )
        for how in ("raise", "exit", "return")
    ],
    Case(
        "callback returns 10 MB",
        {"callbacks": [{"class": "faulty.HostileCallback", "how": "huge"}]},
        stop_reason="callback: ",
        status=0,
    ),
    Case("SIGINT while training", inject=send(signal.SIGINT), stop_reason="signal SIGINT", status=0),
    Case("SIGTERM while training", inject=send(signal.SIGTERM), stop_reason="signal SIGTERM", status=0),
    Case(
        "SIGINT while the robot is built",
        inject=send_once_started(signal.SIGINT),
        stop_reason="signal SIGINT",
        status=0,
    ),
    Case("SIGINT while parl starts", inject=send_early(signal.SIGINT, 0.3), status=130, result=False, checkpoint=False),
    Case(
        "SIGINT in the final evaluation",
        {"train": {"max_env_steps": 3000}, "evaluation": {"every_steps": None, "episodes": 2, "final_episodes": 2000}},
        inject=send_in_final_evaluation(signal.SIGINT),
        stop_reason="step budget",
        status=0,
    ),
    Case(
        "processes: worker SIGKILL",
        {"placement": {"name": "processes", "workers": 2}},
        inject=hit_worker(signal.SIGKILL),
        stop_reason="agents failed",
    ),
    Case(
        "processes: worker SIGSTOP",
        {"placement": {"name": "processes", "workers": 2, "heartbeat_timeout": 3.0}},
        inject=hit_worker(signal.SIGSTOP),
        stop_reason="agents failed",
    ),
    Case(
        "processes: worker SIGKILL, restart_workers",
        {
            "placement": {"name": "processes", "workers": 2, "restart_workers": True},
            "train": {"max_env_steps": 30_000},
        },
        inject=hit_worker(signal.SIGKILL),
        stop_reason="step budget",
        status=0,
    ),
]


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the case's run and every process it started (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_case(case: Case, folder: Path) -> Dict[str, object]:
    """Run ``case`` in ``folder``; its row (``ok`` and what was seen)."""
    folder.mkdir(parents=True)
    (folder / "faulty.py").write_text(FAULTY, encoding="utf-8")
    config = json.loads(json.dumps(BASE_CONFIG))
    for key, value in case.changes.items():  # train and evaluation are merged, the rest replaced
        config[key] = {**config[key], **value} if key in ("train", "evaluation") else value
    log_dir = folder / "run"
    config["log_dir"] = str(log_dir)
    (folder / "robot.json").write_text(json.dumps(config), encoding="utf-8")
    start = time.monotonic()
    process = subprocess.Popen(
        [*PARL, "train", "robot.json", "--quiet"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its worker processes too are killed with it if the case goes wrong
    )
    problem = None
    try:
        if case.inject is not None:
            case.inject(process, log_dir)
        _, err = process.communicate(timeout=CASE_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - hung, or the fault could not be injected: a failed row
        _kill_group(process)
        _, err = process.communicate()
        problem = f"hung or could not inject: {type(exc).__name__}: {exc}"
    seconds = time.monotonic() - start
    result_path = log_dir / "result.json"
    result = json.loads(result_path.read_text(encoding="utf-8")) if result_path.exists() else None
    checkpoints = sorted((log_dir / "checkpoints").glob("ckpt-*"))
    traceback = "Traceback (most recent call last)" in err
    seen = {
        "status": process.returncode,
        "stop_reason": None if result is None else result.get("stop_reason"),
        "checkpoint": bool(checkpoints) and result is not None and result.get("checkpoint") == str(checkpoints[-1]),
        "traceback on the terminal": traceback,
        "last line": (err.strip().splitlines() or [""])[-1][:160],
    }
    if problem is None:
        if (result is not None) != case.result:
            problem = "no result.json" if case.result else "a result.json of a run that never began"
        elif result is not None and not str(result.get("stop_reason")).startswith(case.stop_reason):
            problem = f"stop reason {result.get('stop_reason')!r}, expected {case.stop_reason!r}..."
        elif seen["checkpoint"] != case.checkpoint:
            problem = "no final checkpoint" if case.checkpoint else "a checkpoint where none was expected"
        elif process.returncode != case.status:
            problem = f"exit status {process.returncode}, expected {case.status}"
        elif traceback:
            problem = "a traceback on the terminal"
    return {"case": case.name, "ok": problem is None, "problem": problem, "seconds": round(seconds, 1), **seen}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", help="run the cases whose names contain one of these")
    parser.add_argument("--keep", help="keep every case's folder under this directory")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or any(word in c.name for word in args.only)]
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="parl-faults-"))
    rows = []
    try:
        for index, case in enumerate(cases):
            row = run_case(case, root / f"{index:02d}")
            rows.append(row)
            mark = "ok" if row["ok"] else f"FAILED: {row['problem']}"
            print(
                f"{case.name:44s} {mark:10s} status {row['status']}, stop reason {row['stop_reason']!r}, "
                f"checkpoint {'yes' if row['checkpoint'] else 'no'}, {row['seconds']} s",
                flush=True,
            )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    failed = [r for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} cases kept their work and said so in one line")
    for row in failed:
        print(f"  {row['case']}: {row['problem']}; last line: {row['last line']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
