"""The robot configs of examples/configs/ and the example scripts that launch them.

Every config loads and builds. Every single-task example script is a launcher of
its config (``examples/<name>.py`` trains ``examples/configs/<name>.yaml``,
:mod:`parl.experiment.train.launch`): run in this process with a command line, it
trains that config with the options turned into overrides and returns the
Trainer's result.
"""

from __future__ import annotations

import json
import pathlib
import runpy
import sys
from typing import Any, Dict, List

import pytest
import yaml

from parl.experiment.config.build import build_manager
from parl.experiment.config.robot_config import ConfigError, load_config
from parl.experiment.train import launch as launch_module
from parl.experiment.train.launch import example_config, launch_overrides, launch_parser

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
CONFIGS = EXAMPLES / "configs"

#: The single-task example scripts, each the launcher of its config.
LAUNCHERS = (
    "pg_cartpole",
    "a2c_cartpole",
    "a2c_po_cartpole",
    "ppo_cartpole",
    "ppo_pendulum",
    "ppo_lunarlander",
    "dqn_cartpole",
    "ddpg_pendulum",
    "td3_pendulum",
    "sac_pendulum",
    "ppo_tictactoe_selfplay",
    "dqn_tictactoe_selfplay",
    "ppo_simple_spread",
    "mappo_simple_spread",
)
#: Configs with the same robot as another's but one value, run by that one's launcher with --config.
VARIANTS = {"a2c_po_cartpole_mlp": "a2c_po_cartpole"}
#: Configs run by `parl train` only, whose environment factory (if any) is a module of examples/ of its own:
#: Atari (docs/atari.md), MinAtar and MuJoCo (docs/mujoco.md); tests/test_workloads.py runs them. And the
#: asynchronous CartPole learners, which benchmarks/async_cartpole.py and tests/test_impala_appo.py run.
NO_LAUNCHER = (
    "impala_cartpole",
    "appo_cartpole",
    "dqn_atari",
    "ppo_atari",
    "dqn_minatar",
    "dqn_dict_obs",
    "sac_mujoco",
    "td3_mujoco",
    "ppo_halfcheetah",
    "ppo_hopper",
)
#: The on-policy robots whose every update joins one segment of each agent: batching sized by `agents`.
SYNCHRONOUS = ("ppo_cartpole", "ppo_pendulum", "ppo_lunarlander", "ppo_simple_spread", "mappo_simple_spread")
#: The synchronous robots of multi-agent Parallel envs: env agents on task RL in one env copy (simple_spread's 3).
MULTI_AGENT_SENDERS = {"ppo_simple_spread": 3, "mappo_simple_spread": 3}
RESULT_KEYS = {"seed", "env_steps", "episodes", "updates", "stop_reason", "reached", "best_eval", "final_eval"}
#: A run of a few hundred env steps: one-episode evaluations and final evaluation.
TINY = ["--max-steps", "300", "--seed", "1", "-o", "evaluation.episodes=1", "-o", "evaluation.final_episodes=1"]


def config_names() -> List[str]:
    return sorted(p.stem for p in CONFIGS.glob("*.yaml"))


@pytest.mark.parametrize("name", config_names())
def test_every_config_loads_and_builds(name: str) -> None:
    config = load_config(str(CONFIGS / f"{name}.yaml"))
    manager = build_manager(config)
    assert len(manager.agents) == config.agents and sorted(manager.tasks) == sorted(config.tasks)
    # The conventions every example config follows.
    assert config.name == name and config.seed == 0
    assert pathlib.Path(config.log_dir).as_posix().endswith(f"runs/{name}")
    assert (config.checkpoint.every_steps, config.checkpoint.every_minutes, config.checkpoint.keep) == (None, 5.0, 3)
    assert f"parl train examples/configs/{name}.yaml" in (CONFIGS / f"{name}.yaml").read_text()


def test_every_single_task_config_has_its_launcher() -> None:
    launched = {example_config(EXAMPLES / f"{name}.py").stem for name in LAUNCHERS} | set(VARIANTS)
    assert launched == set(config_names()) - set(NO_LAUNCHER)
    for variant, launcher in VARIANTS.items():
        assert f"examples/configs/{variant}.yaml" in (EXAMPLES / f"{launcher}.py").read_text()


