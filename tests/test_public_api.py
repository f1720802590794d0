"""docs/api.md is parl's public API, and it holds: every name listed imports, each package's ``__all__``
is exactly its list, the ``parl`` command has exactly the listed subcommands, and every deprecated name
still works and warns with its new name in the message, at the line that used it."""

from __future__ import annotations

import functools
import importlib
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np
import pytest

import parl
from parl.experiment.cli.commands import build_parser
from parl.moved_names import (
    DEPRECATED_IN,
    MOVED_IN_0_2,
    MOVED_NAMES,
    PROXIED_MODULES,
    REMOVED_NAMES,
    deprecation_message,
    removed_in,
    resolve,
)

REPO = Path(__file__).resolve().parents[1]
API = (REPO / "docs" / "api.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text of the ``## <title>`` section of docs/api.md."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", API, flags=re.M | re.S)
    assert match is not None, f"docs/api.md has no section {title!r}"
    return match.group(1)


def rows(text: str) -> List[List[str]]:
    """The body rows of the markdown tables in ``text``, each a list of cells without backticks."""
    out = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            out.append([cell.strip().strip("`") for cell in line.strip().strip("|").split("|")])
    return [row for row in out if row[0] not in ("name", "module", "command", "old name")]


def packages() -> Dict[str, List[str]]:
    """Package -> the names docs/api.md lists for it."""
    parts = re.split(r"^### `([\w.]+)`\n", section("Packages"), flags=re.M)
    return {parts[i]: [row[0] for row in rows(parts[i + 1])] for i in range(1, len(parts), 2)}


PACKAGES = packages()
LISTED_NAMES = [(package, name) for package, names in PACKAGES.items() for name in names]
MODULE_PATHS = [row[0] for row in rows(section("Module paths"))]
COMMANDS = [row[0] for row in rows(section("The `parl` command"))]
DEPRECATED = [tuple(row) for row in rows(section("Deprecated names"))]
#: Deprecated forms that are not a module path or a module attribute: how each is checked below.
CALL_FORMS = (
    "ExpReplayHelper(sample_interval=k)",
    "Algorithm.learn(",
    "ActorCriticQ(",
    "Manager(workers=",
    "TaskSettings(f, max_batchsize=",
    "registry.register(",
    "config keys",
)


# -- what is public -------------------------------------------------------------------------------


def test_every_package_with_an_all_is_listed() -> None:
    folders = [p.name for p in (REPO / "parl").iterdir() if (p / "__init__.py").exists()]
    with_all = {
        name for name in ("parl", *(f"parl.{f}" for f in folders)) if hasattr(importlib.import_module(name), "__all__")
    }
    assert set(PACKAGES) == with_all


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_packages_all_is_exactly_its_list(package: str) -> None:
    listed = PACKAGES[package]
    assert len(listed) == len(set(listed)), f"{package} lists a name twice"
    assert sorted(listed) == sorted(importlib.import_module(package).__all__)


@pytest.mark.parametrize("package,name", LISTED_NAMES)
def test_every_listed_name_imports(package: str, name: str) -> None:
    assert getattr(importlib.import_module(package), name) is not None


@pytest.mark.parametrize("module", MODULE_PATHS)
def test_every_documented_module_path_imports(module: str) -> None:
    assert importlib.import_module(module).__name__ == module


def test_the_parl_command_has_exactly_the_listed_subcommands() -> None:
    parser = build_parser()
    (subcommands,) = [action for action in parser._actions if action.dest == "command"]
    assert sorted(f"parl {name}" for name in subcommands.choices) == sorted(COMMANDS)


def test_import_parl_imports_nothing_of_the_deprecated_names() -> None:
    code = (
        "import sys, parl; "
        "print(sorted(m for m in sys.modules if m.startswith(('parl.compat', 'parl.core.legacy_learn', "
        "'parl.experience.sample_interval', 'parl.framework', 'parl.experiment'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip().splitlines()[-1] == "[]"


# -- deprecated names -----------------------------------------------------------------------------


def test_the_deprecated_table_matches_the_code() -> None:
    documented = {old: new for old, new, _, _ in DEPRECATED if not old.startswith(CALL_FORMS)}
    in_code = {**MOVED_IN_0_2, **{old: new for old, (new, _) in {**PROXIED_MODULES, **MOVED_NAMES}.items()}}
    assert documented == in_code
    assert {(since, removed) for _, _, since, removed in DEPRECATED} == {(DEPRECATED_IN, removed_in(DEPRECATED_IN))}
    assert len(DEPRECATED) == len(documented) + len(CALL_FORMS)


def deprecations(use: Callable[[], object]) -> Tuple[object, List[warnings.WarningMessage]]:
    """What ``use()`` returns, and the DeprecationWarnings it emitted (every other warning fails)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = use()
    others = [w for w in caught if not issubclass(w.category, DeprecationWarning)]
    assert others == []
    return value, caught


def assert_warned(caught: List[warnings.WarningMessage], old: str, new: str) -> None:
    messages = [str(w.message) for w in caught]
    expected = deprecation_message(old, new, DEPRECATED_IN)
    assert expected in messages
    (warning,) = [w for w in caught if str(w.message) == expected]
    assert warning.filename == __file__, "the warning points at the code that used the old name"


def import_fresh(module: str) -> object:
    """``module`` imported anew (an alias warns as it loads)."""
    sys.modules.pop(module, None)
    return importlib.import_module(module)


@pytest.mark.parametrize("old,new", [(old, new) for old, new, _, _ in DEPRECATED if old in MOVED_IN_0_2])
def test_a_moved_module_is_its_new_module_and_warns(old: str, new: str) -> None:
    module, caught = deprecations(lambda: import_fresh(old))
    assert_warned(caught, old, new)
    assert module is importlib.import_module(new)


@pytest.mark.parametrize("old,new", [(old, new) for old, new, _, _ in DEPRECATED if old in PROXIED_MODULES])
def test_a_stood_in_module_serves_its_new_module_s_names_and_warns(old: str, new: str) -> None:
    module, caught = deprecations(lambda: import_fresh(old))
    assert_warned(caught, old, new)
    target = resolve(PROXIED_MODULES[old], is_module=True)
    assert module.__all__, f"{old} serves no names"
    for name in module.__all__:
        value, _ = deprecations(functools.partial(getattr, module, name))
        if f"{old}.{name}" not in MOVED_NAMES:
            assert value is getattr(target, name), f"{old}.{name}"


@pytest.mark.parametrize("old,new", [(old, new) for old, new, _, _ in DEPRECATED if old in MOVED_NAMES])
def test_a_moved_name_is_served_and_warns(old: str, new: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(REPO / "examples"))  # dqn_cartpole, as its scripts and configs found it
    module_name, _, name = old.rpartition(".")
    module, _ = deprecations(lambda: importlib.import_module(module_name))
    value, caught = deprecations(lambda: getattr(module, name))
    assert_warned(caught, old, new)
    assert value is resolve(MOVED_NAMES[old], is_module=False)
    if not MOVED_NAMES[old][1]:  # a pure move (it serves its new name): the very object of its new home
        new_module, _, new_name = new.rpartition(".")
        assert value is getattr(importlib.import_module(new_module), new_name)


def test_from_import_of_a_moved_name_warns_once_at_the_import() -> None:
    def use() -> object:
        from parl.utils import train_agents

        return train_agents

    value, caught = deprecations(use)
    assert value is resolve(MOVED_NAMES["parl.utils.train_agents"], is_module=False)
    assert len(caught) == 1
    assert_warned(caught, "parl.utils.train_agents", "parl.experiment.train.trainer.Trainer")


@pytest.mark.parametrize("old,hint", sorted(REMOVED_NAMES.items()))
def test_a_removed_name_fails_naming_its_replacement(old: str, hint: str) -> None:
    module_name, _, name = old.rpartition(".")
    module, _ = deprecations(lambda: importlib.import_module(module_name))
    with pytest.raises(AttributeError, match=re.escape(f"has no attribute {name!r}; it was removed, use {hint}")):
        getattr(module, name)


def test_an_unknown_parl_module_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("parl.framework.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("parl.no_such_module")
    with pytest.raises(AttributeError, match="module 'parl' has no attribute 'no_such_name'"):
        parl.no_such_name  # noqa: B018


def test_sample_interval_is_updates_per_step_of_its_inverse() -> None:
    helper, caught = deprecations(lambda: parl.ExpReplayHelper(sample_interval=4, warmup_steps=0))
    assert_warned(caught, "ExpReplayHelper(sample_interval=k)", "ExpReplayHelper(updates_per_step=1/k)")
    assert helper.updates_per_step == 0.25
    with pytest.raises(ValueError, match="sample_interval must be left out when updates_per_step is given"):
        deprecations(lambda: parl.ExpReplayHelper(sample_interval=4, updates_per_step=0.5))
    with pytest.raises(ValueError, match="sample_interval must be an integer >= 1, got 0"):
        deprecations(lambda: parl.ExpReplayHelper(sample_interval=0))


OLD_LEARN = "Algorithm.learn(inputs, next_inputs, states, next_states, next_episode_end, actions, rewards, info)"
NEW_LEARN = "Algorithm.learn(batch: parl.Transition)"


def cartpole_batch(rows: int, *, weights: bool = False) -> parl.Transition:
    rng = np.random.default_rng(0)
    return parl.Transition(
        inputs={"obs": rng.normal(size=(rows, 4)).astype(np.float32)},
        actions={"action": rng.integers(0, 2, size=(rows, 1))},
        rewards={"reward": rng.normal(size=(rows, 1)).astype(np.float32)},
        next_inputs={"obs": rng.normal(size=(rows, 4)).astype(np.float32)},
        next_episode_end=(rng.random((rows, 1)) < 0.2).astype(np.float32),
        states={},
        next_states={},
        bootstrap_steps=rng.integers(1, 4, size=(rows, 1)).astype(np.float32),
        weights=rng.random((rows, 1)).astype(np.float32) if weights else None,
    )


def dqn() -> parl.Algorithm:
    from parl.algorithms import DQN
    from parl.models import MLPQModel

    parl.seed_everything(0)
    return parl.create_algorithm_func(MLPQModel, {"obs_dim": 4, "num_actions": 2}, DQN, {"gamma": 0.9})()


@pytest.mark.parametrize("weights", [False, True])
def test_learn_called_with_the_eight_old_arguments_is_learn_of_their_transition(weights: bool) -> None:
    batch_info, _ = deprecations(lambda: importlib.import_module("parl.framework.batch_info").batch_info)
    algorithm, numpy_batch = dqn(), cartpole_batch(6, weights=weights)
    batch = numpy_batch.to_tensors()
    info = batch_info(6, bootstrap_steps=numpy_batch.bootstrap_steps, weights=numpy_batch.weights)
    old_args = (batch.inputs, batch.next_inputs, batch.states, batch.next_states, batch.next_episode_end)
    costs, caught = deprecations(lambda: algorithm.learn(*old_args, batch.actions, batch.rewards, info))
    assert_warned(caught, OLD_LEARN, NEW_LEARN)
    expected = algorithm.learn(batch)
    assert set(costs) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(np.asarray(costs[name]), np.asarray(expected[name]))
    with pytest.raises(TypeError, match="learn takes one batch or the eight arguments"):
        algorithm.learn(batch.inputs, batch.next_inputs)


def test_an_algorithm_written_with_the_old_learn_learns_through_today_s_task() -> None:
    from parl.algorithms import DQN
    from parl.models import MLPQModel

    seen = []

    def define() -> type:
        class OldDQN(DQN):
            def learn(self, inputs, next_inputs, states, next_states, next_episode_end, actions, rewards, info):
                seen.append(info)
                return super().learn(inputs, next_inputs, states, next_states, next_episode_end, actions, rewards, info)

        return OldDQN

    old_class, caught = deprecations(define)
    assert_warned(caught, f"{__name__}.{old_class.__qualname__}.learn{OLD_LEARN[len('Algorithm.learn') :]}", NEW_LEARN)
    numpy_batch = cartpole_batch(5, weights=True)
    expected = parl.ComputationTask("new", dqn()).learn(numpy_batch)
    parl.seed_everything(0)
    old = old_class(lambda: MLPQModel(obs_dim=4, num_actions=2), gamma=0.9)
    costs, _ = deprecations(lambda: parl.ComputationTask("old", old).learn(numpy_batch))
    (info,) = seen
    assert info.sequence_lengths == (1,) * 5 and not info.uniform_weights
    np.testing.assert_array_equal(info.weights.numpy(), numpy_batch.weights)
    np.testing.assert_array_equal(info.bootstrap_steps.numpy(), numpy_batch.bootstrap_steps)
    assert costs["loss"] == pytest.approx(expected["loss"], rel=1e-6)


def test_a_learn_with_options_of_its_own_is_left_as_it_is() -> None:
    def learn(self: parl.Algorithm, batch: parl.Transition, scale: float = 1.0) -> dict:
        return {"loss": scale}

    with_options = type("WithOptions", (parl.Algorithm,), {"learn": learn})
    assert with_options.learn is learn  # no wrapper: its option still reaches it


def test_actor_critic_q_s_old_arguments_still_set_what_its_class_attributes_say() -> None:
    from parl.algorithms import DDPG
    from parl.algorithms.actor_critic_q import NEW_ATTRIBUTES, OLD_ARGUMENTS, ActorCriticQ
    from parl.models.continuous import DeterministicActorCritic, GaussianActorCritic

    class OldArgumentsDDPG(DDPG):
        model_class = GaussianActorCritic  # the arguments below set the object's own

        def __init__(self, model_func: Callable[[], parl.Model]) -> None:
            settings = {"gamma": 0.99, "tau": 0.005, "target_update_interval": 1, "learning_rate": 1e-3}
            old = {"model_class": DeterministicActorCritic, "target_actor": True}
            ActorCriticQ.__init__(self, model_func, grad_clip=None, **settings, **old)

    def model() -> parl.Model:
        return DeterministicActorCritic(obs_dim=3, action_dim=1, num_critics=1, hidden_sizes=(8,))

    algorithm, caught = deprecations(lambda: OldArgumentsDDPG(model))
    assert (OLD_ARGUMENTS, NEW_ATTRIBUTES) in {(old, new) for old, new, _, _ in DEPRECATED}
    assert_warned(caught, OLD_ARGUMENTS, NEW_ATTRIBUTES)
    assert algorithm.model_class is DeterministicActorCritic and algorithm.target_actor is True


def deprecated_row(form: str) -> Tuple[str, str]:
    """(old, new) of the Deprecated names row whose old name starts with ``form``."""
    (row,) = [(old, new) for old, new, _, _ in DEPRECATED if old.startswith(form)]
    return row


def test_the_managers_old_placement_keywords_still_fill_the_options_and_name_them_in_full() -> None:
    from parl.testing.echo import echo_algorithm_func

    old, new = deprecated_row("Manager(workers=")
    assert new == "Manager(placement=<the placement's options>)"
    tasks = {"T": parl.TaskSettings(echo_algorithm_func())}
    manager, caught = deprecations(lambda: parl.Manager(tasks, placement="processes", workers=2, heartbeat_timeout=5.0))
    full = "Manager(placement=ProcessesOptions(workers=2, heartbeat_timeout=5.0))"
    assert_warned(caught, "Manager(workers=..., heartbeat_timeout=...)", full)
    assert manager.placement_options == parl.ProcessesOptions(workers=2, heartbeat_timeout=5.0)


def test_a_placement_registered_with_option_names_still_reads_them_as_a_mapping() -> None:
    from parl.runtime import registry

    old, new = deprecated_row("registry.register(")
    assert (old, new) == (registry.OLD_REGISTER, registry.NEW_REGISTER)
    _, caught = deprecations(lambda: registry.register("named", "parl.runtime.threads:ThreadRunner", options=("size",)))
    try:
        assert_warned(caught, old, new)
        options = registry.entry("named").make_options({"size": 3})
        assert dict(options) == {"size": 3} and options.get("size") == 3
    finally:
        registry.unregister("named")


def test_the_old_placement_config_keys_still_load_into_the_placement_block(tmp_path: Path) -> None:
    from parl.experiment.config import load_config

    old, new = deprecated_row("config keys")
    assert new == "placement.<key>"
    config = REPO / "examples" / "configs" / "a2c_cartpole.yaml"
    keys = ["placement=processes", "workers=2", "faults.restart_workers=true", f"log_dir={tmp_path}"]
    loaded, caught = deprecations(lambda: load_config(str(config), keys))
    messages = {str(w.message) for w in caught}
    for key, option in (("workers", "workers"), ("faults.restart_workers", "restart_workers")):
        assert deprecation_message(f"config key {key}", f"placement.{option}", DEPRECATED_IN) in messages
    assert loaded.placement.options == parl.ProcessesOptions(workers=2, restart_workers=True)
