"""Checkpoints damaged or forged past their checksums (each file rewritten with matching hashes), and
files that are not files: each is refused in one line, and loading falls back to the older intact
checkpoint. (tests/test_checkpoint_safety.py covers the damage checksums catch.)"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np
import pytest
import safetensors.numpy
from test_checkpoint_safety import load_with_report, make_task, one_line, trained_task, two_checkpoints
from test_checkpoints import batch

from parl.experiment.train import checkpoints as checkpoints_module
from parl.serving import checkpoint_format
from parl.serving.checkpoint_format import CheckpointError

NEWEST, OLDER = "ckpt-0000000200", "ckpt-0000000100"


def forge(
    checkpoint: Path,
    change_meta: Optional[Callable[[dict], None]] = None,
    change_arrays: Optional[Callable[[Dict[str, np.ndarray], dict], None]] = None,
) -> None:
    """Rewrite the RL task files of ``checkpoint`` with ``change_arrays(arrays, manifest)`` and
    ``change_meta(metadata)`` applied, every checksum made to match (robot.json's too)."""
    meta_path, arrays_path = checkpoint / "RL.json", checkpoint / "RL.safetensors"
    meta = json.loads(meta_path.read_text())
    if change_arrays is not None:
        arrays = safetensors.numpy.load_file(str(arrays_path))
        change_arrays(arrays, meta["arrays"])
        data = safetensors.numpy.save(arrays)
        arrays_path.write_bytes(data)
        meta["arrays_sha256"] = checkpoint_format._sha256(data)
    if change_meta is not None:
        change_meta(meta)
    meta["checksum"] = checkpoint_format._metadata_checksum(meta)
    meta_path.write_text(json.dumps(meta))
    rehash(checkpoint)


def rehash(checkpoint: Path) -> None:
    """robot.json's SHA-256 of each task file made to match the files as they are."""
    robot_path = checkpoint / "robot.json"
    if not robot_path.exists():  # a task checkpoint alone
        return
    robot = json.loads(robot_path.read_text())
    for name in robot["files"]:
        robot["files"][name] = checkpoints_module._file_sha256(str(checkpoint / name))
    robot_path.write_text(json.dumps(robot))


def assert_falls_back(manager, words: str) -> str:
    """The newest checkpoint is skipped in one line holding ``words``, and the older one loads."""
    found, lines = load_with_report(manager)
    assert found is not None and found[0] == str(Path(manager.directory) / OLDER), (found, lines)
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert NEWEST in lines[0] and words in lines[0], lines[0]
    return lines[0]


def weight_key(manifest: dict) -> str:
    return sorted(k for k in manifest if k.startswith("weights/"))[0]


# -- 1. forged manifest entries -------------------------------------------------------------------


def _set(field: str, value: object) -> Callable[[dict], None]:
    def change(meta: dict) -> None:
        meta["arrays"][weight_key(meta["arrays"])][field] = value

    return change


def _replace_entry(value: object) -> Callable[[dict], None]:
    def change(meta: dict) -> None:
        meta["arrays"][weight_key(meta["arrays"])] = value

    return change


MANIFEST_FORGERIES = {
    "path-a-string": (_set("path", "model/logits.w"), "is not a list of one or more names"),
    "path-empty": (_set("path", []), "is not a list of one or more names"),
    "path-a-number": (_set("path", 7), "is not a list of one or more names"),
    "path-holding-a-number": (_set("path", ["model", 3]), "is not a list of one or more names"),
    "path-nested-nonsense": (_set("path", [["model"], {"a": [1, None]}]), "is not a list of one or more names"),
    "path-too-deep": (_set("path", ["model", "actor_hidden.0", "b"]), "has 3 names, a weights array has 2"),
    "path-of-another-array": (_set("path", ["model", "nothing.w"]), "name another array"),
    "section-a-number": (_set("section", 5), "section 5 is not one of"),
    "section-a-list": (_set("section", ["weights"]), "section ['weights'] is not one of"),
    "section-unknown": (_set("section", "secrets"), "section 'secrets' is not one of"),
    "section-of-another-array": (_set("section", "optimizer"), "name another array"),
    "shape-a-string": (_set("shape", "big"), "is not a list of sizes"),
    "shape-negative": (_set("shape", [-1]), "is not a list of sizes"),
    "shape-a-float": (_set("shape", [2.5]), "is not a list of sizes"),
    "dtype-object": (_set("dtype", "object"), "dtype 'object' is not one of"),
    "dtype-a-number": (_set("dtype", 4), "dtype 4 is not one of"),
    "entry-a-string": (_replace_entry("garbage"), "is str, not a mapping"),
    "entry-a-list": (_replace_entry([1, 2]), "is list, not a mapping"),
    "entry-null": (_replace_entry(None), "is NoneType, not a mapping"),
}


@pytest.mark.parametrize("case", sorted(MANIFEST_FORGERIES))
def test_a_forged_manifest_entry_is_one_line_and_the_older_checkpoint_loads(tmp_path, case) -> None:
    change, words = MANIFEST_FORGERIES[case]
    manager = two_checkpoints(tmp_path)
    forge(tmp_path / NEWEST, change_meta=change)
    with pytest.raises(CheckpointError) as info:
        make_task().load(str(tmp_path / NEWEST / "RL.json"))
    assert words in one_line(info.value) and "manifest entry 'weights/" in str(info.value), str(info.value)
    assert_falls_back(manager, words)


def test_array_paths_that_run_through_an_array_are_refused(tmp_path) -> None:
    manager = two_checkpoints(tmp_path)

    def collide(arrays: Dict[str, np.ndarray], manifest: dict) -> None:
        for path in (["extra"], ["extra", "inner"]):  # the second runs through the first
            key = "/".join(["optimizer", *path])
            arrays[key] = np.zeros(1, np.float32)
            manifest[key] = {"section": "optimizer", "path": path, "shape": [1], "dtype": "float32"}

    forge(tmp_path / NEWEST, change_arrays=collide)
    assert_falls_back(manager, "array path ['extra', 'inner'] runs through another array")


def test_a_manifest_that_is_not_a_mapping_is_refused(tmp_path) -> None:
    manager = two_checkpoints(tmp_path)
    forge(tmp_path / NEWEST, change_meta=lambda meta: meta.update(arrays=[["weights", "model"]]))
    assert_falls_back(manager, "metadata has no array manifest")


# -- 6. files that are not what they seem ---------------------------------------------------------


def replace_with_sparse(path: Path, size: int) -> None:
    path.unlink()
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: takes no disk


def replace_with_link(path: Path, target: str) -> None:
    path.unlink()
    path.symlink_to(target)


def replace_with_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


FILE_DAMAGE = {
    "arrays-4-GiB": ("RL.safetensors", lambda p: replace_with_sparse(p, 4 << 30), "a checkpoint arrays file may hold"),
    "metadata-4-GiB": ("RL.json", lambda p: replace_with_sparse(p, 4 << 30), "a checkpoint metadata may hold"),
    "arrays-link-to-dev-zero": ("RL.safetensors", lambda p: replace_with_link(p, "/dev/zero"), "a symbolic link"),
    "metadata-link-to-dev-zero": ("RL.json", lambda p: replace_with_link(p, "/dev/zero"), "a symbolic link"),
    "arrays-fifo": ("RL.safetensors", replace_with_fifo, "not a regular file (a FIFO)"),
    "metadata-fifo": ("RL.json", replace_with_fifo, "not a regular file (a FIFO)"),
    "robot-link-to-dev-zero": ("robot.json", lambda p: replace_with_link(p, "/dev/zero"), "a symbolic link"),
    "robot-fifo": ("robot.json", replace_with_fifo, "not a regular file (a FIFO)"),
    "robot-4-GiB": ("robot.json", lambda p: replace_with_sparse(p, 4 << 30), "a robot file may hold"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(FILE_DAMAGE))
def test_a_huge_file_a_device_link_or_a_fifo_is_refused_before_it_is_read(tmp_path, case) -> None:
    name, damage, words = FILE_DAMAGE[case]
    manager = two_checkpoints(tmp_path)
    damage(tmp_path / NEWEST / name)
    start = time.monotonic()
    line = assert_falls_back(manager, words)
    assert time.monotonic() - start < 20.0, "the file was read"
    assert str(tmp_path / NEWEST / name) in line


def test_an_arrays_file_larger_than_its_manifest_declares_is_not_read(tmp_path) -> None:
    manager = two_checkpoints(tmp_path)
    arrays = tmp_path / NEWEST / "RL.safetensors"
    bound = checkpoint_format.arrays_bytes_bound(json.loads((tmp_path / NEWEST / "RL.json").read_text())["arrays"])
    assert arrays.stat().st_size < bound < 1 << 20  # a few KiB of arrays, a 64 KiB allowance for the header
    with open(arrays, "ab") as f:
        f.truncate(bound + 1)
    rehash(tmp_path / NEWEST)  # robot.json vouches for it: the size alone refuses it
    line = assert_falls_back(manager, f"{bound + 1} bytes, more than the {bound} a checkpoint arrays file may hold")
    assert str(arrays) in line


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", ["fifo", "link", "large"])
def test_a_latest_file_that_is_no_regular_file_is_reported_and_the_newest_checkpoint_loads(tmp_path, damage) -> None:
    manager = two_checkpoints(tmp_path)
    latest = tmp_path / "latest"
    if damage == "fifo":
        replace_with_fifo(latest)
    elif damage == "link":
        replace_with_link(latest, "/dev/zero")
    else:
        replace_with_sparse(latest, 1 << 30)
    assert manager.latest() == str(tmp_path / NEWEST)
    found, lines = load_with_report(manager)
    assert found == (str(tmp_path / NEWEST), {"step": 200})
    assert len(lines) == 1 and "latest ignored" in lines[0], lines


def test_when_every_checkpoint_is_a_link_the_error_is_one_line(tmp_path) -> None:
    manager = two_checkpoints(tmp_path)
    for name in (NEWEST, OLDER):
        replace_with_link(tmp_path / name / "RL.safetensors", "/dev/zero")
    lines: List[str] = []
    with pytest.raises(CheckpointError) as info:
        manager.load_latest({"RL": make_task()}, report=lines.append)
    assert "no intact checkpoint" in one_line(info.value) and "a symbolic link" in str(info.value)
    assert len(lines) == 2


# -- 3. normalizer statistics that would make every action NaN ------------------------------------


@pytest.mark.parametrize(
    "statistic, value, words",
    [
        ("var", -1.0, "input 'obs': normalizer variance holds -1; a variance is never negative"),
        ("count", -5.0, "input 'obs': normalizer count is [-5.0]; expected one finite number >= 0"),
    ],
)
def test_negative_normalizer_statistics_are_damage_and_the_older_checkpoint_loads(
    tmp_path, statistic, value, words
) -> None:
    manager = two_checkpoints(tmp_path)

    def negate(arrays: Dict[str, np.ndarray], manifest: dict) -> None:
        key = f"normalizer/obs/{statistic}"
        arrays[key] = np.full(arrays[key].shape, value, arrays[key].dtype)

    forge(tmp_path / NEWEST, change_arrays=negate)
    task = make_task(seed=3)
    before = task.algorithm_weights()
    with pytest.raises(CheckpointError) as info:
        task.load(str(tmp_path / NEWEST / "RL.json"))
    assert words in one_line(info.value)
    after = task.algorithm_weights()  # refused before anything changed
    assert task.update_steps == 0 and float(after["_input_normalizer"]["obs"]["count"]) == 0.0
    assert all(np.array_equal(before["model"][k], after["model"][k]) for k in before["model"])
    assert_falls_back(manager, words)
    task = make_task(seed=3)
    manager.load_latest({"RL": task}, report=lambda line: None)  # the older checkpoint's statistics
    actions, _ = task.predict({"obs": np.ones((2, 4), np.float32)}, {}, deterministic=True)
    assert all(np.all(np.isfinite(a)) for a in actions.values())


# -- 2. optimizer state the optimizer cannot step from --------------------------------------------


def _optimizer_key(manifest: dict, slot: str) -> str:
    return sorted(k for k in manifest if k.startswith("optimizer/model/") and k.endswith(f".w_{slot}"))[0]


def _reshape(slot: str) -> Callable[[Dict[str, np.ndarray], dict], None]:
    def change(arrays: Dict[str, np.ndarray], manifest: dict) -> None:
        key = _optimizer_key(manifest, slot)
        arrays[key] = np.zeros((arrays[key].shape[0] + 1, *arrays[key].shape[1:]), arrays[key].dtype)
        manifest[key]["shape"] = list(arrays[key].shape)

    return change


def _fill(key_of: Callable[[dict], str], value: float) -> Callable[[Dict[str, np.ndarray], dict], None]:
    def change(arrays: Dict[str, np.ndarray], manifest: dict) -> None:
        key = key_of(manifest)
        arrays[key] = np.full(arrays[key].shape, value, arrays[key].dtype)

    return change


def _drop(slot: str) -> Callable[[Dict[str, np.ndarray], dict], None]:
    def change(arrays: Dict[str, np.ndarray], manifest: dict) -> None:
        key = _optimizer_key(manifest, slot)
        del arrays[key], manifest[key]

    return change


def _retype(slot: str) -> Callable[[Dict[str, np.ndarray], dict], None]:
    def change(arrays: Dict[str, np.ndarray], manifest: dict) -> None:
        key = _optimizer_key(manifest, slot)
        arrays[key] = arrays[key].astype(np.float64)
        manifest[key]["dtype"] = "float64"

    return change


OPTIMIZER_FORGERIES = {  # A2C's RMSProp: mean_square, moment, mean_grad per parameter, and learning_rate
    "wrong-shape": (
        _reshape("moment"),
        r"optimizer state entry 'model/\S+\.w_moment' is float32\[\d+, \d+\], expected",
    ),
    "missing-entry": (_drop("mean_grad"), r"optimizer state lacks \['model/\S+\.w_mean_grad'\]"),
    "wrong-dtype": (
        _retype("mean_square"),
        r"entry 'model/\S+\.w_mean_square' is float64\[\d+, \d+\], expected float32",
    ),
    "negative-mean-square": (
        _fill(lambda m: _optimizer_key(m, "mean_square"), -1.0),
        r"optimizer state entry 'model/\S+\.w_mean_square' holds values in \[-1, -1\], beyond the possible \[0, inf\]",
    ),
    "negative-learning-rate": (
        _fill(lambda m: "optimizer/learning_rate", -0.5),
        r"optimizer state entry 'learning_rate' holds values in \[-0.5, -0.5\]",
    ),
}


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-task", "trained-task"])
@pytest.mark.parametrize("case", sorted(OPTIMIZER_FORGERIES))
def test_an_optimizer_state_that_does_not_fit_is_damage_and_the_older_checkpoint_loads(tmp_path, case, fresh) -> None:
    change, pattern = OPTIMIZER_FORGERIES[case]
    manager = two_checkpoints(tmp_path)
    forge(tmp_path / NEWEST, change_arrays=change)
    # A fresh task (parl train --resume) makes its optimizer at its first update: the state is
    # checked against the optimizer it will make, before it is accepted, not at that update.
    task = make_task(seed=3) if fresh else trained_task(seed=3)
    with pytest.raises(CheckpointError) as info:
        task.load(str(tmp_path / NEWEST / "RL.json"))
    assert re.search(pattern, one_line(info.value)), str(info.value)
    assert (task._optimizer is None) == fresh and task._pending_optimizer_state is None
    lines: List[str] = []
    task = make_task(seed=3) if fresh else trained_task(seed=3)
    found = manager.load_latest({"RL": task}, report=lines.append)
    assert found[0] == str(tmp_path / OLDER) and len(lines) == 1 and re.search(pattern, lines[0]), lines
    costs = task.learn(batch(task, seed=7))  # the older checkpoint's optimizer state steps
    assert np.isfinite(costs["loss"]) and task.update_steps == 2


def test_optimizer_state_without_has_optimizer_is_refused(tmp_path) -> None:
    manager = two_checkpoints(tmp_path)
    forge(tmp_path / NEWEST, change_meta=lambda meta: meta.update(has_optimizer=False))
    assert_falls_back(manager, "holds optimizer state, but its metadata says has_optimizer is false")


def test_the_optimizer_state_of_a_layer_only_learning_builds_is_checked_against_its_saved_weights(tmp_path) -> None:
    from test_task_learn_steps import learn_batch, normalizing_task, obs_batch, trained_normalizing_task

    rng = np.random.default_rng(0)
    trained_normalizing_task(rng).save(str(tmp_path / "RL.json"))  # its model.fc is built by learn only
    fresh = normalizing_task()
    fresh.build_layers()
    assert not fresh.algorithm.parameters()  # so no optimizer made here could tell fc's state
    forge(tmp_path, change_arrays=_reshape("moment1"))  # Adam: moment1, moment2, beta1_pow, beta2_pow
    with pytest.raises(CheckpointError, match=r"entry 'model/fc\.w_moment1' is float32\[\d+, \d+\], expected"):
        normalizing_task().load(str(tmp_path / "RL.json"))
    trained_normalizing_task(np.random.default_rng(0)).save(str(tmp_path / "RL.json"))
    forge(tmp_path, change_arrays=_fill(lambda m: _optimizer_key(m, "beta1_pow"), 1.5))
    with pytest.raises(CheckpointError, match=r"entry 'model/fc\.w_beta1_pow' holds values in \[1.5, 1.5\]"):
        normalizing_task().load(str(tmp_path / "RL.json"))
    trained_normalizing_task(np.random.default_rng(0)).save(str(tmp_path / "RL.json"))
    task = normalizing_task()
    task.load(str(tmp_path / "RL.json"))  # intact: accepted, and its first update steps from it
    costs = task.learn(learn_batch(obs_batch(rng, 4), obs_batch(rng, 4)))
    assert np.isfinite(costs["loss"]) and task.update_steps == 2


# -- 4. weights dropped: the task would go on from fresh ones -------------------------------------


def _drop_weights(prefix: str) -> Callable[[Dict[str, np.ndarray], dict], None]:
    def change(arrays: Dict[str, np.ndarray], manifest: dict) -> None:
        for key in [k for k in manifest if k.startswith(prefix)]:
            del arrays[key], manifest[key]

    return change


def _no_models(meta: dict) -> None:
    meta["models"] = []


WEIGHT_DROPS = {
    "every-weight": (
        dict(change_arrays=_drop_weights("weights/")),
        "holds no weights of model 'model', which the task trains (update_steps 2); it would go on from fresh ones",
    ),
    "one-layer": (
        dict(change_arrays=_drop_weights("weights/model/logits.")),
        "holds no weights ['logits.b', 'logits.w'] of model 'model', which the task trains",
    ),
    "every-weight-and-the-model": (
        dict(change_arrays=_drop_weights("weights/"), change_meta=_no_models),
        "holds models [], the algorithm of task 'RL' has ['model']",
    ),
}


@pytest.mark.parametrize("fresh", [True, False], ids=["fresh-task", "trained-task"])
@pytest.mark.parametrize("case", sorted(WEIGHT_DROPS))
def test_a_trained_checkpoint_without_the_weights_it_trained_is_damage(tmp_path, case, fresh) -> None:
    changes, words = WEIGHT_DROPS[case]
    manager = two_checkpoints(tmp_path)
    forge(tmp_path / NEWEST, **changes)
    task = make_task(seed=3) if fresh else trained_task(seed=3)
    before, steps = task.algorithm_weights()["model"], task.update_steps
    with pytest.raises(CheckpointError) as info:
        task.load(str(tmp_path / NEWEST / "RL.json"))
    assert words in one_line(info.value)
    assert task.update_steps == steps and task._pending_optimizer_state is None  # nothing restored
    after = task.algorithm_weights()["model"]
    assert all(np.array_equal(before[k], after[k]) for k in before)  # (a fresh task had none to keep)
    lines: List[str] = []
    task = make_task(seed=3) if fresh else trained_task(seed=3)
    found = manager.load_latest({"RL": task}, report=lines.append)
    assert found[0] == str(tmp_path / OLDER) and len(lines) == 1 and words in lines[0], lines
    saved = checkpoint_format.read_task_checkpoint(str(tmp_path / OLDER / "RL.json"))[1]["weights"]["model"]
    loaded = task.algorithm_weights()["model"]
    assert sorted(saved) == sorted(loaded) and all(np.array_equal(saved[k], loaded[k]) for k in saved)


def test_a_checkpoint_saved_before_any_prediction_or_update_loads_without_weights(tmp_path) -> None:
    make_task(seed=1).save(str(tmp_path / "RL.json"))  # nothing built: no weights to save
    assert not checkpoint_format.read_task_checkpoint(str(tmp_path / "RL.json"))[1]["weights"]
    task = make_task(seed=3)
    task.load(str(tmp_path / "RL.json"))  # nothing learned is lost: the task keeps its fresh weights
    assert task.update_steps == 0 and task.algorithm_weights()["model"]


def test_a_paddle_optimizer_state_loads_into_a_fresh_task(tmp_path) -> None:
    """paddle's optimizers make their state at their first step: a fresh one has none to compare with,
    so the state is compared only once the task has made its optimizer."""
    import paddle

    import parl
    from parl.algorithms import A2C
    from parl.models import MLPActorCritic

    class PaddleAdamA2C(A2C):
        def make_optimizer(self, parameters):
            return paddle.optimizer.Adam(learning_rate=1e-3, parameters=parameters)

    def paddle_task() -> parl.ComputationTask:
        parl.seed_everything(0)
        model = dict(obs_dim=4, num_actions=2, hidden_sizes=(8,))
        return parl.ComputationTask("RL", parl.create_algorithm_func(MLPActorCritic, model, PaddleAdamA2C, {})())

    source = paddle_task()
    source.learn(batch(source, seed=0))
    source.save(str(tmp_path / "RL.json"))
    fresh = paddle_task()
    fresh.load(str(tmp_path / "RL.json"))
    fresh.learn(batch(fresh, seed=1))
    source.load(str(tmp_path / "RL.json"))  # and into the task that made it
    assert fresh.update_steps == 2 and source.update_steps == 1


@pytest.mark.parametrize("name", ["RL.json", "robot.json"])
def test_json_nested_beyond_the_parser_is_one_line(tmp_path, name) -> None:
    manager = two_checkpoints(tmp_path)
    (tmp_path / NEWEST / name).write_text("[" * 200_000 + "]" * 200_000)  # RecursionError in json.loads
    if name != "robot.json":
        rehash(tmp_path / NEWEST)
    assert_falls_back(manager, "not JSON")
