"""CheckpointManager: round trips, latest, keep K, leftovers, refusals, and saves killed at random moments."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Dict, List

import numpy as np
import paddle
import pytest

import parl
from parl.algorithms import A2C
from parl.experiment.train import checkpoints as checkpoints_module
from parl.experiment.train.checkpoints import CheckpointManager
from parl.models import MLPActorCritic

SETTINGS = parl.TaskSettings(
    parl.create_algorithm_func(
        MLPActorCritic,
        dict(obs_dim=4, num_actions=2, hidden_sizes=(8,)),
        A2C,
        dict(gamma=0.99, learning_rate=1e-3),
    ),
    normalize_inputs=True,
)

COUNTERS = {
    "env_steps": 1234,
    "episodes": 17,
    "elapsed_seconds": 12.5,
    "agents": [{"episode": 9, "total_steps": 600}, {"episode": 8, "total_steps": 634}],
    "helpers": [{"RL": {}, "aux": {"replay_added": 600}}, {"RL": {}, "aux": {"replay_added": 634}}],
}


def make_tasks(names=("RL", "aux"), seed: int = 0) -> Dict[str, parl.ComputationTask]:
    parl.seed_everything(seed)
    return {name: SETTINGS.make_task(name) for name in names}


def observations(rows: int, seed: int) -> Dict[str, np.ndarray]:
    return {"obs": np.random.default_rng(seed).standard_normal((rows, 4)).astype(np.float32)}


def batch(task: parl.ComputationTask, seed: int) -> parl.Transition:
    """A training batch of two time-ordered segments, acted by the task itself (greedily, so
    making it leaves the input statistics as they are)."""
    lengths = [5, 3]
    rows = sum(lengths)
    inputs = observations(rows, seed)
    actions, _ = task.predict(inputs, {}, deterministic=True)
    ends = np.zeros((rows, 1), np.float32)
    ends[lengths[0] - 1] = 1.0
    return parl.Transition(
        inputs=inputs,
        next_inputs=observations(rows, seed + 1),
        states={},
        next_states={},
        actions=actions,
        rewards={"reward": np.random.default_rng(seed).standard_normal((rows, 1)).astype(np.float32)},
        next_episode_end=ends,
        sequence_lengths=tuple(lengths),
    )


def trained_tasks(names=("RL", "aux")) -> Dict[str, parl.ComputationTask]:
    tasks = make_tasks(names)
    for offset, task in enumerate(tasks.values()):
        task.predict(observations(32, seed=100 + offset), {})  # input statistics to save
        for update in range(2):
            task.learn(batch(task, seed=10 * offset + update))
    return tasks


def weights(task: parl.ComputationTask) -> Dict[str, np.ndarray]:
    """Every array of the task's models and input statistics, by a flat path."""
    flat: Dict[str, np.ndarray] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}/{key}", inner)
        else:
            flat[prefix] = np.array(value, copy=True)

    walk("", task.algorithm_weights())
    return flat


def assert_same_weights(a: parl.ComputationTask, b: parl.ComputationTask) -> None:
    wa, wb = weights(a), weights(b)
    assert sorted(wa) == sorted(wb)
    for key in wa:
        np.testing.assert_array_equal(wa[key], wb[key], err_msg=key)


def entries(directory) -> List[str]:
    return sorted(os.listdir(directory))


def save_steps(manager: CheckpointManager, tasks, steps) -> None:
    for step in steps:
        manager.save(tasks, {"step": step}, step)


# -- round trip -------------------------------------------------------------------------------


def test_two_tasks_and_the_counters_come_back_exactly(tmp_path) -> None:
    tasks = trained_tasks()
    manager = CheckpointManager(str(tmp_path / "ckpts"))
    path = manager.save(tasks, COUNTERS, step=1234)
    assert path == str(tmp_path / "ckpts" / "ckpt-0000001234")
    assert entries(path) == ["RL.json", "RL.safetensors", "aux.json", "aux.safetensors", "robot.json"]
    assert (tmp_path / "ckpts" / "latest").read_text().strip() == "ckpt-0000001234"
    assert manager.latest() == path

    restored = make_tasks(seed=99)  # other initial weights
    assert manager.load(path, restored) == COUNTERS
    probe = observations(6, seed=5)
    for name, task in tasks.items():
        again = restored[name]
        assert again.update_steps == task.update_steps == 2
        assert_same_weights(task, again)  # the normalizer's statistics are among them
        for deterministic in (True, False):
            paddle.seed(3)
            expected, _ = task.predict(probe, {}, deterministic=deterministic)
            paddle.seed(3)
            got, _ = again.predict(probe, {}, deterministic=deterministic)
            np.testing.assert_array_equal(got["action"], expected["action"])
        # The optimizer state came back too: one more identical update gives identical weights.
        update = batch(task, seed=77)
        task.learn(update)
        again.learn(update)
        assert_same_weights(task, again)


