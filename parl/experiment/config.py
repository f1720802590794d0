"""Robot configs: one YAML file describes a whole robot; loading checks all of it before anything runs.

    config = load_config("configs/ppo_cartpole.yaml", ["seed=3", "tasks.RL.algorithm.learning_rate=1e-3"])
    manager = build_manager(config)      # parl.experiment.build: tasks, agents and helpers, not started

Loading checks the keys (unknown ones, with the closest known key
suggested; missing ones), the values' types and ranges, and every class spec
(:mod:`parl.experiment.class_spec`): the class imports, takes the options
given, and the options fit its type hints. Then it builds, once, what the
classes themselves check: each task's algorithm (and so its model) and
ComputationTask, one helper per task, the nested specs among the agent's
options, and one environment (closed at once). Agents are never built at
load time: the agent class is checked by its signature.

Every problem is a :class:`ConfigError` of one line that starts with the key
path, e.g. ``tasks.RL.algorithm.gamma: expected a number in [0.0, 1.0], got 1.5``.
docs/configs.md describes every key.
"""

from __future__ import annotations

import copy
import inspect
import re
import sys
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

import parl
from parl import affinity
from parl.experiment.class_spec import (
    ClassSpec,
    ConfigError,
    build_checked,
    build_value,
    check_arguments,
    did_you_mean,
    import_object,
    one_line,
    plain_value,
    resolve_spec,
    resolve_value,
)
from parl.runtime import registry
from parl.serving.shared_parts import share_parts
from parl.utils.spaces import (
    ACTION_SIZE_KEYS,
    OBSERVATION_SIZE_KEYS,
    action_sizes,
    describe_space,
    observation_sizes,
    spec_mismatch,
)
from parl.validation import ParameterError, check_choice, check_int, check_positive

__all__ = [
    "BatchingConfig",
    "CheckpointConfig",
    "ClassSpec",
    "ConfigError",
    "EnvConfig",
    "EvaluationConfig",
    "RobotConfig",
    "TaskConfig",
    "TrainConfig",
    "TransformsConfig",
    "apply_overrides",
    "load_config",
    "parse_config",
]

#: The agent class of a config without an ``agent`` key.
DEFAULT_AGENT = "parl.utils.GymAgent"
_TASK_DEFAULTS = {f.name: f.default for f in fields(parl.TaskSettings)}


@dataclass
class EnvConfig:
    """``env``: how each agent's environment is made (exactly one of ``id`` and ``factory``).

    Attributes:
        id: a gymnasium id: ``gymnasium.make(id, **kwargs)``.
        factory: the import path of a callable returning an environment: ``factory(**kwargs)``.
        kwargs: keyword arguments; nested class specs are built afresh for every environment.
    """

    id: Optional[str] = None
    factory: Optional[str] = None
    kwargs: Dict[str, Any] = field(default_factory=dict)

    def make(self) -> Any:
        """A new environment."""
        return self._make(checked=False)

    def _make(self, checked: bool) -> Any:
        kwargs = build_value(self.kwargs, checked)
        if self.id is not None:
            import gymnasium

            return gymnasium.make(self.id, **kwargs)
        return import_object(self.factory, "env.factory")(**kwargs)

    def to_dict(self) -> Dict[str, Any]:
        """``env`` as plain YAML data."""
        source = {"id": self.id} if self.id is not None else {"factory": self.factory}
        return {**source, "kwargs": plain_value(self.kwargs)}


@dataclass
class BatchingConfig:
    """``tasks.<name>.batching``: the ComputationWrapper's batching (defaults: :class:`parl.TaskSettings`').

    The sizes may be the word ``agents``: the config's agent count, read at load.
    """

    max_batchsize: int = _TASK_DEFAULTS["max_batchsize"]
    min_batchsize: int = _TASK_DEFAULTS["min_batchsize"]
    max_training_batchsize: Optional[int] = _TASK_DEFAULTS["max_training_batchsize"]
    training_timeout: float = _TASK_DEFAULTS["training_timeout"]


