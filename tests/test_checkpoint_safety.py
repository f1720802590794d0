"""Checkpoint files are data, never code, and are verified: crafted pickles run nothing, damaged
checkpoints are refused in one line and skipped for an intact one, a load-then-save round trip
keeps every array, and a checkpoint that cannot be written leaves the older ones intact."""

from __future__ import annotations

import errno
import json
import os
import pickle
import re
from pathlib import Path
from typing import Dict, List

import numpy as np
import paddle
import pytest
import safetensors.numpy
from test_checkpoints import batch

import parl
from parl.algorithms import A2C
from parl.experiment.train import checkpoints as checkpoints_module
from parl.experiment.train.checkpoints import CheckpointManager, CheckpointWriteError, NotWritableError, check_writable
from parl.models import MLPActorCritic
from parl.serving import checkpoint_format
from parl.serving.checkpoint_format import CheckpointError


def settings(hidden: int = 8) -> parl.TaskSettings:
    return parl.TaskSettings(
        parl.create_algorithm_func(
            MLPActorCritic, dict(obs_dim=4, num_actions=2, hidden_sizes=(hidden,)), A2C, dict(learning_rate=1e-3)
        ),
        normalize_inputs=True,
    )


def make_task(seed: int = 0, hidden: int = 8) -> parl.ComputationTask:
    parl.seed_everything(seed)
    return settings(hidden).make_task("RL")


def trained_task(seed: int = 0, hidden: int = 8, updates: int = 2) -> parl.ComputationTask:
    task = make_task(seed, hidden)
    for i in range(updates):
        task.predict({"obs": np.random.default_rng(i).standard_normal((6, 4)).astype(np.float32)}, {})
        task.learn(batch(task, seed=i))
    return task


