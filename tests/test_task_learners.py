"""A robot whose task learns through learner processes (``TaskSettings.learners``, ``tasks.<name>.learners``):
the same weights as the same robot with one learner on the same batches, input normalization and
reward transforms applied by the serving task, checkpoints resumed, no process left after stop."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest

import parl
from parl.algorithms.ppo import PPO
from parl.core.batch import Transition
from parl.experiment.config import ConfigError, load_config
from parl.experiment.config.build import task_settings
from parl.models import MLPActorCritic
from parl.seeding import seed_everything
from parl.validation import ParameterError

OBS_DIM, ACTIONS, SEED = 4, 2, 5
SEGMENTS, SEGMENT_LENGTH = 4, 16  # CartPole's sizes; 2 minibatches of 32 rows
ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "configs" / "ppo_cartpole.yaml"


def ppo_settings(learners: int, normalize: bool = False) -> parl.TaskSettings:
    algorithm_func = parl.create_algorithm_func(
        MLPActorCritic,
        {"obs_dim": OBS_DIM, "num_actions": ACTIONS, "hidden_sizes": (16,)},
        PPO,
        {"learning_rate": 3e-3, "epochs": 2, "num_minibatches": 2, "grad_clip": 0.5},
    )
    return parl.TaskSettings(
        algorithm_func, learners=learners, normalize_inputs=normalize, reward_scale=0.5, reward_clip=1.0
    )


def cartpole_batch(seed: int) -> Transition[np.ndarray]:
    """CartPole-shaped PPO segments (4 observations, 2 actions), rewards past the clip."""
    rng = np.random.default_rng(seed)
    rows = SEGMENTS * SEGMENT_LENGTH
    obs = (rng.standard_normal((rows + 1, OBS_DIM)) * 3 + 1).astype(np.float32)
    return Transition(
        inputs={"obs": obs[:-1]},
        actions={"action": rng.integers(0, ACTIONS, (rows, 1)).astype(np.int64)},
        rewards={"reward": rng.uniform(-3, 3, (rows, 1)).astype(np.float32)},
        next_inputs={"obs": obs[1:]},
        next_episode_end=(rng.random((rows, 1)) < 0.05).astype(np.float32),
        states={},
        next_states={},
        sequence_lengths=(SEGMENT_LENGTH,) * SEGMENTS,
    )


def trained(manager: parl.Manager, batches: List[int]) -> Tuple[List[Dict], Dict]:
    """Drive the manager's task with fixed batches: the same generator state before the first update,
    and (normalizing tasks) the same input statistics from one prediction batch."""
    task = manager.tasks["RL"]
    task.predict({"obs": cartpole_batch(99).inputs["obs"]}, {})  # builds the layers, feeds the normalizer
    seed_everything(SEED)
    costs = [task.learn(cartpole_batch(seed)) for seed in batches]
    return costs, task.algorithm_weights()


def learner_children() -> List[str]:
    return [p.name for p in multiprocessing.active_children() if p.name.startswith("learner-")]


def assert_same_weights(actual: Dict, expected: Dict, where: str = "") -> None:
    """Equal nested dicts of arrays (models' weights, the normalizer's statistics)."""
    assert actual.keys() == expected.keys(), where
    for key, value in expected.items():
        if isinstance(value, dict):
            assert_same_weights(actual[key], value, f"{where}/{key}")
        else:
            np.testing.assert_allclose(actual[key], value, rtol=1e-5, atol=1e-6, err_msg=f"{where}/{key}")


def robot(learners: int, normalize: bool = False) -> parl.Manager:
    seed_everything(0)  # the same initial weights in both robots
    return parl.Manager({"RL": ppo_settings(learners, normalize)})


@pytest.mark.parametrize("normalize", [False, True], ids=["plain", "normalized"])
def test_two_learners_equal_one_in_a_robot(normalize: bool) -> None:
    one = robot(1, normalize)
    one.tasks["RL"].track_grad_norm = True  # as the trainer's metrics set it
    expected_costs, expected = trained(one, [0, 1, 2])
    one.stop()
    two = robot(2, normalize)
    try:
        costs, weights = trained(two, [0, 1, 2])
        assert len(learner_children()) == 2
        assert two.tasks["RL"].update_steps == one.tasks["RL"].update_steps == 3 * 2 * 2
        # The learners' gradient norms and learning rate reach the task's metrics as one learner's do.
        (total, steps, nonfinite), (want_total, want_steps, _) = (
            two.tasks["RL"].grad_norm_total,
            one.tasks["RL"].grad_norm_total,
        )
        assert steps == want_steps == 12 and nonfinite == 0 and total == pytest.approx(want_total, rel=1e-4)
        assert two.tasks["RL"].learning_rate() == pytest.approx(one.tasks["RL"].learning_rate()) == 3e-3
    finally:
        two.stop()
    assert learner_children() == []
    assert_same_weights(weights, expected)
    for got, want in zip(costs, expected_costs):
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_resume_from_a_checkpoint(tmp_path: Path) -> None:
    """Save after two updates through learners (their optimizer state included), stop; a fresh robot with
    learners loads it and its next update equals the first robot's had it gone on alone."""
    path = str(tmp_path / "RL.json")
    two = robot(2)
    try:
        trained(two, [0, 1])
        two.tasks["RL"].save(path)
    finally:
        two.stop()
    one = robot(1)
    one.tasks["RL"].load(path)
    _, expected = trained(one, [2])
    one.stop()
    resumed = robot(2)
    try:
        resumed.tasks["RL"].load(path)
        _, weights = trained(resumed, [2])
        assert resumed.tasks["RL"].update_steps == 3 * 2 * 2
    finally:
        resumed.stop()
    assert_same_weights(weights, expected)
    assert learner_children() == []