@dataclass
class TransformsConfig:
    """``tasks.<name>.transforms``: the ComputationTask's input and reward transforms
    (defaults: :class:`parl.TaskSettings`')."""

    normalize_inputs: Union[bool, Tuple[str, ...]] = _TASK_DEFAULTS["normalize_inputs"]
    input_clip: float = _TASK_DEFAULTS["input_clip"]
    reward_scale: float = _TASK_DEFAULTS["reward_scale"]
    reward_clip: Optional[float] = _TASK_DEFAULTS["reward_clip"]


@dataclass
class TaskConfig:
    """``tasks.<name>``: one ComputationTask, and the helper each agent uses for it.

    Attributes:
        model: built with no positional argument, given ``model_sizes`` too.
        algorithm: built as ``cls(model_func, **kwargs)``.
        helper: one per agent; given ``seed=<agent seed>`` when it takes ``seed`` and the config does not.
        model_sizes: the sizes the model takes from the environment's spaces (``obs_dim``,
            ``num_actions``, ...) that the config does not state (not a config key).
    """

    model: ClassSpec
    algorithm: ClassSpec
    helper: ClassSpec
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    transforms: TransformsConfig = field(default_factory=TransformsConfig)
    model_sizes: Dict[str, int] = field(default_factory=dict)

    def build_model(self) -> parl.Model:
        """A fresh model: the config's options and the sizes from the environment."""
        return self.model.build(extra=self.model_sizes)

    def algorithm_func(self) -> Callable[[], parl.Algorithm]:
        """A zero-argument callable building the algorithm, over a fresh model on every call."""
        algorithm = self.algorithm
        return lambda: algorithm.build(args=(self.build_model,))

    def to_dict(self) -> Dict[str, Any]:
        """The task as plain YAML data."""
        return {
            "model": self.model.to_dict(),
            "algorithm": self.algorithm.to_dict(),
            "helper": self.helper.to_dict(),
            "batching": asdict(self.batching),
            "transforms": plain_value(asdict(self.transforms)),
        }


@dataclass
class TrainConfig:
    """``train``.

    Attributes:
        max_env_steps: env steps (all agents together) after which training ends.
        target_return: training ends at the first evaluation whose mean return reaches this (None: never).
    """

    max_env_steps: int
    target_return: Optional[float] = None


@dataclass
class EvaluationConfig:
    """``evaluation``.

    Attributes:
        every_steps: env steps between evaluations (None: only at the end).
        episodes: episodes per evaluation.
        start_return: evaluations start once the mean of the last 20 training returns reaches this (None: at once).
        pause_training: agents wait while an evaluation runs, so it measures the weights of that
            env step and has the CPU to itself (False: training goes on beside it).
        final_episodes: episodes of the evaluation on fresh seeds after training (None: 5 x ``episodes``).
    """

    every_steps: Optional[int] = 10_000
    episodes: int = 10
    start_return: Optional[float] = None
    pause_training: bool = True
    final_episodes: Optional[int] = None


@dataclass
class CheckpointConfig:
    """``checkpoint``.

    Attributes:
        every_steps: env steps between checkpoints (None: not by steps).
        every_minutes: minutes between checkpoints (None: not by time).
        keep: most recent checkpoints kept.
    """

    every_steps: Optional[int] = None
    every_minutes: Optional[float] = 10.0
    keep: int = 3


