"""The robot configs of examples/configs/: each loads, builds, and is the robot of the example it mirrors.

The example's side is captured by running its own ``train()`` with the
Manager and the training loop replaced by recorders: whatever the example
builds (task settings, agents, helpers, envs) and passes to the loop (step
budget, target, evaluation schedule) is compared with what the config builds,
so a config and its example cannot drift apart.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import pathlib
import random
from dataclasses import fields
from types import ModuleType
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np
import paddle
import pytest
from learning import load_example

import parl
import parl.utils.training
from parl.core.agent import Agent
from parl.core.agent_helper import AgentHelper
from parl.experiment.build import build_manager, task_settings
from parl.experiment.config import load_config

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "examples" / "configs"

#: config name -> (the example it mirrors, the example's Settings fields it changes).
MIRRORS: Dict[str, Tuple[str, Dict[str, Any]]] = {
    "pg_cartpole": ("pg_cartpole", {}),
    "a2c_cartpole": ("a2c_cartpole", {}),
    "a2c_po_cartpole": ("a2c_po_cartpole", {}),
    "a2c_po_cartpole_mlp": ("a2c_po_cartpole", {"model": "mlp"}),
    "ppo_cartpole": ("ppo_cartpole", {}),
    "ppo_pendulum": ("ppo_pendulum", {}),
    "dqn_cartpole": ("dqn_cartpole", {}),
    "ddpg_pendulum": ("ddpg_pendulum", {}),
    "td3_pendulum": ("td3_pendulum", {}),
    "sac_pendulum": ("sac_pendulum", {}),
    "dqn_atari": ("dqn_atari", {}),
}

#: Where an example's agent is a subclass that only adds what ``parl train`` does itself: config name ->
#: (the example's agent class, its attributes the config's agent has not). dqn_atari's AtariAgent is
#: parl.utils.EpsilonGreedyAgent reporting to its own TensorBoard log, which the trainer's metrics replace.
AGENT_STAND_INS: Dict[str, Tuple[str, Tuple[str, ...]]] = {"dqn_atari": ("AtariAgent", ("log",))}

#: Attributes left out of :func:`describe`: compared on their own (env), set by the Manager when an
#: agent is added (id, helpers, a helper's buffer and the communicator's predict it binds as its own),
#: globally unique layer names, and the closure an algorithm builds its models with (the models
#: themselves are compared).
NOT_DESCRIBED = frozenset({"env", "helpers", "id", "buffer", "predict", "name", "model_func"})

#: The training loop's defaults, for what an example leaves out.
TRAIN_UNTIL_DEFAULTS = {
    name: p.default for name, p in inspect.signature(parl.utils.training.train_until).parameters.items()
}
_SCALARS = (bool, int, float, str, type(None))
_RNGS = (random.Random, np.random.Generator)


def describe(obj: Any, ancestors: Tuple[int, ...] = ()) -> Any:
    """A plain-data picture of ``obj``: its class name and public attributes, recursively.

    Scalars stay, sequences and mappings are described item by item, random
    generators a fingerprint of their state, tensors and large arrays their shape and
    dtype, functions their qualified name. Classes are named without their module,
    since an example loaded by path lives in a module of another name.
    """
    if isinstance(obj, _SCALARS):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, random.Random):
        return ("random.Random", _digest(obj.getstate()))
    if isinstance(obj, np.random.Generator):
        return ("numpy.random.Generator", _digest(obj.bit_generator.state))
    if isinstance(obj, np.ndarray):
        return obj.tolist() if obj.size <= 64 else ("ndarray", obj.shape, obj.dtype.str)
    if isinstance(obj, paddle.Tensor):
        return ("tensor", tuple(obj.shape), str(obj.dtype))
    if isinstance(obj, (list, tuple)):
        return [describe(v, ancestors) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): describe(v, ancestors) for k, v in obj.items()}
    if inspect.isroutine(obj) or isinstance(obj, (type, functools.partial, ModuleType)):
        return f"<{getattr(obj, '__qualname__', type(obj).__qualname__)}>"
    if id(obj) in ancestors or not hasattr(obj, "__dict__"):
        return f"<{type(obj).__qualname__}>"
    out: Dict[str, Any] = {"class": type(obj).__qualname__}
    for key, value in sorted(vars(obj).items()):
        if key in NOT_DESCRIBED or (key.startswith("_") and not isinstance(value, _RNGS)):
            continue
        out[key] = describe(value, ancestors + (id(obj),))
    return out


def _digest(state: Any) -> str:
    """A short fingerprint of a random generator's state (equal states, equal fingerprints)."""
    return hashlib.sha256(repr(state).encode()).hexdigest()[:16]


def describe_env(env: Any) -> Dict[str, Any]:
    """The wrapper chain, spaces, registered id and make/wrapper arguments of ``env``, and its
    action space's random state (seeded by the agent)."""
    spec = env.spec
    return {
        "chain": str(env),
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "id": None if spec is None else spec.id,
        "kwargs": None if spec is None else spec.kwargs,
        "max_episode_steps": None if spec is None else spec.max_episode_steps,
        "wrappers": None if spec is None else [(w.name, w.kwargs) for w in spec.additional_wrappers],
        "action_space_rng": _digest(env.action_space.np_random.bit_generator.state),
    }