class Payload:
    """Unpickling this creates the marker file: the proof that a load ran code."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def pickle_payload(marker: Path) -> bytes:
    return pickle.dumps({"version": 1, "weights": Payload(str(marker))}, protocol=pickle.HIGHEST_PROTOCOL)


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    return text


def arrays_of(path: Path) -> Dict[str, np.ndarray]:
    return safetensors.numpy.load_file(str(path))


# -- code never runs ------------------------------------------------------------------------------


def test_a_pickle_where_the_old_format_kept_a_task_file_runs_nothing_and_is_refused(tmp_path) -> None:
    marker = tmp_path / "pwned"
    directory = tmp_path / "checkpoints"
    checkpoint = directory / "ckpt-0000000100"
    checkpoint.mkdir(parents=True)
    (checkpoint / "RL.ckpt").write_bytes(pickle_payload(marker))
    (checkpoint / "robot.json").write_text(json.dumps({"step": 100, "tasks": ["RL"], "counters": {}}))
    (directory / "latest").write_text("ckpt-0000000100\n")
    manager = CheckpointManager(str(directory))
    with pytest.raises(CheckpointError) as info:
        manager.load_latest({"RL": make_task()}, report=lambda line: None)
    assert "old pickle format" in one_line(info.value) and str(checkpoint) in str(info.value)
    with pytest.raises(CheckpointError, match="old pickle format"):
        manager.load(str(checkpoint), {"RL": make_task()})
    task = make_task()
    with pytest.raises(CheckpointError) as info:
        task.load(str(checkpoint / "RL.ckpt"))  # the old file given to the task itself
    assert "pickle" in one_line(info.value) and "RL.ckpt" in str(info.value)
    assert not marker.exists()


CONFIG = Path(__file__).resolve().parent.parent / "examples" / "configs" / "a2c_cartpole.yaml"


def old_run(run: Path, checkpoint_name: str, marker: Path) -> None:
    """A log dir as an earlier parl left it: pickle task files whose loading would create ``marker``."""
    checkpoint = run / "checkpoints" / checkpoint_name
    checkpoint.mkdir(parents=True)
    (checkpoint / "RL.ckpt").write_bytes(pickle_payload(marker))
    (checkpoint / "robot.json").write_text(json.dumps({"step": 100, "tasks": ["RL"], "counters": {}}))
    (run / "checkpoints" / "latest").write_text(f"{checkpoint_name}\n")


@pytest.mark.parametrize("checkpoint_name", ["ckpt-0000000100", "100"])
@pytest.mark.parametrize("command", ["train", "eval", "eval-one"])
def test_parl_train_resume_and_eval_refuse_an_old_pickle_run_in_one_line(
    tmp_path, capsys, command, checkpoint_name
) -> None:
    from parl.experiment.cli.commands import main

    marker, run = tmp_path / "pwned", tmp_path / "run"
    old_run(run, checkpoint_name, marker)
    if command == "train":
        args = ["train", str(CONFIG), "-o", f"log_dir={run}", "-o", "train.max_env_steps=100", "--quiet", "--resume"]
    else:
        where = run / "checkpoints" / checkpoint_name if command == "eval-one" else run
        args = ["eval", str(CONFIG), "--checkpoint", str(where), "--episodes", "1"]
    status = main(args)
    out, err = capsys.readouterr()
    assert status == 1
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.startswith("parl")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"parl {args[0]}: ") and "old pickle format" in lines[0]
    assert "never unpickled" in lines[0] and "can run any code" in lines[0] and "retrain" in lines[0]
    assert str(run / "checkpoints" / checkpoint_name) in lines[0]
    assert not marker.exists()


def test_a_pickle_inside_the_new_format_runs_nothing_and_is_refused(tmp_path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "RL.json"
    trained_task().save(str(path))
    # The arrays file replaced by a pickle, and the metadata's checksums made to match it.
    data = pickle_payload(marker)
    (tmp_path / "RL.safetensors").write_bytes(data)
    meta = json.loads(path.read_text())
    meta["arrays_sha256"] = checkpoint_format._sha256(data)
    meta["checksum"] = checkpoint_format._metadata_checksum(meta)
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError) as info:
        make_task().load(str(path))
    assert "not a safetensors file" in one_line(info.value)
    # And a pickle as the metadata file.
    path.write_bytes(data)
    with pytest.raises(CheckpointError, match="pickle file"):
        make_task().load(str(path))
    assert not marker.exists()


# -- complete round trip --------------------------------------------------------------------------


def test_load_then_save_keeps_every_array_bit_for_bit_including_a_pending_optimizer_state(tmp_path) -> None:
    source = trained_task(updates=3)
    source.save(str(tmp_path / "a" / "RL.json"))
    fresh = make_task(seed=9)
    fresh.load(str(tmp_path / "a" / "RL.json"))
    assert fresh._optimizer is None and fresh._pending_optimizer_state  # restored, waiting for the first update
    fresh.save(str(tmp_path / "b" / "RL.json"))
    first, second = arrays_of(tmp_path / "a" / "RL.safetensors"), arrays_of(tmp_path / "b" / "RL.safetensors")
    assert sorted(first) == sorted(second)
    assert any(key.startswith("optimizer/") for key in first)
    assert any(key.startswith("normalizer/") for key in first)
    for key in first:
        assert first[key].dtype == second[key].dtype and first[key].shape == second[key].shape, key
        assert first[key].tobytes() == second[key].tobytes(), key
    meta_a = json.loads((tmp_path / "a" / "RL.json").read_text())
    meta_b = json.loads((tmp_path / "b" / "RL.json").read_text())
    assert meta_a == meta_b  # counters, algorithm state, manifest, checksums


def test_resume_save_resume_keeps_the_optimizer_state(tmp_path) -> None:
    source = trained_task(updates=3)
    source.save(str(tmp_path / "a.json"))
    middle = make_task(seed=5)
    middle.load(str(tmp_path / "a.json"))
    middle.save(str(tmp_path / "b.json"))  # before its first update
    last = make_task(seed=6)
    last.load(str(tmp_path / "b.json"))
    for task in (source, last):
        task.learn(batch(task, seed=42))
    expected = checkpoint_format.flatten_arrays("all", source.algorithm_weights())
    got = checkpoint_format.flatten_arrays("all", last.algorithm_weights())
    assert sorted(got) == sorted(expected)
    for key, (_, value) in expected.items():
        np.testing.assert_array_equal(got[key][1], value, err_msg=key)
    assert last.update_steps == source.update_steps == 4


# -- verification and fall-back -------------------------------------------------------------------


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) - 7] ^= 0x01
    path.write_bytes(bytes(data))


def random_bytes(path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


DAMAGE = {
    "truncated-arrays": ("RL.safetensors", truncate, "SHA-256"),
    "zeroed-arrays": ("RL.safetensors", zero, "SHA-256"),
    "flipped-byte-arrays": ("RL.safetensors", flip, "SHA-256"),
    "random-arrays": ("RL.safetensors", random_bytes, "SHA-256"),
    "truncated-metadata": ("RL.json", truncate, "SHA-256"),
    "zeroed-metadata": ("RL.json", zero, "SHA-256"),
    "random-robot": ("robot.json", random_bytes, "not a complete checkpoint"),
}


def two_checkpoints(directory: Path) -> CheckpointManager:
    manager = CheckpointManager(str(directory), keep=3)
    manager.save({"RL": trained_task(updates=1)}, {"step": 100}, step=100)
    manager.save({"RL": trained_task(updates=2)}, {"step": 200}, step=200)
    return manager


def load_with_report(manager: CheckpointManager) -> tuple:
    lines: List[str] = []
    found = manager.load_latest({"RL": make_task(seed=3)}, report=lines.append)
    return found, lines


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_a_damaged_newest_checkpoint_is_reported_in_one_line_and_the_older_one_loads(tmp_path, case) -> None:
    name, damage, reason = DAMAGE[case]
    manager = two_checkpoints(tmp_path)
    damage(tmp_path / "ckpt-0000000200" / name)
    found, lines = load_with_report(manager)
    assert found == (str(tmp_path / "ckpt-0000000100"), {"step": 100})
    if name != "robot.json":  # a torn robot file makes the checkpoint incomplete: not a candidate at all
        assert len(lines) == 1 and "\n" not in lines[0], lines
        assert "ckpt-0000000200" in lines[0] and reason in lines[0], lines[0]


#: Metadata keys that write_task_checkpoint adds itself.
_WRITTEN_BY_THE_FORMAT = ("format", "version", "arrays_file", "arrays_sha256", "arrays", "checksum")


def rewrite_weights(task_json: Path, change) -> None:
    """Change the arrays of a task file and rewrite it with valid checksums (robot.json's too):
    damage that no checksum catches."""
    meta, sections = checkpoint_format.read_task_checkpoint(str(task_json))
    change(sections["weights"]["model"])
    keep = {
        k: meta[k]
        for k in (
            "task",
            "algorithm",
            "models",
            "specs",
            "update_steps",
            "has_optimizer",
            "has_normalizer",
            "algorithm_state",
        )
    }
    checkpoint_format.write_task_checkpoint(str(task_json), keep, sections)
    robot_path = task_json.parent / "robot.json"
    robot = json.loads(robot_path.read_text())
    for file_name in robot["files"]:
        robot["files"][file_name] = checkpoints_module._file_sha256(str(task_json.parent / file_name))
    robot_path.write_text(json.dumps(robot))


def first_weight(weights: Dict[str, np.ndarray]) -> str:
    return sorted(k for k in weights if weights[k].dtype.kind == "f")[0]


@pytest.mark.parametrize(
    "value, words", [(np.nan, "NaN or infinite"), (np.inf, "NaN or infinite"), (1e30, "beyond the plausible")]
)
def test_a_nan_inf_or_absurd_weight_is_refused_naming_the_array(tmp_path, value, words) -> None:
    manager = two_checkpoints(tmp_path)
    task_json = tmp_path / "ckpt-0000000200" / "RL.json"
    names = []

    def poison(weights: Dict[str, np.ndarray]) -> None:
        key = first_weight(weights)
        names.append(key)
        weights[key] = weights[key].copy()
        weights[key].flat[0] = value

    rewrite_weights(task_json, poison)
    with pytest.raises(CheckpointError) as info:
        make_task().load(str(task_json))
    assert words in one_line(info.value) and names[0] in str(info.value)
    found, lines = load_with_report(manager)
    assert found[0] == str(tmp_path / "ckpt-0000000100") and len(lines) == 1 and words in lines[0]


def test_weights_of_another_shape_are_refused_before_anything_changes(tmp_path) -> None:
    manager = CheckpointManager(str(tmp_path), keep=3)
    manager.save({"RL": trained_task(updates=1)}, {"step": 100}, step=100)
    manager.save({"RL": trained_task(hidden=16, updates=1)}, {"step": 200}, step=200)  # valid, wider model
    task = trained_task(seed=4, updates=1)
    before = task.algorithm_weights()
    with pytest.raises(CheckpointError) as info:
        task.load(str(tmp_path / "ckpt-0000000200" / "RL.json"))
    assert "the model has float32" in one_line(info.value)
    after = task.algorithm_weights()
    assert all(np.array_equal(before["model"][k], after["model"][k]) for k in before["model"])
    lines: List[str] = []
    found = manager.load_latest({"RL": task}, report=lines.append)  # layers built: their shapes are known
    assert found[0] == str(tmp_path / "ckpt-0000000100") and len(lines) == 1 and "ckpt-0000000200" in lines[0]


def test_a_task_whose_layers_are_not_built_refuses_weights_of_another_shape_at_load(tmp_path) -> None:
    path = tmp_path / "RL.json"
    trained_task(hidden=16, updates=1).save(str(path))  # a valid checkpoint of a wider model
    task = make_task(hidden=8)  # fresh, as parl train --resume makes it: no layer built yet
    with pytest.raises(CheckpointError) as info:
        task.load(str(path))
    message = one_line(info.value)
    # The parameter, the file's shape and the shape the model builds from its specs.
    assert re.search(r"weight model/\S+ is float32\[(\d+, )?16\], the model has float32\[(\d+, )?8\]", message)
    assert str(path) in message, message
    # Nothing was restored: the task predicts with its own (just built) weights of its own shapes.
    assert task.update_steps == 0 and task._pending_optimizer_state is None
    assert all(16 not in value.shape for value in task.algorithm_weights()["model"].values())


def test_a_layer_with_part_of_its_weights_is_refused_before_anything_changes(tmp_path) -> None:
    path = tmp_path / "RL.json"
    trained_task(updates=2).save(str(path))
    meta, sections = checkpoint_format.read_task_checkpoint(str(path))
    key = first_weight(sections["weights"]["model"])
    del sections["weights"]["model"][key]
    checkpoint_format.write_task_checkpoint(
        str(path), {k: v for k, v in meta.items() if k not in _WRITTEN_BY_THE_FORMAT}, sections
    )
    task = make_task(seed=3)
    with pytest.raises(CheckpointError) as info:
        task.load(str(path))
    assert f"weights of layer model/{key.rpartition('.')[0]} are" in one_line(info.value), str(info.value)
    assert task.update_steps == 0 and task._pending_optimizer_state is None


def test_loading_builds_the_layers_without_drawing_random_numbers(tmp_path) -> None:
    path = tmp_path / "RL.json"
    source = trained_task(updates=2)
    source.save(str(path))
    task = make_task(seed=3)
    paddle.seed(11)
    task.load(str(path))
    after_load = paddle.rand([3]).numpy()
    paddle.seed(11)
    assert np.array_equal(after_load, paddle.rand([3]).numpy())
    expected = source.algorithm_weights()["model"]
    assert {k: v.tobytes() for k, v in task.algorithm_weights()["model"].items()} == {
        k: v.tobytes() for k, v in expected.items()
    }


def test_a_target_network_not_built_yet_is_checked_against_its_online_model(tmp_path) -> None:
    from parl.algorithms import DQN
    from parl.models import MLPQModel

    def dqn_task(seed: int) -> parl.ComputationTask:
        parl.seed_everything(seed)
        return parl.ComputationTask(
            "RL",
            parl.create_algorithm_func(MLPQModel, dict(obs_dim=4, num_actions=2, hidden_sizes=(8,)), DQN, {})(),
        )

    source = dqn_task(0)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((12, 4)).astype(np.float32)
    source.learn(
        parl.Transition(
            inputs={"obs": obs},
            next_inputs={"obs": obs[::-1].copy()},
            states={},
            next_states={},
            actions={"action": rng.integers(0, 2, (12, 1)).astype(np.int64)},
            rewards={"reward": rng.standard_normal((12, 1)).astype(np.float32)},
            next_episode_end=np.zeros((12, 1), np.float32),
        )
    )
    path = tmp_path / "RL.json"
    source.save(str(path))
    meta, sections = checkpoint_format.read_task_checkpoint(str(path))
    key = sorted(k for k in sections["weights"]["target_model"] if k.endswith(".w"))[0]
    wrong = sections["weights"]["target_model"][key]
    sections["weights"]["target_model"][key] = np.zeros((wrong.shape[0] + 1, wrong.shape[1]), wrong.dtype)
    checkpoint_format.write_task_checkpoint(
        str(path), {k: v for k, v in meta.items() if k not in _WRITTEN_BY_THE_FORMAT}, sections
    )
    fresh = dqn_task(1)
    with pytest.raises(CheckpointError) as info:
        fresh.load(str(path))
    message = one_line(info.value)
    assert f"target_model/{key}" in message and str(list(wrong.shape)) in message, message
    assert not any(layer.built for _, layer in fresh.algorithm.target_model.named_layers())


@pytest.mark.parametrize("content", [b"\x00\xff\xfe garbage", b"ckpt-0000000999\n", b"../etc\n", b""])
def test_a_garbage_latest_file_is_reported_and_the_newest_checkpoint_loads(tmp_path, content) -> None:
    manager = two_checkpoints(tmp_path)
    (tmp_path / "latest").write_bytes(content)
    assert manager.latest() == str(tmp_path / "ckpt-0000000200")
    found, lines = load_with_report(manager)
    assert found == (str(tmp_path / "ckpt-0000000200"), {"step": 200})
    assert len(lines) == 1 and "latest ignored" in lines[0] and "\n" not in lines[0]


def test_when_no_checkpoint_is_intact_the_error_is_one_line(tmp_path) -> None:
    manager = two_checkpoints(tmp_path)
    for step in (100, 200):
        zero(tmp_path / f"ckpt-0000000{step}" / "RL.safetensors")
    lines: List[str] = []
    with pytest.raises(CheckpointError) as info:
        manager.load_latest({"RL": make_task()}, report=lines.append)
    assert "no intact checkpoint" in one_line(info.value) and len(lines) == 2


# -- unwritable -----------------------------------------------------------------------------------


def test_a_full_disk_is_one_line_and_the_older_checkpoints_stay_intact(tmp_path, monkeypatch) -> None:
    manager = two_checkpoints(tmp_path)
    before = sorted(os.listdir(tmp_path))

    def full(path: str, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(checkpoint_format, "replace_file", full)
    with pytest.raises(CheckpointWriteError) as info:
        manager.save({"RL": trained_task(updates=3)}, {"step": 300}, step=300)
    assert "No space left on device" in one_line(info.value) and "ckpt-0000000300" in str(info.value)
    assert sorted(os.listdir(tmp_path)) == before  # no staging directory left behind
    monkeypatch.undo()
    found, lines = load_with_report(manager)
    assert found == (str(tmp_path / "ckpt-0000000200"), {"step": 200}) and lines == []


def test_a_read_only_directory_is_one_line(tmp_path, monkeypatch) -> None:
    manager = two_checkpoints(tmp_path)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path))

    monkeypatch.setattr(checkpoints_module.tempfile, "mkdtemp", read_only)
    with pytest.raises(CheckpointWriteError) as info:
        manager.save({"RL": trained_task()}, {"step": 300}, step=300)
    assert "Read-only file system" in one_line(info.value)
    monkeypatch.undo()
    assert manager.load_latest({"RL": make_task()}, report=lambda line: None)[0] == str(tmp_path / "ckpt-0000000200")


def test_check_writable_names_the_directory(tmp_path) -> None:
    (tmp_path / "a_file").write_text("")
    check_writable(str(tmp_path / "new" / "dir"))
    assert (tmp_path / "new" / "dir").is_dir() and os.listdir(tmp_path / "new" / "dir") == []
    with pytest.raises(NotWritableError) as info:
        check_writable(str(tmp_path / "a_file" / "logs"))
    assert "a_file" in one_line(info.value) and "not writable" in str(info.value)