def test_a_loaded_checkpoint_is_still_readable_by_hand(tmp_path) -> None:
    manager = CheckpointManager(str(tmp_path))
    path = manager.save(trained_tasks(("RL",)), {"env_steps": 5}, step=5)
    robot = json.loads((tmp_path / "ckpt-0000000005" / "robot.json").read_text())
    files = robot.pop("files")
    assert robot == {"step": 5, "tasks": ["RL"], "counters": {"env_steps": 5}}
    for name in ("RL.json", "RL.safetensors"):
        digest = hashlib.sha256((tmp_path / "ckpt-0000000005" / name).read_bytes()).hexdigest()
        assert files[name] == digest
    task_meta = json.loads((tmp_path / "ckpt-0000000005" / "RL.json").read_text())
    assert task_meta["format"] == "parl-task-checkpoint" and task_meta["algorithm"] == "A2C"
    assert manager.load(path, make_tasks(("RL",))) == {"env_steps": 5}


# -- latest and keep K ------------------------------------------------------------------------


def test_no_checkpoint_yet_means_none_and_nothing_is_created(tmp_path) -> None:
    assert CheckpointManager(str(tmp_path / "absent")).latest() is None
    assert not (tmp_path / "absent").exists()
    assert CheckpointManager(str(tmp_path)).latest() is None


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_the_newest_keep_checkpoints_stay_and_latest_follows_the_saves(tmp_path, keep: int) -> None:
    tasks = make_tasks(("RL",))
    manager = CheckpointManager(str(tmp_path), keep=keep)
    for step in range(0, 80, 10):
        manager.save(tasks, {"step": step}, step)
        assert manager.latest() == str(tmp_path / f"ckpt-{step:010d}")
    expected = [f"ckpt-{step:010d}" for step in range(80 - 10 * keep, 80, 10)]
    assert entries(tmp_path) == expected + ["latest"]  # and no leftover of any save
    assert manager.load(manager.latest(), make_tasks(("RL",))) == {"step": 70}


@pytest.mark.parametrize("keep", [0, -1, 1.5, True, "3"])
def test_keep_must_be_a_positive_integer(tmp_path, keep) -> None:
    with pytest.raises(ValueError, match=f"keep must be an integer.*{keep!r}"):
        CheckpointManager(str(tmp_path), keep=keep)


@pytest.mark.parametrize("exchange", [True, False], ids=["atomic-exchange", "two-renames"])
def test_saving_a_step_again_replaces_its_checkpoint(tmp_path, monkeypatch, exchange: bool) -> None:
    if not exchange:  # a system without renameat2
        monkeypatch.setattr(checkpoints_module, "_exchange", lambda a, b: False)
    tasks = make_tasks(("RL",))
    manager = CheckpointManager(str(tmp_path), keep=2)
    save_steps(manager, tasks, [10, 20])
    manager.save(tasks, {"step": 20, "again": True}, 20)
    assert entries(tmp_path) == ["ckpt-0000000010", "ckpt-0000000020", "latest"]
    assert manager.load(manager.latest(), make_tasks(("RL",))) == {"step": 20, "again": True}


def test_checkpoints_after_the_step_saved_are_removed_as_another_timeline(tmp_path) -> None:
    tasks = make_tasks(("RL",))
    manager = CheckpointManager(str(tmp_path), keep=3)
    save_steps(manager, tasks, [10, 20, 30, 40])  # keeps 20, 30, 40
    manager.save(tasks, {"step": 25}, 25)  # a run resumed from step 20
    assert entries(tmp_path) == ["ckpt-0000000020", "ckpt-0000000025", "latest"]
    assert manager.latest() == str(tmp_path / "ckpt-0000000025")


# -- leftovers and broken pointers ------------------------------------------------------------


def make_garbage(directory) -> None:
    """What killed saves leave behind: a staging directory (even one that looks complete), a
    directory being deleted, a temporary pointer file, and a checkpoint without its robot file."""
    staging = directory / ".tmp-ckpt-0000000900-abc"
    staging.mkdir()
    (staging / "robot.json").write_text(json.dumps({"step": 900, "tasks": [], "counters": {}}))
    (directory / ".del-ckpt-0000000001-xyz" / "ckpt-0000000001").mkdir(parents=True)
    (directory / ".tmp-latest-q1w2").write_text("ckpt-0000000900\n")
    (directory / "ckpt-0000000800").mkdir()
    (directory / "ckpt-0000000800" / "RL.json").write_bytes(b"half")