@dataclass
class RobotConfig:
    """A checked robot config; :mod:`parl.experiment.build` turns it into a Manager.

    Attributes:
        name: the run's name (default: the config file's stem).
        seed: the robot's seed; agent ``i`` gets ``seed * 1000 + i``.
        agents: number of agents, each with its own environment.
        log_dir: where metrics and checkpoints go (default ``runs/<name>``; relative to the working directory).
        python_path: absolute directories put on ``sys.path`` before any class was imported.
        thread_placement: the Manager's thread placement (one of ``parl.affinity.PLACEMENTS``).
        placement: where the agents run (``parl.Manager``'s ``placement``: threads, cooperative, processes).
        workers: worker processes for ``placement: processes`` (None: the Manager's default).
        env: how environments are made.
        agent: the agent class, built as ``cls(env, seed=<agent seed>, **kwargs)``.
        tasks: task name -> task.
        shared: parts of models the tasks share: group -> {task name: path}, as ``parl.Manager(shared=...)``.
        train, evaluation, checkpoint: the training loop's settings.
        source: the file the config came from (not a config key).
    """

    name: str
    seed: int
    agents: int
    log_dir: str
    python_path: List[str]
    thread_placement: str
    placement: str
    workers: Optional[int]
    env: EnvConfig
    agent: ClassSpec
    tasks: Dict[str, TaskConfig]
    train: TrainConfig
    evaluation: EvaluationConfig
    checkpoint: CheckpointConfig
    shared: Dict[str, Dict[str, str]] = field(default_factory=dict)
    source: str = ""

    def to_dict(self) -> Dict[str, Any]:
        """The resolved config as plain YAML data (every default filled in); it loads back to an equal config."""
        return {
            "name": self.name,
            "seed": self.seed,
            "agents": self.agents,
            "log_dir": self.log_dir,
            "python_path": list(self.python_path),
            "thread_placement": self.thread_placement,
            "placement": self.placement,
            "workers": self.workers,
            "env": self.env.to_dict(),
            "agent": self.agent.to_dict(),
            "tasks": {name: task.to_dict() for name, task in self.tasks.items()},
            "shared": {group: dict(members) for group, members in self.shared.items()},
            "train": asdict(self.train),
            "evaluation": asdict(self.evaluation),
            "checkpoint": asdict(self.checkpoint),
        }


#: Top-level keys, in the order they are checked.
TOP_KEYS = (
    "name",
    "seed",
    "agents",
    "log_dir",
    "python_path",
    "thread_placement",
    "placement",
    "workers",
    "env",
    "agent",
    "tasks",
    "shared",
    "train",
    "evaluation",
    "checkpoint",
)
_REQUIRED_TOP_KEYS = ("env", "tasks", "train")
_TASK_KEYS = ("model", "algorithm", "helper", "batching", "transforms")
_ENV_KEYS = ("id", "factory", "kwargs")
_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")  # task names: file names and metric tags
_RUN_NAME = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$")
_AGENT_SEED = "each agent is given seed=<seed * 1000 + its index>; set the top-level seed"


# -- loading ----------------------------------------------------------------