def run_script(name: str, argv: List[str], monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """Run ``examples/<name>.py`` as ``python examples/<name>.py ARGV`` in this process; what its launch returned."""
    returned: List[Dict[str, Any]] = []
    real = launch_module.launch

    def recording_launch(*args: Any, **kwargs: Any) -> Dict[str, Any]:
        returned.append(real(*args, **kwargs))
        return returned[-1]

    script = str(EXAMPLES / f"{name}.py")
    monkeypatch.setattr(launch_module, "launch", recording_launch)
    monkeypatch.setattr(sys, "argv", [script, *argv])
    runpy.run_path(script, run_name="__main__")
    assert len(returned) == 1, f"examples/{name}.py did not launch its config"
    return returned[0]


@pytest.mark.parametrize("name", LAUNCHERS)
def test_the_example_script_trains_its_config(name: str, tmp_path: pathlib.Path, monkeypatch, capsys) -> None:
    result = run_script(name, [*TINY, "--log-dir", str(tmp_path), "--quiet"], monkeypatch)
    assert RESULT_KEYS <= set(result)
    assert result["seed"] == 1 and result["env_steps"] >= 300 and result["stop_reason"] == "step budget"
    written = json.loads((tmp_path / "result.json").read_text())
    assert {key: written[key] for key in ("seed", "env_steps")} == {key: result[key] for key in ("seed", "env_steps")}
    out, err = capsys.readouterr()
    assert out == "" and err == ""  # --quiet


def test_an_example_prints_its_final_evaluation(tmp_path: pathlib.Path, monkeypatch, capsys) -> None:
    result = run_script("a2c_cartpole", [*TINY, "--log-dir", str(tmp_path)], monkeypatch)
    out = capsys.readouterr().out
    assert f"final evaluation on fresh seeds, mean return: {result['final_eval']:.1f}" in out
    assert f"log dir: {tmp_path}" in out


def test_the_options_are_config_overrides_and_o_comes_last() -> None:
    parser = launch_parser("x", CONFIGS / "ppo_cartpole.yaml")
    args = parser.parse_args(
        ["--seed", "3", "--agents", "16", "--placement", "cooperative", "--max-steps", "9", "--target", "1.5"]
        + ["--log-dir", "out", "-o", "seed=4", "-o", "tasks.RL.model.dueling=true"]
    )
    assert launch_overrides(args) == [
        "seed=3",
        "agents=16",
        "placement=cooperative",
        "train.max_env_steps=9",
        "train.target_return=1.5",
        "log_dir=out",
        "seed=4",
        "tasks.RL.model.dueling=true",
    ]
    assert launch_overrides(parser.parse_args([])) == []  # the config's values
    assert args.config == str(CONFIGS / "ppo_cartpole.yaml")


def test_an_override_that_does_not_load_exits_with_its_message(monkeypatch, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        launch_module.launch(CONFIGS / "a2c_cartpole.yaml", ["-o", "evaluation.episodes=0", "--quiet"])
    assert exit_info.value.code == 2
    assert "evaluation.episodes: expected" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(MULTI_AGENT_SENDERS))
def test_a_multi_agent_config_as_a_run_writes_it_loads_again(name: str, tmp_path: pathlib.Path) -> None:
    """A run's config.yaml holds the batching resolved (16 copies x 3 env agents: 48); loaded again (``parl
    eval``, a replay of the run) the limit on ``min_batchsize`` counts the senders, not the copies."""
    config = load_config(str(CONFIGS / f"{name}.yaml"))
    written = tmp_path / "config.yaml"
    written.write_text(yaml.safe_dump(config.to_dict(), sort_keys=False), encoding="utf-8")
    senders = config.agents * MULTI_AGENT_SENDERS[name]
    assert load_config(str(written)).tasks["RL"].batching == config.tasks["RL"].batching
    assert load_config(str(written)).tasks["RL"].batching.min_batchsize == senders
    with pytest.raises(ConfigError, match=rf"expected at most the number of agents \({senders}\), got {senders + 1}$"):
        load_config(
            str(written),
            [
                f"tasks.RL.batching.{key}={senders + 1}"
                for key in ("min_batchsize", "max_batchsize", "max_training_batchsize")
            ],
        )


@pytest.mark.parametrize("name", SYNCHRONOUS)
def test_agents_resolves_the_batching_word(name: str) -> None:
    path = CONFIGS / f"{name}.yaml"
    assert path.read_text().count("batchsize: agents") == 3
    # In a multi-agent Parallel env the word counts every helper that sends at once: copies x env agents.
    senders = MULTI_AGENT_SENDERS.get(name, 1)
    args = launch_parser("x", path).parse_args(["--agents", "16"])
    batching = load_config(str(path), launch_overrides(args)).tasks["RL"].batching
    assert batching.max_batchsize == batching.min_batchsize == batching.max_training_batchsize == 16 * senders
    default = load_config(str(path))
    assert default.tasks["RL"].batching.min_batchsize == default.agents * senders
    with pytest.raises(ConfigError, match=r"^tasks\.RL\.batching\.min_batchsize: expected .*, got 'agent'$"):
        load_config(str(path), ["tasks.RL.batching.min_batchsize=agent"])