def settings_fields(settings: parl.TaskSettings) -> Dict[str, Any]:
    """Batching and transform fields of ``settings`` (everything but the algorithm factory)."""
    return {f.name: getattr(settings, f.name) for f in fields(settings) if f.name != "algorithm_func"}


class _RecordingManager:
    """Stands in for :class:`parl.Manager` while an example builds its robot: keeps what it is given."""

    def __init__(
        self, tasks: Mapping[str, parl.TaskSettings], *, placement: str = "threads", thread_placement: str = "one_core"
    ) -> None:
        self.task_settings = dict(tasks)
        self.placement = placement
        self.thread_placement = thread_placement
        self.agents: List[Agent] = []
        self.helpers: List[Dict[str, AgentHelper]] = []

    def add_agent(self, agent: Agent, helpers: Mapping[str, AgentHelper]) -> int:
        self.agents.append(agent)
        self.helpers.append(dict(helpers))
        return len(self.agents) - 1


def example_robot(name: str, changes: Mapping[str, Any], monkeypatch: pytest.MonkeyPatch) -> Dict[str, Any]:
    """What ``examples/<name>.py``'s ``train()`` builds with its defaults (Settings fields ``changes``
    changed): the recording manager and the arguments of its training loop."""
    module = load_example(name)
    captured: Dict[str, Any] = {}

    def recording_train_until(
        manager: _RecordingManager, settings: parl.TaskSettings, make_env: Any, **kwargs: Any
    ) -> Dict[str, Any]:
        captured.update(manager=manager, settings=settings, make_env=make_env, loop=kwargs)
        return {}

    with monkeypatch.context() as patch:
        patch.setattr(parl, "Manager", _RecordingManager)
        patch.setattr(parl.utils.training, "Manager", _RecordingManager)
        patch.setattr(parl.utils.training, "train_until", recording_train_until)
        if hasattr(module, "train_until"):
            patch.setattr(module, "train_until", recording_train_until)
        extra = {"logdir": None} if "logdir" in inspect.signature(module.train).parameters else {}
        settings = module.Settings(**changes) if changes else None
        module.train(settings=settings, verbose=False, **extra)
    assert captured, f"examples/{name}.py did not reach its training loop"
    return captured


def config_path(name: str) -> pathlib.Path:
    return CONFIGS / f"{name}.yaml"


def test_every_config_mirrors_an_example() -> None:
    assert sorted(p.stem for p in CONFIGS.glob("*.yaml")) == sorted(MIRRORS)


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_config_is_the_example_robot(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    example, changes = MIRRORS[name]
    robot = example_robot(example, changes, monkeypatch)
    recorded: _RecordingManager = robot["manager"]
    loop = robot["loop"]

    config = load_config(str(config_path(name)))
    manager = build_manager(config)
    assert len(manager.agents) == config.agents == len(recorded.agents)
    assert sorted(manager.tasks) == sorted(config.tasks) == sorted(recorded.task_settings) == ["RL"]
    assert config.thread_placement == recorded.thread_placement

    # The task: batching, transforms, algorithm and model.
    ours, theirs = task_settings(config, "RL"), recorded.task_settings["RL"]
    assert settings_fields(ours) == settings_fields(theirs)
    assert describe(ours.algorithm_func()) == describe(theirs.algorithm_func())
    assert describe(ours.make_task("RL")) == describe(theirs.make_task("RL"))

    # Agents, their envs and helpers, seeded alike.
    for agent, expected, expected_helpers in zip(manager.agents, recorded.agents, recorded.helpers):
        assert type(agent).__qualname__ in [cls.__qualname__ for cls in type(expected).__mro__]
        expected_agent = describe(expected)
        if name in AGENT_STAND_INS:
            example_class, extra_attributes = AGENT_STAND_INS[name]
            assert expected_agent["class"] == example_class
            expected_agent["class"] = type(agent).__qualname__
            for attribute in extra_attributes:
                del expected_agent[attribute]
        assert describe(agent) == expected_agent
        assert describe_env(agent.env) == describe_env(expected.env)
        assert describe(agent.helpers) == describe(expected_helpers)

    # The training run: seed, step budget, target and evaluation schedule.
    assert config.seed == loop["seed"] == 0
    assert config.train.max_env_steps == loop["max_steps"]
    assert config.train.target_return == loop["target"]
    assert config.evaluation.every_steps == loop.get("check_interval", TRAIN_UNTIL_DEFAULTS["check_interval"])
    assert config.evaluation.episodes == loop["eval_episodes"]
    assert config.evaluation.start_return == loop["check_from"]
    assert str(robot["make_env"]()) == str(manager.agents[0].env)  # the example's evaluation env

    # The conventions every example config follows.
    assert config.name == name
    assert pathlib.Path(config.log_dir).as_posix().endswith(f"runs/{name}")
    assert (config.checkpoint.every_steps, config.checkpoint.every_minutes, config.checkpoint.keep) == (None, 5.0, 3)
    assert f"parl train examples/configs/{name}.yaml" in config_path(name).read_text()
