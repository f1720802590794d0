"""parl export + parl.load_policy: a trained policy on its own, acting as the run's robot did."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import parl
from parl.experiment.cli.commands import load_trained_tasks, main
from parl.experiment.config.robot_config import load_config
from parl.experiment.policy.export import POLICY_FILE, PolicyError

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"


def train_briefly(tmp_path: Path, config: str) -> str:
    """A run of ``config`` for 1,000 env steps in ``tmp_path``; returns its log dir."""
    run = str(tmp_path / "run")
    status = main(["train", str(CONFIGS / config), "-o", f"log_dir={run}", "-o", "train.max_env_steps=1000", "--quiet"])
    assert status == 0
    return run


@pytest.mark.parametrize("config", ["a2c_cartpole.yaml", "sac_pendulum.yaml"])
def test_an_exported_policy_acts_as_the_trained_tasks_do(tmp_path: Path, config: str, capsys) -> None:
    run = train_briefly(tmp_path, config)
    out = str(tmp_path / "policy")
    assert main(["export", run, "-o", out]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["policy"] == os.path.abspath(out)

    policy = parl.load_policy(out)
    tasks, _, _ = load_trained_tasks(load_config(os.path.join(run, "config.yaml")), run)
    ((name, trained),) = tasks.items()
    spec = trained.input_specs[0]
    obs = np.random.default_rng(0).standard_normal((16,) + spec.shape).astype(spec.dtype)
    expected, _ = trained.predict({spec.name: obs}, trained.initial_states(16), deterministic=True)
    actions, _ = policy.predict({spec.name: obs})
    assert sorted(actions) == sorted(expected)
    for key in actions:
        np.testing.assert_array_equal(actions[key], expected[key])
    if trained.normalizer is not None:  # a2c_cartpole normalizes its inputs: the statistics came along
        assert policy.tasks[name].normalizer.state_dict().keys() == trained.normalizer.state_dict().keys()
        np.testing.assert_array_equal(
            policy.tasks[name].normalizer.state_dict()["obs"]["mean"], trained.normalizer.state_dict()["obs"]["mean"]
        )


def test_a_policy_checks_its_inputs_and_names_its_tasks(tmp_path: Path) -> None:
    run = train_briefly(tmp_path, "a2c_cartpole.yaml")
    out = str(tmp_path / "policy")
    assert main(["export", run, "-o", out]) == 0
    policy = parl.load_policy(out)
    with pytest.raises(ValueError, match=r"input 'obs': expected shape \[B, 4\], got \[3, 5\]"):
        policy.predict({"obs": np.zeros((3, 5), np.float32)})
    with pytest.raises(ValueError, match="no task 'Aux'"):
        policy.predict({"obs": np.zeros((3, 4), np.float32)}, task="Aux")


def test_a_weights_file_holding_a_pickle_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    run = train_briefly(tmp_path, "a2c_cartpole.yaml")
    out = tmp_path / "policy"
    assert main(["export", run, "-o", str(out)]) == 0
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (out / "RL.safetensors").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(PolicyError, match="RL.safetensors"):
        parl.load_policy(str(out))
    assert not marker.exists()


def test_another_format_or_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy"):
        parl.load_policy(str(tmp_path))
    (tmp_path / POLICY_FILE).write_text(json.dumps({"format": 99, "tasks": {}}))
    with pytest.raises(PolicyError, match="format 99, this parl reads formats \\[1, 2\\]"):
        parl.load_policy(str(tmp_path))


def test_export_needs_a_run_directory(tmp_path: Path, capsys) -> None:
    assert main(["export", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    assert "has no config.yaml" in capsys.readouterr().err