def test_a_checkpoint_loaded_while_learners_run_reaches_them(tmp_path: Path) -> None:
    """Stopping the learners takes their state back into the task: after a load, the checkpoint's."""
    path = str(tmp_path / "RL.json")
    plain = robot(1)
    _, expected = trained(plain, [0])
    plain.tasks["RL"].save(path)
    plain.stop()
    two = robot(2)
    try:
        trained(two, [1, 2])  # the learners start, and move away from the checkpoint
        two.tasks["RL"].load(path)
        two.tasks["RL"].stop_learners()
        assert learner_children() == []
        assert_same_weights(two.tasks["RL"].algorithm_weights(), expected)
        assert two.tasks["RL"].update_steps == 2 * 2
    finally:
        two.stop()


def test_config_key_reaches_the_task_settings() -> None:
    config = load_config(str(CONFIG), ["tasks.RL.learners=2"])
    settings = task_settings(config, "RL")
    assert (settings.learners, settings.learner_device) == (2, "cpu")
    assert task_settings(load_config(str(CONFIG)), "RL").learners == 1


@pytest.mark.parametrize(
    "override, message",
    [
        ("tasks.RL.learners=0", "tasks.RL.learners"),
        ("tasks.RL.learners=1.5", "tasks.RL.learners"),
        ("tasks.RL.learner_device=tpu", "tasks.RL.learner_device"),
    ],
)
def test_bad_config_keys_are_refused(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(str(CONFIG), [override])


def test_gpu_learners_without_gpus_are_refused_in_one_line() -> None:
    import paddle

    gpus = paddle.device.cuda.device_count() if paddle.is_compiled_with_cuda() else 0
    with pytest.raises(ConfigError, match=f"64 learners, {gpus} GPUs") as caught:
        load_config(str(CONFIG), ["tasks.RL.learners=64", "tasks.RL.learner_device=gpu"])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("learners", [0, -1, 2.0, True, "2"])
def test_bad_learner_counts_are_refused(learners: object) -> None:
    with pytest.raises(ParameterError, match="learners"):
        parl.TaskSettings(ppo_settings(1).algorithm_func, learners=learners)  # type: ignore[arg-type]


def test_learners_with_shared_parts_are_refused() -> None:
    with pytest.raises(ValueError, match="task 'RL': learners 2 cannot learn parts shared"):
        parl.Manager(
            {"RL": ppo_settings(2), "Aux": ppo_settings(1)},
            shared={"trunk": {"RL": "model.actor_hidden", "Aux": "model.actor_hidden"}},
        )


def test_parl_train_with_two_learners_and_its_resume(tmp_path: Path) -> None:
    """``parl train`` with ``tasks.RL.learners=2`` completes (its updates counted by the learners), and
    ``--resume`` continues from its final checkpoint."""
    first = _train(tmp_path, 512)
    assert first["error"] is None and first["updates"]["RL"] > 0 and first["checkpoint"]
    resumed = _train(tmp_path, 1024, "--resume")
    assert resumed["error"] is None and resumed["resumed_from"] == first["checkpoint"]
    assert resumed["updates"]["RL"] > first["updates"]["RL"]


def _train(log_dir: Path, steps: int, *flags: str) -> Dict:
    overrides = [
        "tasks.RL.learners=2",
        "agents=2",
        f"train.max_env_steps={steps}",
        "evaluation.every_steps=null",
        "evaluation.final_episodes=1",
        f"log_dir={log_dir}",
    ]
    options = [part for override in overrides for part in ("-o", override)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(ROOT / "parl_cli.py"), "train", str(CONFIG), "--quiet", *flags, *options]
    done = subprocess.run(command, cwd=log_dir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads((log_dir / "result.json").read_text())
