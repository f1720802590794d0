"""Exported policies from someone else: every damaged, forged or planted file is one PolicyError line,
nothing outside the policy directory is read or written, and no code from the policy or working
directory runs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import parl
from parl.experiment.cli.commands import main
from parl.experiment.policy.export import POLICY_FILE, PolicyError, load_policy

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"
OBS = {"obs": np.zeros((2, 4), np.float32)}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A2C on CartPole (inputs normalized) trained for 1,000 env steps and exported once."""
    base = tmp_path_factory.mktemp("exported")
    run = str(base / "run")
    overrides = ["-o", f"log_dir={run}", "-o", "train.max_env_steps=1000"]
    assert main(["train", str(CONFIGS / "a2c_cartpole.yaml"), *overrides, "--quiet"]) == 0
    assert main(["export", run, "-o", str(base / "policy")]) == 0
    return base / "policy"


@pytest.fixture
def policy_dir(exported: Path, tmp_path: Path) -> Path:
    """A fresh copy of the exported policy, for a test to damage."""
    return Path(shutil.copytree(exported, tmp_path / "policy"))


def read_meta(directory: Path) -> Dict[str, object]:
    return json.loads((directory / POLICY_FILE).read_text(encoding="utf-8"))


def write_meta(directory: Path, meta: Dict[str, object]) -> None:
    (directory / POLICY_FILE).write_text(json.dumps(meta), encoding="utf-8")


def forge(directory: Path, change: Callable[[Dict[str, np.ndarray]], None]) -> None:
    """Change the weights file's arrays and record the new file's size and hash, as a forger would."""
    path = directory / "RL.safetensors"
    arrays = load_file(str(path))
    change(arrays)
    save_file(arrays, str(path))
    meta = read_meta(directory)
    data = path.read_bytes()
    meta["tasks"]["RL"].update(weights_bytes=len(data), weights_sha256=hashlib.sha256(data).hexdigest())
    meta["tasks"]["RL"]["weights"] = {k: v for k, v in meta["tasks"]["RL"]["weights"].items() if k in arrays}
    write_meta(directory, meta)


def key_of(directory: Path, first: str) -> str:
    """The array key of the first weight whose path starts with ``first``."""
    weights = read_meta(directory)["tasks"]["RL"]["weights"]
    return next(key for key, path in weights.items() if path[0] == first)


def test_the_exported_policy_loads_and_acts(policy_dir: Path) -> None:
    meta = read_meta(policy_dir)
    assert meta["format"] == 2 and len(meta["tasks"]["RL"]["weights_sha256"]) == 64
    actions, _ = parl.load_policy(str(policy_dir)).predict(OBS)
    assert actions["action"].shape[0] == 2


@pytest.mark.parametrize(
    "value, message",
    [(np.nan, "NaN or infinite"), (np.inf, "NaN or infinite"), (1e30, "beyond the plausible")],
)
def test_implausible_weights_are_refused(policy_dir: Path, value: float, message: str) -> None:
    key = key_of(policy_dir, "model")

    def poison(arrays: Dict[str, np.ndarray]) -> None:
        arrays[key] = arrays[key].copy()
        arrays[key].flat[0] = value

    forge(policy_dir, poison)
    with pytest.raises(PolicyError, match=message):
        parl.load_policy(str(policy_dir))


@pytest.mark.parametrize("name, message", [("var", "variance holds -1"), ("count", "count is")])
def test_negative_normalizer_statistics_are_refused(policy_dir: Path, name: str, message: str) -> None:
    weights = read_meta(policy_dir)["tasks"]["RL"]["weights"]
    key = next(k for k, path in weights.items() if path[0] == "_input_normalizer" and path[-1] == name)

    def negate(arrays: Dict[str, np.ndarray]) -> None:
        arrays[key] = np.full(arrays[key].shape, -1, dtype=arrays[key].dtype)

    forge(policy_dir, negate)
    with pytest.raises(PolicyError, match=message):
        parl.load_policy(str(policy_dir))


def test_a_policy_with_every_weight_dropped_is_refused(policy_dir: Path) -> None:
    weights = read_meta(policy_dir)["tasks"]["RL"]["weights"]
    model_keys = [k for k, path in weights.items() if path[0] != "_input_normalizer"]

    def drop(arrays: Dict[str, np.ndarray]) -> None:
        for key in model_keys:
            del arrays[key]

    forge(policy_dir, drop)
    with pytest.raises(PolicyError, match=r"holds models \[\], the algorithm of task .RL. has \[.model.\]"):
        parl.load_policy(str(policy_dir))


def test_a_flipped_byte_is_found_by_its_hash(policy_dir: Path) -> None:
    path = policy_dir / "RL.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(PolicyError, match="SHA-256 differs"):
        parl.load_policy(str(policy_dir))


def test_a_task_name_with_a_path_is_refused_and_nothing_outside_is_read(policy_dir: Path, tmp_path: Path) -> None:
    meta = read_meta(policy_dir)
    meta["tasks"] = {"../outside": meta["tasks"]["RL"]}
    write_meta(policy_dir, meta)
    shutil.copy(policy_dir / "RL.safetensors", tmp_path / "outside.safetensors")
    with pytest.raises(PolicyError, match=r"task name '\.\./outside' is not a plain file name"):
        parl.load_policy(str(policy_dir))


def test_a_fifo_or_a_link_to_a_device_in_place_of_the_weights_is_refused_at_once(policy_dir: Path) -> None:
    weights = policy_dir / "RL.safetensors"
    weights.unlink()
    os.mkfifo(weights)
    start = time.monotonic()
    with pytest.raises(PolicyError, match="not a regular file \\(a FIFO\\)"):
        parl.load_policy(str(policy_dir))
    assert time.monotonic() - start < 5.0
    weights.unlink()
    weights.symlink_to("/dev/zero")
    with pytest.raises(PolicyError, match="a symbolic link"):
        parl.load_policy(str(policy_dir))