def load_config(path: str, overrides: Sequence[str] = ()) -> RobotConfig:
    """The checked config of the YAML file ``path``, with ``overrides`` (``key.path=value``) applied.

    Raises:
        ConfigError: one line: ``<path>: no such file``, ``<path>:<line>: <YAML problem>``,
            or ``<key path>: <problem>``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or one_line(exc)}") from None
    data = _load_yaml(text, path)
    if data is None:
        raise ConfigError(f"{path}: the file is empty")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of config keys, got a {type(data).__name__}")
    data = apply_overrides(data, overrides)
    return parse_config(data, source=str(path), base_dir=str(Path(path).resolve().parent))


def parse_config(data: Mapping[str, Any], *, source: str, base_dir: str) -> RobotConfig:
    """The checked config of ``data`` (a parsed YAML file).

    Args:
        source: where ``data`` came from; its stem is the default ``name``.
        base_dir: the directory relative ``python_path`` entries are relative to.

    Raises:
        ConfigError: the first problem found, on one line starting with its key path.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of config keys, got a {type(data).__name__}")
    _check_keys(data, "", TOP_KEYS)
    for key in _REQUIRED_TOP_KEYS:
        if key not in data:
            raise ConfigError(f"{key}: missing required key")
    python_path = _python_path(data.get("python_path", []), base_dir)
    for directory in reversed(python_path):
        if directory not in sys.path:
            sys.path.insert(0, directory)
    name = _value("name", data.get("name", Path(source).stem), _check_name)
    seed = _value("seed", data.get("seed", 0), lambda n, v: check_int(n, v, 0))
    agents = _value("agents", data.get("agents", 1), lambda n, v: check_int(n, v, 1))
    log_dir = _value("log_dir", data.get("log_dir", f"runs/{name}"), _check_string)
    thread_placement = _value(
        "thread_placement",
        data.get("thread_placement", "auto"),
        lambda n, v: check_choice(n, v, affinity.PLACEMENTS),
    )
    placement = _value(
        "placement", data.get("placement", "threads"), lambda n, v: check_choice(n, v, tuple(registry.names()))
    )
    workers = _value("workers", data.get("workers"), _optional(_integer(1)))
    env = _parse_env(data["env"])
    agent = resolve_spec(
        data.get("agent", {"class": DEFAULT_AGENT}),
        "agent",
        base=parl.Agent,
        filled=("env",),
        reserved={"seed": _AGENT_SEED},
    )
    spaces = _EnvSpaces.of(env)
    config = RobotConfig(
        name=name,
        seed=seed,
        agents=agents,
        log_dir=log_dir,
        python_path=python_path,
        thread_placement=thread_placement,
        placement=placement,
        workers=workers,
        env=env,
        agent=agent,
        tasks=_parse_tasks(data["tasks"], spaces, agents),
        shared=_parse_shared(data.get("shared")),
        train=_section(data["train"], "train", TrainConfig, _TRAIN_CHECKS),
        evaluation=_section(data.get("evaluation"), "evaluation", EvaluationConfig, _EVALUATION_CHECKS),
        checkpoint=_section(data.get("checkpoint"), "checkpoint", CheckpointConfig, _CHECKPOINT_CHECKS),
        source=source,
    )
    _check_by_building(config, spaces)
    return config


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads ``1e-3`` as a float (as Python and YAML 1.2 do; YAML 1.1
    wants ``1.0e-3``) and rejects a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> Dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # ``<<: *defaults``: keys given beside it override the merged ones
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _load_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise ConfigError(f"{where}: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: {one_line(exc)}") from None