def test_leftovers_are_ignored_and_the_next_save_clears_them(tmp_path) -> None:
    tasks = make_tasks(("RL",))
    manager = CheckpointManager(str(tmp_path), keep=2)
    save_steps(manager, tasks, [100, 200])
    make_garbage(tmp_path)
    assert manager.latest() == str(tmp_path / "ckpt-0000000200")
    (tmp_path / "latest").unlink()  # with no pointer: the complete checkpoint of the highest step
    assert manager.latest() == str(tmp_path / "ckpt-0000000200")
    manager.save(tasks, {"step": 300}, 300)
    assert entries(tmp_path) == ["ckpt-0000000200", "ckpt-0000000300", "latest"]


@pytest.mark.parametrize(
    "pointer",
    ["ckpt-0000000300", "ckpt-0000000250", "ckpt-0000000100", "../ckpt-0000000200", "garbage", ""],
    ids=["missing", "incomplete", "unreadable-robot", "outside", "not-a-name", "empty"],
)
def test_a_broken_latest_falls_back_to_the_newest_complete_checkpoint(tmp_path, pointer: str) -> None:
    tasks = make_tasks(("RL",))
    manager = CheckpointManager(str(tmp_path), keep=3)
    save_steps(manager, tasks, [100, 200])
    (tmp_path / "ckpt-0000000250").mkdir()  # incomplete: no robot file
    (tmp_path / "ckpt-0000000250" / "RL.json").write_bytes(b"")
    (tmp_path / "latest").write_text(pointer + "\n")
    if pointer == "ckpt-0000000100":
        (tmp_path / "ckpt-0000000100" / "robot.json").write_text('{"step": 1')  # torn
    assert manager.latest() == str(tmp_path / "ckpt-0000000200")


def test_a_robot_file_whose_task_file_is_missing_is_incomplete(tmp_path) -> None:
    tasks = make_tasks(("RL", "aux"))
    manager = CheckpointManager(str(tmp_path), keep=3)
    save_steps(manager, tasks, [1, 2])
    (tmp_path / "ckpt-0000000002" / "aux.safetensors").unlink()
    assert manager.latest() == str(tmp_path / "ckpt-0000000001")


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "names, words",
    [
        (("RL",), ["has task 'aux', which the robot lacks"]),
        (("RL", "aux", "extra"), ["has no task 'extra'"]),
        (("RL", "other"), ["has no task 'other'", "has task 'aux'"]),
    ],
)
def test_a_checkpoint_of_other_tasks_is_refused_before_any_task_changes(tmp_path, names, words) -> None:
    manager = CheckpointManager(str(tmp_path))
    path = manager.save(trained_tasks(), COUNTERS, step=3)
    fresh = make_tasks(names, seed=5)
    before = weights(fresh["RL"])
    with pytest.raises(ValueError) as info:
        manager.load(path, fresh)
    for word in words + [path]:
        assert word in str(info.value), str(info.value)
    after = weights(fresh["RL"])
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_loading_a_directory_that_is_no_checkpoint_raises(tmp_path) -> None:
    with pytest.raises(ValueError, match="is not a complete checkpoint"):
        CheckpointManager(str(tmp_path)).load(str(tmp_path), make_tasks(("RL",)))


def test_counters_that_are_not_json_are_refused_before_anything_is_written(tmp_path) -> None:
    manager = CheckpointManager(str(tmp_path / "ckpts"))
    with pytest.raises(ValueError, match="counters must be JSON"):
        manager.save(make_tasks(("RL",)), {"when": object()}, step=1)
    assert not (tmp_path / "ckpts").exists()


@pytest.mark.parametrize("name", ["a/b", "", ".hidden", "../up", 3])
def test_a_task_name_that_cannot_be_a_file_name_is_refused(tmp_path, name) -> None:
    task = make_tasks(("RL",))["RL"]
    with pytest.raises(ValueError, match="cannot name a checkpoint file"):
        CheckpointManager(str(tmp_path)).save({name: task}, {}, step=1)
    assert entries(tmp_path) == []


@pytest.mark.parametrize("step", [-1, 2.0, None])
def test_the_step_must_be_a_non_negative_integer(tmp_path, step) -> None:
    with pytest.raises(ValueError, match="step must be an integer"):
        CheckpointManager(str(tmp_path)).save(make_tasks(("RL",)), {}, step=step)


# -- killed at random moments -----------------------------------------------------------------

KEEP = 2