def test_policy_json_linked_to_a_device_or_too_large_is_refused(policy_dir: Path) -> None:
    meta = policy_dir / POLICY_FILE
    meta.unlink()
    meta.symlink_to("/dev/zero")
    with pytest.raises(PolicyError, match="a symbolic link"):
        parl.load_policy(str(policy_dir))
    meta.unlink()
    with open(meta, "wb") as f:
        f.truncate(17 << 20)  # sparse: takes no disk
    with pytest.raises(PolicyError, match="more than the"):
        parl.load_policy(str(policy_dir))


def test_a_weights_file_beyond_the_limit_is_not_read(policy_dir: Path) -> None:
    with pytest.raises(PolicyError, match=r"\d+ bytes, more than the 100 a policy weights file may hold"):
        load_policy(str(policy_dir), max_weights_bytes=100)


PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\nclass Net: pass\n"


@pytest.mark.parametrize("where", ["policy directory", "working directory"])
def test_a_module_planted_beside_the_policy_is_never_imported(
    policy_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    marker = tmp_path / "ran"
    folder = policy_dir if where == "policy directory" else tmp_path / "cwd"
    folder.mkdir(exist_ok=True)
    (folder / "parl_planted_model.py").write_text(PLANTED.format(marker=str(marker)), encoding="utf-8")
    meta = read_meta(policy_dir)
    meta["tasks"]["RL"]["model"]["class"] = "parl_planted_model.Net"
    write_meta(policy_dir, meta)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend("")  # as in an interactive session: '' is the working directory
    with pytest.raises(PolicyError, match="no module named 'parl_planted_model'.*python_path"):
        parl.load_policy(str(policy_dir))
    assert not marker.exists() and "parl_planted_model" not in sys.modules


def test_python_path_is_where_the_policy_s_own_classes_come_from(policy_dir: Path, tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "parl_own_model.py").write_text(
        "from parl.models import MLPActorCritic\nclass Net(MLPActorCritic):\n    pass\n", encoding="utf-8"
    )
    meta = read_meta(policy_dir)
    meta["tasks"]["RL"]["model"]["class"] = "parl_own_model.Net"
    write_meta(policy_dir, meta)
    with pytest.raises(PolicyError, match="no module named 'parl_own_model'"):
        parl.load_policy(str(policy_dir))
    try:
        actions, _ = parl.load_policy(str(policy_dir), python_path=[str(code)]).predict(OBS)
    finally:
        sys.modules.pop("parl_own_model", None)
    assert actions["action"].shape[0] == 2
    assert str(code) not in sys.path  # the path was for the load only


def test_a_standard_library_module_is_refused_before_it_is_imported(policy_dir: Path) -> None:
    assert "this" not in sys.modules  # importing it prints the Zen of Python
    meta = read_meta(policy_dir)
    meta["tasks"]["RL"]["algorithm"]["class"] = "this.Algorithm"
    write_meta(policy_dir, meta)
    with pytest.raises(PolicyError, match="standard library's 'this'.*refused before importing"):
        parl.load_policy(str(policy_dir))
    assert "this" not in sys.modules


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda meta: meta.update(tasks=[1, 2]), "'tasks' must map"),
        (lambda meta: meta.update(tasks={}), "'tasks' must map"),
        (lambda meta: meta["tasks"].update(RL=7), "expected a mapping with 'model'"),
        (lambda meta: meta["tasks"]["RL"].pop("model"), "tasks.RL.model"),
        (lambda meta: meta["tasks"]["RL"].update(transforms=None), "transforms: expected a mapping"),
        (lambda meta: meta["tasks"]["RL"]["weights"].update(extra=["model", "x"]), "entries \\['extra'\\] absent"),
        (lambda meta: meta["tasks"]["RL"]["model"].update(hidden_sizes="wide"), "tasks.RL"),
    ],
)
def test_a_malformed_policy_json_is_one_line(
    policy_dir: Path, change: Callable[[Dict[str, object]], None], message: str
) -> None:
    meta = read_meta(policy_dir)
    change(meta)
    write_meta(policy_dir, meta)
    with pytest.raises(PolicyError, match=message) as caught:
        parl.load_policy(str(policy_dir))
    assert "\n" not in str(caught.value)


def test_export_replaces_a_planted_link_instead_of_writing_through_it(exported: Path, tmp_path: Path) -> None:
    run = exported.parent / "run"
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    (out / POLICY_FILE).symlink_to(victim)
    (out / "RL.safetensors").symlink_to(victim)
    assert main(["export", str(run), "-o", str(out)]) == 0
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert not (out / POLICY_FILE).is_symlink() and not (out / "RL.safetensors").is_symlink()
    parl.load_policy(str(out))


def test_a_format_1_policy_loads_with_a_warning_that_its_files_are_unchecked(policy_dir: Path) -> None:
    meta = read_meta(policy_dir)
    meta["format"] = 1
    for key in ("weights_bytes", "weights_sha256"):
        del meta["tasks"]["RL"][key]
    write_meta(policy_dir, meta)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        parl.load_policy(str(policy_dir))
    assert any("records no hashes" in str(w.message) for w in caught)


def test_a_policy_json_nested_beyond_the_parser_is_one_line(policy_dir: Path) -> None:
    (policy_dir / POLICY_FILE).write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(PolicyError, match="cannot read the policy"):
        parl.load_policy(str(policy_dir))