# -- overrides --------------------------------------------------------------


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> Dict[str, Any]:
    """A copy of ``data`` with each override ``key.path=value`` set; the value is parsed as YAML
    (``seed=3``, ``tasks.RL.algorithm.learning_rate=1e-3``, ``train.target_return=null``).

    A key outside the schema is an error naming it. Options of class specs are
    checked later, against the class.

    Raises:
        ConfigError: ``<key path>: <problem> (in -o <override>)``.
    """
    result = copy.deepcopy(dict(data))
    for text in overrides:
        key, sep, raw = text.partition("=")
        keys = key.strip().split(".")
        if not sep or not all(keys):
            raise ConfigError(f"{text}: expected an override key.path=value")
        try:
            value = yaml.load(raw, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or one_line(exc)
            raise ConfigError(f"{key}: cannot parse {raw!r}: {problem} (in -o {text})") from None
        _set(result, keys, value, text)
    return result


_SECTIONS = {
    "train": TrainConfig,
    "evaluation": EvaluationConfig,
    "checkpoint": CheckpointConfig,
    "batching": BatchingConfig,
    "transforms": TransformsConfig,
}
_KINDS: Dict[str, Dict[str, str]] = {
    "top": {
        **dict.fromkeys(TOP_KEYS, "value"),
        "env": "env",
        "agent": "spec",
        "tasks": "tasks",
        "shared": "free",
        "train": "train",
        "evaluation": "evaluation",
        "checkpoint": "checkpoint",
    },
    "env": {"id": "value", "factory": "value", "kwargs": "free"},
    "task": {
        "model": "spec",
        "algorithm": "spec",
        "helper": "spec",
        "batching": "batching",
        "transforms": "transforms",
    },
    **{name: dict.fromkeys((f.name for f in fields(cls)), "value") for name, cls in _SECTIONS.items()},
}


def _set(data: Dict[str, Any], keys: List[str], value: Any, text: str) -> None:
    """Set ``data[k0][k1]...[kn] = value``, walking the schema (mappings on the way are created)."""
    node, kind = data, "top"
    for depth, key in enumerate(keys):
        path = ".".join(keys[: depth + 1])
        if kind in ("spec", "free"):
            child = "free"  # any key: a class spec's options are checked against its class
        elif kind == "tasks":
            if key not in node:
                raise ConfigError(f"{path}: no such task; tasks are {sorted(node)} (in -o {text})")
            child = "task"
        else:
            known = _KINDS.get(kind, {})
            if key not in known:
                raise ConfigError(f"{path}: unknown key{did_you_mean(key, list(known))} (in -o {text})")
            child = known[key]
        if depth == len(keys) - 1:
            node[key] = value
            return
        if node.get(key) is None:
            node[key] = {}
        if not isinstance(node[key], dict):
            raise ConfigError(
                f"{path}: expected a mapping to set {keys[depth + 1]!r} in, got {node[key]!r} (in -o {text})"
            )
        node, kind = node[key], child


# -- sections ---------------------------------------------------------------

Check = Callable[[str, Any], Any]


def _value(key_path: str, value: Any, check: Check) -> Any:
    """``check(name, value)``, its ParameterError turned into a ConfigError at ``key_path``."""
    try:
        return check(key_path.rsplit(".", 1)[-1], value)
    except ParameterError as exc:
        raise ConfigError(f"{key_path}: expected {exc.expected}, got {exc.value!r}") from None


def _optional(check: Check) -> Check:
    def run(name: str, value: Any) -> Any:
        if value is None:
            return None
        try:
            return check(name, value)
        except ParameterError as exc:
            raise ParameterError(exc.name, f"{exc.expected} or null", exc.value) from None

    return run


def _check_number(name: str, value: Any) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ParameterError(name, "a number", value)
    return float(value)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(name, "true or false", value)
    return value


def _check_string(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ParameterError(name, "a non-empty string", value)
    return value


def _check_name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _RUN_NAME.match(value):
        raise ParameterError(name, "a name of letters, digits, '_', '-' and '.'", value)
    return value


def _integer(minimum: int) -> Check:
    return lambda name, value: check_int(name, value, minimum)


def _check_normalize_inputs(name: str, value: Any) -> Union[bool, Tuple[str, ...]]:
    if isinstance(value, bool):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ParameterError(name, "true, false or a list of input names", value)


_TRAIN_CHECKS: Dict[str, Check] = {"max_env_steps": _integer(1), "target_return": _optional(_check_number)}
_EVALUATION_CHECKS: Dict[str, Check] = {
    "every_steps": _optional(_integer(1)),
    "episodes": _integer(1),
    "start_return": _optional(_check_number),
    "pause_training": _check_bool,
    "final_episodes": _optional(_integer(1)),
}
_CHECKPOINT_CHECKS: Dict[str, Check] = {
    "every_steps": _optional(_integer(1)),
    "every_minutes": _optional(check_positive),
    "keep": _integer(1),
}
_BATCHING_CHECKS: Dict[str, Check] = {
    "max_batchsize": _integer(1),
    "min_batchsize": _integer(1),
    "max_training_batchsize": _optional(_integer(1)),
    "training_timeout": check_positive,
}
_TRANSFORMS_CHECKS: Dict[str, Check] = {
    "normalize_inputs": _check_normalize_inputs,
    "input_clip": check_positive,
    "reward_scale": check_positive,
    "reward_clip": _optional(check_positive),
}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _mapping(value: Any, key_path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key_path}: expected a mapping, got {value!r}")
    return value


def _check_string_keys(mapping: Mapping[Any, Any], key_path: str) -> None:
    for key in mapping:
        if not isinstance(key, str):
            raise ConfigError(f"{key_path or 'config'}: keys must be strings, got {key!r}")


def _check_keys(mapping: Mapping[Any, Any], key_path: str, known: Sequence[str]) -> None:
    _check_string_keys(mapping, key_path)
    for key in mapping:
        if key not in known:
            hint = did_you_mean(key, known) or f"; expected one of: {', '.join(known)}"
            raise ConfigError(f"{_join(key_path, key)}: unknown key{hint}")


def _section(data: Any, key_path: str, cls: type, checks: Mapping[str, Check]) -> Any:
    """The dataclass ``cls`` from the mapping ``data`` (None: every default), each value checked."""
    mapping = _mapping({} if data is None else data, key_path)
    names = [f.name for f in fields(cls)]
    _check_keys(mapping, key_path, names)
    values = {}
    for f in fields(cls):
        path = f"{key_path}.{f.name}"
        if f.name in mapping:
            values[f.name] = _value(path, mapping[f.name], checks[f.name])
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ConfigError(f"{path}: missing required key")
    return cls(**values)


def _python_path(value: Any, base_dir: str) -> List[str]:
    entries = [] if value is None else [value] if isinstance(value, str) else value
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConfigError(f"python_path: expected a list of directories, got {value!r}")
    out = []
    for index, entry in enumerate(entries):
        directory = (Path(base_dir) / entry).resolve()
        if not directory.is_dir():
            raise ConfigError(f"python_path[{index}]: no such directory {str(directory)!r}")
        out.append(str(directory))
    return out


def _parse_env(data: Any) -> EnvConfig:
    mapping = _mapping(data, "env")
    _check_keys(mapping, "env", _ENV_KEYS)
    env_id, factory = mapping.get("id"), mapping.get("factory")
    if (env_id is None) == (factory is None):
        raise ConfigError(f"env: give exactly one of id and factory, got {'neither' if env_id is None else 'both'}")
    kwargs = mapping.get("kwargs") or {}
    if not isinstance(kwargs, Mapping):
        raise ConfigError(f"env.kwargs: expected a mapping, got {kwargs!r}")
    if env_id is not None:
        _value("env.id", env_id, _check_string)
        _check_string_keys(kwargs, "env.kwargs")
        return EnvConfig(id=env_id, kwargs={k: resolve_value(v, Any, f"env.kwargs.{k}") for k, v in kwargs.items()})
    function = import_object(factory, "env.factory")
    if not callable(function):
        raise ConfigError(f"env.factory: expected a callable, got {factory!r}")
    checked, _ = check_arguments(function, factory, kwargs, "env.kwargs", class_path="env.factory")
    return EnvConfig(factory=factory, kwargs=checked)


@dataclass
class _EnvSpaces:
    """The spaces of the config's environment (made once, closed at once) and the model sizes they declare."""

    name: str
    observation_space: Any
    action_space: Any
    sizes: Dict[str, int]
    unavailable: Dict[str, str]  # size keyword -> why the environment gives none

    @classmethod
    def of(cls, env: EnvConfig) -> "_EnvSpaces":
        instance = _make_env_checked(env)
        try:
            observation_space, action_space = instance.observation_space, instance.action_space
        finally:
            close = getattr(instance, "close", None)
            if callable(close):
                close()
        sizes: Dict[str, int] = {}
        unavailable: Dict[str, str] = {}
        for keys, function, space in (
            (OBSERVATION_SIZE_KEYS, observation_sizes, observation_space),
            (ACTION_SIZE_KEYS, action_sizes, action_space),
        ):
            try:
                sizes.update(function(space))
            except ValueError as exc:
                unavailable.update(dict.fromkeys(keys, str(exc)))
        for keys, space, word in (
            (OBSERVATION_SIZE_KEYS, observation_space, "observation"),
            (ACTION_SIZE_KEYS, action_space, "action"),
        ):
            for key in keys:
                if key not in sizes and key not in unavailable:
                    unavailable[key] = f"its {word} space is {describe_space(space)}"
        name = env.id if env.id is not None else env.factory
        return cls(f"env {name}", observation_space, action_space, sizes, unavailable)

    def model_sizes(self, spec: ClassSpec) -> Dict[str, int]:
        """The sizes ``spec``'s class takes that its config leaves out; a size group the config
        states any of (``num_actions`` or ``action_dim``) is left to the config.

        Raises:
            ConfigError: the class requires a size the environment does not declare.
        """
        required = _required_keywords(spec.cls)
        out = {}
        for group in (OBSERVATION_SIZE_KEYS, ACTION_SIZE_KEYS):
            if spec.accepted is None or any(key in spec.kwargs for key in group):
                continue
            for key in group:
                if key not in spec.accepted:
                    continue
                if key in self.sizes:
                    out[key] = self.sizes[key]
                elif key in required:
                    raise ConfigError(
                        f"{spec.key_path}.{key}: missing, required by {spec.import_path}, and {self.name} "
                        f"declares none ({self.unavailable[key]})"
                    )
        return out

    def check_model(self, model: parl.Model, spec: ClassSpec, sizes: Mapping[str, int]) -> None:
        """Raise a ConfigError naming the config key when ``model``'s ``obs`` or ``action`` spec
        does not fit the spaces."""
        try:
            mismatch = spec_mismatch(model, self.observation_space, self.action_space)
        except Exception as exc:  # noqa: BLE001 - a model whose specs cannot be read is reported on one line
            raise ConfigError(f"{spec.key_path}: {one_line(exc)}") from exc
        if mismatch is None:
            return
        keys = OBSERVATION_SIZE_KEYS if mismatch.part == "observation" else ACTION_SIZE_KEYS
        stated = {**spec.kwargs, **sizes}
        for key in keys:
            if key in stated and (key not in self.sizes or stated[key] != self.sizes[key]):
                where = "" if key in spec.kwargs else " (from the environment)"
                raise ConfigError(
                    f"{spec.key_path}.{key}: {stated[key]!r}{where} does not match {self.name}'s {mismatch.env_side}"
                )
        raise ConfigError(
            f"{spec.key_path}: its {mismatch.model_side} does not match {self.name}'s {mismatch.env_side}"
        )


def _required_keywords(cls: Callable[..., Any]) -> frozenset:
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in params if p.kind in kinds and p.default is p.empty)


_SIZE_KEYS = OBSERVATION_SIZE_KEYS + ACTION_SIZE_KEYS


#: The word a batching size may be instead of a number: the config's agent count.
AGENTS_WORD = "agents"


def _batching_sizes(data: Any, agents: int) -> Any:
    """``batching`` with every size given as :data:`AGENTS_WORD` replaced by ``agents``."""
    if not isinstance(data, Mapping):
        return data
    sizes = ("max_batchsize", "min_batchsize", "max_training_batchsize")
    return {key: agents if key in sizes and value == AGENTS_WORD else value for key, value in data.items()}


def _parse_tasks(data: Any, spaces: _EnvSpaces, agents: int) -> Dict[str, TaskConfig]:
    mapping = _mapping(data, "tasks")
    if not mapping:
        raise ConfigError("tasks: expected at least one task, got none")
    tasks = {}
    for name, task in mapping.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"tasks: task names are letters, digits, '_' and '-', got {name!r}")
        path = f"tasks.{name}"
        task = _mapping(task, path)
        _check_keys(task, path, _TASK_KEYS)
        for key in ("model", "algorithm", "helper"):
            if key not in task:
                raise ConfigError(f"{path}.{key}: missing required key")
        batching_data = _batching_sizes(task.get("batching"), agents)
        batching = _section(batching_data, f"{path}.batching", BatchingConfig, _BATCHING_CHECKS)
        joined = batching.max_training_batchsize or batching.max_batchsize
        if batching.min_batchsize > joined:
            raise ConfigError(
                f"{path}.batching.min_batchsize: expected at most the batches joined per update ({joined}), "
                f"got {batching.min_batchsize}"
            )
        model = resolve_spec(task["model"], f"{path}.model", base=parl.Model, supplied=_SIZE_KEYS)
        tasks[name] = TaskConfig(
            model=model,
            algorithm=resolve_spec(task["algorithm"], f"{path}.algorithm", base=parl.Algorithm, filled=("model_func",)),
            helper=resolve_spec(task["helper"], f"{path}.helper", base=parl.AgentHelper),
            batching=batching,
            transforms=_section(task.get("transforms"), f"{path}.transforms", TransformsConfig, _TRANSFORMS_CHECKS),
            model_sizes=spaces.model_sizes(model),
        )
    return tasks


