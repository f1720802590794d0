"""Code written against parl 0.1.0's public names runs today with deprecation warnings only.

tests/legacy/ holds, verbatim, the docs and example code of 0.1.0 that used names since moved (each
file's header says where it comes from), Python as ``.py.txt``: test data, not code of the repository
(it repeats code that lives on, changed, in examples/). Each runs here with a small step budget,
given through its own arguments, under ``warnings.simplefilter("error")``: any warning but parl's
DeprecationWarnings fails the test, and those are counted (each file must emit the ones of the old
names it uses).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import math
import runpy
import sys
import types
import warnings
from pathlib import Path
from typing import Iterator, List

import gymnasium as gym
import pytest

import parl
from parl.algorithms import A2C
from parl.algorithms.td3 import TD3
from parl.experiment.config import load_config
from parl.experiment.train.trainer import Trainer
from parl.models import MLPActorCritic
from parl.models.continuous import DeterministicActorCritic
from parl.moved_names import PROXIED_MODULES

LEGACY = Path(__file__).resolve().parent / "legacy"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PARL_DEPRECATION = r".* is deprecated since parl "


@contextlib.contextmanager
def only_parl_deprecations() -> Iterator[List[warnings.WarningMessage]]:
    """Every warning is an error, but parl's DeprecationWarnings, which are collected."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        warnings.filterwarnings("always", message=PARL_DEPRECATION, category=DeprecationWarning)
        yield caught


def deprecated_names(caught: List[warnings.WarningMessage]) -> List[str]:
    """The old names the warnings were about; fails on a warning that is no parl deprecation."""
    assert all(
        issubclass(w.category, DeprecationWarning) and " is deprecated since parl " in str(w.message) for w in caught
    )
    return sorted({str(w.message).split(" is deprecated")[0] for w in caught})


def legacy(name: str) -> Path:
    """tests/legacy/<name>.py.txt: Python of 0.1.0."""
    return LEGACY / f"{name}.py.txt"


def load(name: str, module_name: str = "") -> types.ModuleType:
    """tests/legacy/<name>.py.txt imported as module ``module_name`` (default ``legacy_<name>``)."""
    module_name = module_name or f"legacy_{name}"
    loader = importlib.machinery.SourceFileLoader(module_name, str(legacy(name)))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(module_name, loader))
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def fresh_old_modules() -> Iterator[None]:
    """The deprecated module aliases and ``dqn_cartpole`` imported anew by each test (so each test
    sees the warnings of every old name it uses), and the legacy modules gone after it."""
    names = [*PROXIED_MODULES, "dqn_cartpole"]
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    yield
    for name in [*names, *(n for n in sys.modules if n.startswith("legacy_"))]:
        sys.modules.pop(name, None)
    sys.modules.update(saved)


def test_docs_replay_options_snippet_of_0_1_builds_the_helper_it_meant() -> None:
    with only_parl_deprecations() as caught:
        helper = runpy.run_path(str(legacy("replay_options")), init_globals={"parl": parl, "seed": 0})["helper"]
    assert deprecated_names(caught) == ["ExpReplayHelper(sample_interval=k)"]
    assert helper.updates_per_step == 0.25  # one batch every 4 stored steps
    assert (helper.prioritized, helper.n_step, helper.warmup_steps, helper.batch_size) == (True, 3, 250, 64)


def test_continuous_control_example_of_0_1_trains_with_sample_interval_and_train_agents() -> None:
    with only_parl_deprecations() as caught:
        example = load("continuous_control")
        settings = example.ReplaySettings(random_steps=100, warmup_steps=100, batch_size=32, sample_interval=2)
        algorithm_func = parl.create_algorithm_func(
            DeterministicActorCritic,
            dict(obs_dim=example.OBS_DIM, action_dim=example.ACTION_DIM, num_critics=2, hidden_sizes=(32, 32)),
            TD3,
            dict(gamma=settings.gamma, tau=settings.tau, learning_rate=settings.learning_rate),
        )

        def make_agent(seed: int) -> parl.Agent:
            return example.GaussianNoiseAgent(example.make_env(), noise_std=0.1, random_steps=100, seed=seed)

        result = example.train(
            settings, algorithm_func, make_agent, seed=0, max_steps=300, target=-200.0, eval_episodes=1, verbose=False
        )
    assert deprecated_names(caught) == [
        "ExpReplayHelper(sample_interval=k)",
        "TaskSettings(max_batchsize=...)",
        "parl.utils.cli",
        "parl.utils.train_agents",
    ]
    assert result["env_steps"] >= 300 and not result["reached"]
    # One batch every 2 stored steps from the warm buffer on (about 200 steps; the count is read live).
    assert abs(result["updates"] - math.ceil((result["env_steps"] - 100) / 2)) <= 10
    assert math.isfinite(result["greedy_mean_return"])