# Imports parl once, then for each "fork" line forks a writer that resumes from the latest
# checkpoint and saves in a tight loop (one update, one save, and every third step the same step
# again) until it is killed; each writer prints "saving <pid>" once its first save is done.
WRITER = textwrap.dedent(
    """
    import os, sys, traceback
    import numpy as np
    import parl
    from parl.algorithms import A2C
    from parl.experiment.train.checkpoints import CheckpointManager
    from parl.models import MLPActorCritic

    directory, keep = sys.argv[1], int(sys.argv[2])
    settings = parl.TaskSettings(
        parl.create_algorithm_func(
            MLPActorCritic, dict(obs_dim=4, num_actions=2, hidden_sizes=(8,)),
            A2C, dict(gamma=0.99, learning_rate=1e-3),
        ),
        normalize_inputs=True,
    )

    def batch(task, rng):
        inputs = {"obs": rng.standard_normal((4, 4)).astype(np.float32)}
        actions, _ = task.predict(inputs, {})
        return parl.Transition(
            inputs=inputs, next_inputs=inputs, states={}, next_states={}, actions=actions,
            rewards={"reward": rng.standard_normal((4, 1)).astype(np.float32)},
            next_episode_end=np.zeros((4, 1), np.float32), sequence_lengths=(4,),
        )

    def write_until_killed():
        tasks = {"RL": settings.make_task("RL")}
        checkpoints = CheckpointManager(directory, keep=keep)
        step = 0
        latest = checkpoints.latest()
        if latest is not None:
            step = checkpoints.load(latest, tasks)["step"] + 1
        rng = np.random.default_rng(step)
        announced = False
        while True:
            tasks["RL"].learn(batch(tasks["RL"], rng))
            counters = {"step": step, "update_steps": tasks["RL"].update_steps, "pair": [step, 2 * step]}
            checkpoints.save(tasks, counters, step)
            if step % 3 == 0:
                checkpoints.save(tasks, counters, step)
            if not announced:
                print("saving", os.getpid(), flush=True)
                announced = True
            step += 1

    for line in sys.stdin:
        if line.strip() != "fork":
            break
        pid = os.fork()
        if pid == 0:
            try:
                write_until_killed()
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
            os._exit(1)
        os.waitpid(pid, 0)
        print("reaped", pid, flush=True)
    """
)


def _lines(stream, into: "queue.Queue[str]") -> None:
    for line in stream:
        into.put(line.strip())
    into.put("closed")


def _next_line(lines: "queue.Queue[str]", stderr_path) -> str:
    try:
        line = lines.get(timeout=60.0)
    except queue.Empty:
        line = "nothing in 60 s"
    if line == "closed" or line.startswith("reaped") or line.startswith("nothing"):
        raise AssertionError(f"the writer stopped by itself ({line}):\n{stderr_path.read_text()[-3000:]}")
    return line


def test_a_save_killed_at_any_moment_leaves_a_loadable_latest_checkpoint(tmp_path) -> None:
    """Writers are killed with SIGKILL at random moments of their save loop; after every kill the
    latest checkpoint loads, its counters are those of its own step, and the next writer resumes
    from it amid what the killed one left behind."""
    directory = tmp_path / "ckpts"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    stderr_path = tmp_path / "writer.err"
    rng = random.Random(0)
    kills, last_step, leftovers_seen = 20, -1, 0
    with open(stderr_path, "w") as stderr:
        zygote = subprocess.Popen(
            [sys.executable, str(script), str(directory), str(KEEP)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=_lines, args=(zygote.stdout, lines), daemon=True).start()
    manager = CheckpointManager(str(directory), keep=KEEP)
    try:
        for _ in range(kills):
            zygote.stdin.write("fork\n")
            zygote.stdin.flush()
            started = _next_line(lines, stderr_path)
            assert started.startswith("saving"), started
            pid = int(started.split()[1])
            time.sleep(rng.uniform(0.03, 0.3))
            os.kill(pid, signal.SIGKILL)
            assert lines.get(timeout=30.0) == f"reaped {pid}"

            latest = manager.latest()
            assert latest is not None
            step = int(os.path.basename(latest)[len("ckpt-") :])
            fresh = {"RL": SETTINGS.make_task("RL")}
            counters = manager.load(latest, fresh)
            assert counters["step"] == step
            assert counters["pair"] == [step, 2 * step]
            assert fresh["RL"].update_steps == counters["update_steps"]
            assert step > last_step  # the writer resumed from the previous latest and got further
            last_step = step
            names = os.listdir(directory)
            assert len([n for n in names if n.startswith("ckpt-")]) <= KEEP + 1
            leftovers_seen += any(n.startswith((".tmp-", ".del-")) for n in names)
    finally:
        zygote.stdin.close()
        zygote.wait(timeout=30.0)
    # A last, uninterrupted save clears whatever the kills left.
    manager.save(fresh, {"step": last_step + 1}, last_step + 1)
    assert len([n for n in os.listdir(directory) if n.startswith("ckpt-")]) == KEEP
    assert not [n for n in os.listdir(directory) if n.startswith((".tmp-", ".del-"))]
    print(f"{kills} kills, last step {last_step}, leftovers after {leftovers_seen} of them")