def _parse_shared(data: Any) -> Dict[str, Dict[str, str]]:
    """``shared``'s shape; the tasks and paths it names are checked by building (:func:`share_parts`)."""
    mapping = _mapping({} if data is None else data, "shared")
    _check_string_keys(mapping, "shared")
    out = {}
    for group, members in mapping.items():
        members = _mapping(members, f"shared.{group}")
        _check_string_keys(members, f"shared.{group}")
        for task, path in members.items():
            _value(f"shared.{group}.{task}", path, _check_string)
        out[group] = dict(members)
    return out


# -- checks by building -----------------------------------------------------


def _check_by_building(config: RobotConfig, spaces: _EnvSpaces) -> None:
    """Build once what the classes check themselves, and check the first model of the task a
    GymAgent plays against the environment's spaces; nothing built is kept."""
    built = {}
    played = _played_task(config.agent)
    for name, task in config.tasks.items():
        models: List[parl.Model] = []

        def model_func(task: TaskConfig = task, models: List[parl.Model] = models) -> parl.Model:
            models.append(build_checked(task.model, extra=task.model_sizes))
            return models[-1]

        algorithm = build_checked(task.algorithm, args=(model_func,))
        if models and name == played:
            spaces.check_model(models[0], task.model, task.model_sizes)
        try:
            built[name] = parl.ComputationTask(name, algorithm, **asdict(task.transforms))
        except Exception as exc:  # noqa: BLE001 - reported on one line
            raise ConfigError(f"tasks.{name}.transforms: {one_line(exc)}") from exc
        build_checked(task.helper, extra=task.helper.defaults_for({"seed": config.seed * 1000}))
    try:
        share_parts(built, config.shared)  # its messages start with shared.<group>
    except ValueError as exc:
        raise ConfigError(one_line(exc)) from exc
    build_value(config.agent.kwargs, checked=True)


def _played_task(agent: ClassSpec) -> Optional[str]:
    """The task a :class:`~parl.utils.GymAgent` feeds observations to and takes env actions from
    (its ``task`` option); None for other agents, whose tasks may see anything."""
    from parl.utils.gym_agent import GymAgent

    if not (isinstance(agent.cls, type) and issubclass(agent.cls, GymAgent)):
        return None
    if "task" in agent.kwargs:
        return agent.kwargs["task"]
    parameter = inspect.signature(agent.cls).parameters.get("task")
    if parameter is None or parameter.default is parameter.empty:
        return None
    return parameter.default


def _make_env_checked(env: EnvConfig) -> Any:
    """One environment, its failures as ConfigErrors."""
    import gymnasium

    try:
        return env._make(checked=True)
    except ConfigError:
        raise
    except (gymnasium.error.UnregisteredEnv, gymnasium.error.DeprecatedEnv) as exc:
        raise ConfigError(f"env.id: {one_line(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - any failure to make the environment is reported on one line
        raise ConfigError(f"env: {one_line(exc)}") from exc
