"""Every agent's end is accounted for: an agent that raises SystemExit or KeyboardInterrupt, or returns
something other than its statistics, is an AgentError in ``manager.errors`` in every placement while
the others go on; ``parl train`` whose agents fail, or whose user code calls ``sys.exit`` while the
config is loaded or the robot built, prints one line and exits with status 1."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Dict

import pytest

import parl
from parl.core.errors import AgentsFailedError, EpisodeResultError, failure_summary
from parl.experiment.cli.commands import main
from parl.runtime.runner import play_games
from parl.testing.robots import cartpole_a2c_config, write_config

from toys import FAILURES, WAIT, CountEnv, EchoAgent, FailingAgent, ReportingEchoAgent, Robots

GAMES = 3
FAIL_AT = 1


def test_every_failure_is_an_agent_error_and_the_others_go_on(robot: Robots) -> None:
    manager = robot()
    hows = list(FAILURES)
    manager.add_agent(ReportingEchoAgent(CountEnv(0, length=3), num_games=GAMES), {"T": parl.OnPolicyHelper()})
    for code, how in enumerate(hows, start=1):
        agent = FailingAgent(CountEnv(code, length=3), how=how, fail_at=FAIL_AT, num_games=GAMES)
        manager.add_agent(agent, {"T": parl.OnPolicyHelper()})
    manager.start()
    episodes = manager.join(timeout=WAIT * 2)

    errors = {error.agent_id: error for error in manager.errors}
    assert sorted(errors) == list(range(1, len(hows) + 1)) and len(manager.errors) == len(hows)
    assert all(error.episode == FAIL_AT for error in errors.values())
    assert isinstance(errors[1].original, SystemExit) and errors[1].original.code == 0
    assert errors[1].summary == "agent 1, episode 1: SystemExit(0) raised in run_one_episode"
    assert isinstance(errors[2].original, KeyboardInterrupt)
    assert errors[2].summary == "agent 2, episode 1: KeyboardInterrupt() raised in run_one_episode"
    assert all(isinstance(errors[i].original, EpisodeResultError) for i in range(3, len(hows) + 1))
    assert "returned None; expected a mapping with 'reward' and 'steps'" in errors[3].summary
    assert "returned [(" in errors[4].summary
    assert "returned a mapping without 'reward'" in errors[5].summary
    assert "returned reward 'high'; expected a finite number" in errors[6].summary
    assert "returned reward nan; expected a finite number" in errors[7].summary  # in every placement
    played = sorted((e["agent_id"], e["episode"]) for e in episodes)
    assert played == [(0, i) for i in range(GAMES)] + [(i, 0) for i in range(1, len(hows) + 1)]


def test_a_run_whose_agents_all_fail_says_so_in_one_line(robot: Robots) -> None:
    manager = robot()
    for code in range(4):
        agent = FailingAgent(CountEnv(code, length=2), how="sys.exit", fail_at=0, num_games=GAMES)
        manager.add_agent(agent, {"T": parl.OnPolicyHelper()})
    manager.start()
    assert manager.join(timeout=WAIT * 2) == []
    first = manager.errors[0]
    summary = str(AgentsFailedError(manager.errors, len(manager.agents)))
    assert summary == f"all 4 agents failed; first: {first.summary}"
    assert first.summary == f"agent {first.agent_id}, episode 0: SystemExit(0) raised in run_one_episode"
    assert failure_summary(manager.errors[:1], 4).startswith("1 of 4 agents failed; first: ")


def test_a_keyboard_interrupt_in_the_main_thread_still_stops() -> None:
    agent = FailingAgent(CountEnv(0), how="KeyboardInterrupt", fail_at=0, num_games=1)
    agent.helpers = {}
    agent.run_one_episode = lambda: FAILURES["KeyboardInterrupt"]({})
    errors: list = []
    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(KeyboardInterrupt):
        play_games(agent, lambda: False, lambda record: None, errors.append)
    assert errors == []


# -- parl train ---------------------------------------------------------------------------------------

CONFIG = cartpole_a2c_config(agents=1)


def train(tmp_path: Path, capsys: pytest.CaptureFixture, changes: Dict[str, object]) -> tuple:
    """``parl train`` on CONFIG with ``changes``: (exit status, stdout, the ``parl train:`` lines of stderr)."""
    path = write_config(tmp_path / "robot.yaml", CONFIG, changes, log_dir=tmp_path / "run")
    status = main(["train", str(path), "--quiet"])
    out, err = capsys.readouterr()
    return status, out, [line for line in err.splitlines() if line.startswith("parl train:")]


def test_parl_train_whose_agent_exits_says_so_and_fails(tmp_path, capsys) -> None:
    status, out, lines = train(tmp_path, capsys, {"agent": {"class": "toys.FailingGymAgent", "fail_at": 2}})
    assert status == 1 and "stopped (" not in out
    summary = "the only agent failed: agent 0, episode 2: SystemExit(0) raised in run_one_episode"
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("ckpt-*"))
    assert lines == [f"parl train: {summary}; final checkpoint {checkpoints[-1]}"]
    # The run was saved as any other end: its final checkpoint holds the two episodes' steps, and
    # result.json says why it stopped.
    result = json.loads((tmp_path / "run" / "result.json").read_text(encoding="utf-8"))
    assert result["stop_reason"] == "agents failed" and result["error"] == summary
    assert result["checkpoint"] == str(checkpoints[-1]) and result["env_steps"] > 0
    assert checkpoints[-1].name == f"ckpt-{result['env_steps']:010d}"


def test_parl_train_whose_agents_return_nothing_says_so_and_fails(tmp_path, capsys) -> None:
    agent = {"class": "toys.FailingGymAgent", "how": "None", "fail_at": 0}
    status, out, lines = train(tmp_path, capsys, {"agents": 2, "agent": agent})
    assert status == 1 and "stopped (" not in out
    assert len(lines) == 1
    pattern = r"parl train: (all 2|1 of 2) agents failed; first: agent [01], episode 0: EpisodeResultError: "
    ending = r"run_one_episode returned None; expected a mapping.*; final checkpoint .*/ckpt-\d{10}$"
    assert re.match(pattern + ending, lines[0]), lines


def write_module(tmp_path: Path, name: str, text: str) -> Dict[str, object]:
    """Write ``<name>.py`` to a directory of its own; returns the config change that puts it on the path."""
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / f"{name}.py").write_text(text, encoding="utf-8")
    return {"python_path": [str(directory)]}


_EXITING_MODEL = (
    "import sys\nimport parl\n\n"
    "class Model(parl.models.MLPActorCritic):\n"
    "    def __init__(self, obs_dim: int, num_actions: int) -> None:\n"
    "        sys.exit(0)\n"
)
_EXITING_MODEL_TASKS = cartpole_a2c_config()["tasks"]
_EXITING_MODEL_TASKS["RL"]["model"] = {"class": "parl_exiting_model.Model", "obs_dim": 4, "num_actions": 2}
_EXITING_AGENT = (
    "import sys\nimport parl.utils\n\n"
    "class Agent(parl.utils.GymAgent):\n"
    "    def __init__(self, env, *, seed: int = 0) -> None:\n"
    "        sys.exit('no display')\n"
)


@pytest.mark.parametrize(
    "module, code, changes, line",
    [
        pytest.param(
            "parl_exiting_module",
            "import sys\nsys.exit(3)\n",
            {"agent": {"class": "parl_exiting_module.Agent"}},
            "parl train: agent.class: importing 'parl_exiting_module' called sys.exit(3)",
            id="importing-a-class-path",
        ),
        pytest.param(
            "parl_exiting_model",
            _EXITING_MODEL,
            {"tasks": _EXITING_MODEL_TASKS},
            "parl train: tasks.RL.model: parl_exiting_model.Model called sys.exit(0) while being built",
            id="a-model-constructor",
        ),
        pytest.param(
            "parl_exiting_agent",
            _EXITING_AGENT,
            {"agent": {"class": "parl_exiting_agent.Agent"}},
            "parl train: agent: parl_exiting_agent.Agent called sys.exit('no display') while being built",
            id="an-agent-constructor",
        ),
    ],
)
def test_sys_exit_while_the_robot_is_built_is_one_line(
    tmp_path, capsys, module: str, code: str, changes: Dict[str, object], line: str
) -> None:
    status, out, lines = train(tmp_path, capsys, {**write_module(tmp_path, module, code), **changes})
    assert status == 1 and out == ""
    assert lines == [line]


# -- restarts (faults.restart_agents) ------------------------------------------------------------------

LENGTH = 3


def test_a_failed_agent_is_restarted_with_a_fresh_environment_and_plays_on(robot: Robots) -> None:
    if robot.case.placement == "ray":
        with pytest.raises(ValueError, match="restart_agents is not available with placement 'ray'"):
            robot(restart_agents=2)
        return
    manager = robot(restart_agents=2)
    broken = CountEnv(1, length=LENGTH, fail_at=(1, 2))  # episode 1 fails at its third step
    manager.add_agent(
        ReportingEchoAgent(broken, num_games=4),
        {"T": parl.OnPolicyHelper(sample_interval=100)},
        env_factory=lambda: CountEnv(1, length=LENGTH, marker=7.0),
    )
    manager.start()
    episodes = manager.join(timeout=WAIT * 2)
    assert manager.errors == [] and manager.restarts == 1
    assert sorted(e["episode"] for e in episodes) == [0, 2, 3]  # the failed episode counts as played
    # The failed episode's two cached steps were dropped, not joined to the next episode's.
    algorithm = manager.tasks["T"].algorithm
    assert sum(len(batch) for batch in algorithm.learn_batches) == 3 * LENGTH


class AlwaysFailing(EchoAgent):
    """Every episode returns a reward that is not a number."""

    def run_one_episode(self) -> Dict[str, object]:
        return {"reward": "high", "steps": 0}


def test_restarts_end_at_their_limit_and_the_failure_is_then_the_agent_s_error(robot: Robots) -> None:
    if robot.case.placement == "ray":
        return  # refused at the Manager (the test above)
    manager = robot(restart_agents=2)
    manager.add_agent(AlwaysFailing(CountEnv(1, length=LENGTH), num_games=5), {"T": parl.OnPolicyHelper()})
    manager.start()
    manager.join(timeout=WAIT * 2)
    assert manager.restarts == 2 and len(manager.errors) == 1
    assert manager.errors[0].episode == 2 and manager.errors[0].restart == 0