def test_dqn_cartpole_example_of_0_1_trains_with_train_agents() -> None:
    with only_parl_deprecations() as caught:
        example = load("dqn_cartpole")
        settings = example.Settings(agents=2, warmup_steps=50, batch_size=16, epsilon_steps=100)
        result = example.train(seed=0, max_steps=400, eval_episodes=2, settings=settings, verbose=False)
    assert deprecated_names(caught) == ["TaskSettings(max_batchsize=...)", "parl.utils.cli", "parl.utils.train_agents"]
    assert result["env_steps"] >= 400 and result["updates"] > 0 and result["episodes"] > 0
    assert set(result) == {
        "seed",
        "train_seconds",
        "env_steps",
        "updates",
        "episodes",
        "greedy_check",
        "best_greedy_check",
        "reached",
        "greedy_mean_return",
    }


def test_dqn_atari_example_of_0_1_trains_with_parl_framework_and_train_until() -> None:
    pytest.importorskip("ale_py")
    with only_parl_deprecations() as caught:
        load("dqn_cartpole", "dqn_cartpole")  # the dqn_cartpole of its version, which it imports by name
        example = load("dqn_atari")
        settings = example.Settings(
            agents=1, max_episode_steps=40, noop_max=0, warmup_steps=40, capacity=500, batch_size=8, epsilon_steps=100
        )
        result = example.train(
            seed=0, max_steps=120, target=18.0, eval_episodes=1, settings=settings, verbose=False, logdir=None
        )
    assert deprecated_names(caught) == [
        "TaskSettings(max_batchsize=...)",
        "parl.framework",
        "parl.framework.validation",
        "parl.utils.cli",
        "parl.utils.train_agents",
        "parl.utils.train_until",
    ]
    assert result["env_steps"] >= 120 and result["updates"] > 0


def test_dqn_cartpole_config_of_0_1_trains_with_sample_interval_and_the_example_s_agent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))  # where its agent class was: examples/dqn_cartpole.py
    overrides = [f"log_dir={tmp_path}", "agents=2", "train.max_env_steps=600", "checkpoint.every_minutes=null"]
    with only_parl_deprecations() as caught:
        config = load_config(str(LEGACY / "dqn_cartpole_config.yaml"), overrides)
        result = Trainer(config, progress=False).run()
    assert deprecated_names(caught) == ["ExpReplayHelper(sample_interval=k)", "dqn_cartpole.EpsilonGreedyAgent"]
    assert config.agent.cls is parl.utils.EpsilonGreedyAgent
    assert result["stop_reason"] == "step budget" and result["updates"]["RL"] > 0


def test_multitask_robot_of_0_1_shares_its_trunk_through_parl_framework_names() -> None:
    with only_parl_deprecations() as caught:
        pieces = load("multitask_robot")
        rl = parl.TaskSettings(
            parl.create_algorithm_func(MLPActorCritic, {"obs_dim": 4, "num_actions": 2}, A2C, {}),
            max_batchsize=2,
            normalize_inputs=True,
        )
        manager = parl.Manager({"RL": rl, "Aux": pieces.make_aux_settings()}, shared=pieces.shared_parts("actor"))
        for i in range(2):
            agent = pieces.MultitaskAgent(gym.make("CartPole-v1"), seed=i, num_games=3)
            manager.add_agent(agent, {"RL": parl.OnPolicyHelper(sample_interval=16), "Aux": pieces.make_aux_helper(16)})
        manager.start()
        episodes = manager.join()
    assert deprecated_names(caught) == [
        "TaskSettings(max_batchsize=...)",
        "parl.framework",
        "parl.framework.specs",
        "parl.framework.validation",
    ]
    assert len(episodes) == 6 and manager.errors == []
    assert manager.tasks["RL"].update_steps > 0 and manager.tasks["Aux"].update_steps > 0
    aux_trunk = manager.tasks["Aux"].algorithm.model.trunk
    assert all(a is b for a, b in zip(aux_trunk, manager.tasks["RL"].algorithm.model.actor_hidden))
