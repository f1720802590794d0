"""Robot configs: one YAML file describes a whole robot; loading checks all of it before anything runs.

    config = load_config("configs/ppo_cartpole.yaml", ["seed=3", "tasks.RL.algorithm.learning_rate=1e-3"])
    manager = build_manager(config)      # parl.experiment.config.build: tasks, agents and helpers, not started

The schema is the pydantic models below (docs/configs.md describes every key):
unknown keys are errors, values strict, ranges field constraints, class specs
resolved by :mod:`parl.experiment.config.class_spec`. Then loading builds, once, what
the classes check themselves: each task's algorithm (and so its model) and
ComputationTask, one helper per task, the nested specs among the agent's
options, and one environment (closed at once); agents are checked by their
signature only. Every problem is a one-line :class:`ConfigError` that starts
with the key path: ``tasks.RL.algorithm.gamma: expected a number in [0.0, 1.0], got 1.5``.
"""

from __future__ import annotations

import copy
import inspect
import os
import re
import sys
import typing
from dataclasses import fields
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Callable,
    Dict,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    Union,
)

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    ValidationInfo,
    create_model,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

import parl
from parl import affinity
from parl.experiment.config import class_spec
from parl.experiment.config.callbacks import Callback
from parl.experiment.config.class_spec import ClassSpec, ConfigError, Spec, build_checked, one_line, resolve_spec
from parl.experiment.config.env_spaces import EnvSpaces
from parl.experiment.config.evaluation_start import EvaluationStart
from parl.experiment.config.placement_config import PlacementConfig, fold_old_keys, is_old_section
from parl.experiment.config.self_play_config import SelfPlayConfig, check_self_play_config
from parl.experiment.config.task_spaces import TASK_SIZE_KEYS, spaces_by_task
from parl.experiment.config.yaml_loading import parse_value, read_config_file
from parl.runtime.manager import DEFAULT_STALL_SECONDS
from parl.serving.learner_collective import LEARNER_DEVICES, learner_device
from parl.serving.shared_parts import share_parts
from parl.validation import ParameterError

#: The keyword an environment factory takes to repeat actions itself (``env.action_repeat`` is passed as it).
ACTION_REPEAT = "action_repeat"
#: The keyword by which an environment is asked for a render mode.
RENDER_MODE = "render_mode"
#: The agent class of a config without an ``agent`` key.
DEFAULT_AGENT = "parl.utils.GymAgent"
_AGENT_SEED = "each agent is given seed=<seed * 1000 + its index>; set the top-level seed"
_TASK_DEFAULTS: Dict[str, Any] = {f.name: f.default for f in fields(parl.TaskSettings)}
if TYPE_CHECKING:  # mypy takes only literal values in Literal[...]; pydantic reads the tuples
    ThreadPlacement = str
    LearnerDevice = str
else:
    ThreadPlacement = Literal[affinity.PLACEMENTS]
    LearnerDevice = Literal[LEARNER_DEVICES]
_TASK_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")  # task names: file names and metric tags
_RUN_NAME = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$")

_CPUS = os.cpu_count() or 1
#: The most agents: 64 per CPU, and under 1000 so that two robot seeds' agent seeds (seed * 1000 + i) never meet.
MAX_AGENTS = min(999, 64 * _CPUS)
#: The most worker processes: 4 per CPU.
MAX_WORKERS = 4 * _CPUS
#: The largest batch size (requests or training batches).
MAX_BATCH = 1 << 16
#: The largest seed: numpy's global generator takes seeds below 2**32.
MAX_SEED = 2**32 - 1

PositiveInt = Annotated[int, Field(ge=1)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonEmptyStr = Annotated[str, Field(min_length=1)]
#: A batch size: an integer, or ``agents`` for the robot's agent count (put in at load).
BatchSize = Union[Annotated[int, Field(ge=1, le=MAX_BATCH)], Literal["agents"]]
#: A mapping that YAML's empty value (null) leaves empty.
OrEmpty = BeforeValidator(lambda value: {} if value is None else value)


#: Evaluation episodes played at once, their predictions batched into one call per round.
EVALUATION_CONCURRENCY = 32


class _Section(BaseModel):
    """A mapping of the config: unknown keys are errors, values strict, null all defaults."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_empty(cls, data: Any) -> Any:
        return {} if data is None else data

    def to_dict(self) -> Dict[str, Any]:
        """The section as plain YAML data, every default filled in (a RobotConfig's loads back to an equal one)."""
        return class_spec.plain_value(self.model_dump())


class EnvConfig(_Section):
    """``env``: ``gymnasium.make(id, **kwargs)`` or ``factory(**kwargs)`` (nested specs built afresh each time),
    repeating each action ``action_repeat`` times: passed to a factory that takes ``action_repeat`` (it places
    the repeat among its own wrappers), else an :class:`~parl.utils.action_repeat.ActionRepeat` around it."""

    id: Optional[NonEmptyStr] = None
    factory: Optional[str] = None
    kwargs: Annotated[Dict[str, Any], OrEmpty] = {}
    action_repeat: PositiveInt = 1
    _factory_repeats: bool = PrivateAttr(False)
    _factory_renders: bool = PrivateAttr(False)

    @model_serializer(mode="wrap")
    def _given_source(self, dump: Callable[["EnvConfig"], Dict[str, Any]]) -> Dict[str, Any]:
        return {key: value for key, value in dump(self).items() if value is not None}

    @field_serializer("kwargs")
    def _plain_kwargs(self, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        # A nested spec (a factory's class or function argument) as the config gave it, {class: path, ...}.
        return class_spec.plain_value(kwargs)

    @model_validator(mode="after")
    def _one_source(self) -> "EnvConfig":
        if (self.id is None) == (self.factory is None):
            raise ValueError(f"give exactly one of id and factory, got {'neither' if self.id is None else 'both'}")
        if self.id is not None:
            self.kwargs = class_spec.check_value(self.kwargs, Dict[str, Any], "env.kwargs")
            return self
        function = class_spec.import_object(self.factory, "env.factory")
        if not callable(function):
            raise ConfigError(f"env.factory: expected a callable, got {self.factory!r}")
        where: Dict[str, Any] = {"class_path": "env.factory"}
        assert self.factory is not None  # an env has an id or a factory (checked before)
        self.kwargs, accepted = class_spec.check_arguments(function, self.factory, self.kwargs, "env.kwargs", **where)
        self._factory_repeats = accepted is not None and ACTION_REPEAT in accepted
        self._factory_renders = accepted is None or RENDER_MODE in accepted
        if self._factory_repeats and ACTION_REPEAT in self.kwargs:
            raise ConfigError(
                f"env.kwargs.{ACTION_REPEAT}: set env.{ACTION_REPEAT} instead (it is passed to the factory)"
            )
        return self

    def make(self, checked: bool = False, render_mode: Optional[str] = None) -> Any:
        """A new environment, repeating actions ``action_repeat`` times; ``checked``: a nested spec's failure is a
        ConfigError; ``render_mode`` (``"rgb_array"`` to record videos) is given to ``gymnasium.make`` or to the
        factory.

        Raises:
            ConfigError: a ``render_mode`` for a factory that takes no ``render_mode`` keyword.
        """
        kwargs = class_spec.build_value(self.kwargs, checked)
        if render_mode is not None:
            if self.id is None and not self._factory_renders:
                raise ConfigError(f"env.factory: {self.factory} takes no {RENDER_MODE}, which is needed to render")
            kwargs[RENDER_MODE] = render_mode
        if self._factory_repeats:
            kwargs[ACTION_REPEAT] = self.action_repeat
        if self.id is None:
            env = self._call_factory(kwargs, checked)
        else:
            import gymnasium

            env = gymnasium.make(self.id, **kwargs)
        if self.action_repeat > 1 and not self._factory_repeats:
            from parl.utils.action_repeat import ActionRepeat

            env = ActionRepeat(env, self.action_repeat)
        return env

    def _call_factory(self, kwargs: Dict[str, Any], checked: bool) -> Any:
        factory = class_spec.import_object(self.factory, "env.factory")
        if not checked:
            return factory(**kwargs)
        try:
            return factory(**kwargs)
        except SystemExit as exc:
            call = class_spec.exit_call(exc)
            raise class_spec.UserExitError(f"env.factory: {self.factory} called {call} while being built") from exc


class _BatchingSection(_Section):
    """What :data:`BatchingConfig` adds to its fields, which are :class:`parl.Batching`'s."""

    def resolved(self, agents: int, key_path: str, *, senders_known: bool = True) -> "_BatchingSection":
        """These settings with ``agents`` for the word ``agents``: the helpers that send at once (the
        config's agents, times the env agents on the task of a multi-agent env).

        Raises:
            ConfigError: ``min_batchsize`` above what an update joins, or, where ``senders_known``, above
                ``agents`` (a batch never holds more requests than there are senders). Before the
                environment is made, its agents per copy are not known: that check waits for them.
        """
        values = {key: agents if value == "agents" else value for key, value in self}
        joined, least = values["max_training_batchsize"] or values["max_batchsize"], values["min_batchsize"]
        limits = [(joined, "the batches joined per update")]
        if senders_known:
            limits.append((agents, "the number of agents"))
        for limit, what in limits:
            if least > limit:
                raise ConfigError(f"{key_path}.min_batchsize: expected at most {what} ({limit}), got {least}")
        return type(self)(**values)

    def batching(self) -> parl.Batching:
        """These settings (resolved) as the wrapper takes them."""
        return parl.Batching(**dict(self))


#: The config type of each type a :class:`parl.Batching` field has: sizes may be the word ``agents``.
_BATCHING_TYPES: Dict[Any, Any] = {int: BatchSize, Optional[int]: Optional[BatchSize], float: PositiveFloat}


def _batching_fields() -> Dict[str, Any]:
    hints = typing.get_type_hints(parl.Batching)
    return {f.name: (_BATCHING_TYPES[hints[f.name]], f.default) for f in fields(parl.Batching)}


#: ``tasks.<name>.batching``: the wrapper's batching, one key per field of :class:`parl.Batching` (its
#: defaults and meaning stated there once).
if typing.TYPE_CHECKING:
    BatchingConfig = _BatchingSection
else:
    BatchingConfig = create_model(
        "BatchingConfig", __base__=_BatchingSection, __doc__=_BatchingSection.__doc__, **_batching_fields()
    )


class TransformsConfig(_Section):
    """``tasks.<name>.transforms``: input and reward transforms (defaults: :class:`parl.TaskSettings`')."""

    normalize_inputs: Union[bool, Annotated[Tuple[str, ...], Strict(False)]] = _TASK_DEFAULTS["normalize_inputs"]
    input_clip: PositiveFloat = _TASK_DEFAULTS["input_clip"]
    reward_scale: PositiveFloat = _TASK_DEFAULTS["reward_scale"]
    reward_clip: Optional[PositiveFloat] = _TASK_DEFAULTS["reward_clip"]


class TaskConfig(_Section):
    """``tasks.<name>``: one ComputationTask (``algorithm`` built as ``cls(model_func, **kwargs)``), and the
    ``helper`` each agent uses for it (given ``seed=<agent seed>`` when it takes one the config does not set)."""

    model: Annotated[ClassSpec, Spec(base=parl.Model, supplied=TASK_SIZE_KEYS)]
    algorithm: Annotated[ClassSpec, Spec(base=parl.Algorithm, filled=("model_func",))]
    helper: Annotated[ClassSpec, Spec(base=parl.AgentHelper)]
    batching: BatchingConfig = Field(default_factory=BatchingConfig)
    transforms: TransformsConfig = Field(default_factory=TransformsConfig)
    max_skipped_updates: PositiveInt = _TASK_DEFAULTS["max_skipped_updates"]
    learners: PositiveInt = _TASK_DEFAULTS["learners"]
    learner_device: LearnerDevice = _TASK_DEFAULTS["learner_device"]
    _model_sizes: Dict[str, Any] = PrivateAttr(default_factory=dict)
    _stated_batching: Any = PrivateAttr(None)  # ``batching`` as stated, before the word ``agents`` is resolved

    @model_validator(mode="after")
    def _learner_gpus(self) -> "TaskConfig":
        learner_device(self.learner_device, self.learners)  # GPUs asked for and missing: one line
        return self

    @property
    def model_sizes(self) -> Dict[str, Any]:
        """The sizes the model takes from the environment's spaces that the config does not state."""
        return self._model_sizes

    def build_model(self) -> parl.Model:
        """A fresh model: the config's options and the sizes from the environment."""
        return self.model.build(extra=self.model_sizes)

    def algorithm_func(self) -> Callable[[], parl.Algorithm]:
        """A zero-argument callable building the algorithm, over a fresh model on every call."""
        return lambda: self.algorithm.build(args=(self.build_model,))


class TrainConfig(_Section):
    """``train``: training ends after ``max_env_steps`` env steps, or at an evaluation reaching ``target_return``."""

    max_env_steps: PositiveInt
    target_return: Optional[float] = None


class EvaluationConfig(_Section):
    """``evaluation``: ``episodes`` every ``every_steps`` env steps, from the start or once training returns
    reach ``start_return`` or ``start_fraction`` of the way to the target
    (:mod:`parl.experiment.config.evaluation_start`); ``final_episodes`` (None: 5 x ``episodes``) on fresh seeds
    at the end of a run; at most ``concurrency`` episodes at once
    (the evaluation agents of :mod:`parl.experiment.evaluation`)."""

    every_steps: Optional[PositiveInt] = 10_000
    episodes: PositiveInt = 10
    final_episodes: Optional[PositiveInt] = None
    concurrency: PositiveInt = EVALUATION_CONCURRENCY
    start_return: Optional[float] = None
    start_fraction: Optional[Annotated[float, Field(ge=0.0, le=1.0)]] = None
    pause_training: bool = True


class CheckpointConfig(_Section):
    """``checkpoint``: one every ``every_steps`` env steps and ``every_minutes`` minutes, the last ``keep`` kept."""

    every_steps: Optional[PositiveInt] = None
    every_minutes: Optional[PositiveFloat] = 10.0
    keep: PositiveInt = 3


class FaultsConfig(_Section):
    """``faults``: what a run survives instead of stopping (docs/configs.md)."""

    restart_agents: Annotated[int, Field(ge=0, le=1_000_000)] = 0


#: Placement options that were config keys of their own before the ``placement:`` block (deprecated: each is
#: ``placement.<its last key>`` now), with the type each was checked against then.
OLD_PLACEMENT_KEYS = {
    ("workers",): Optional[Annotated[int, Field(ge=1, le=MAX_WORKERS)]],
    ("heartbeat_timeout",): Optional[PositiveFloat],
    ("faults", "restart_workers"): bool,
}


class RobotConfig(_Section):
    """A checked robot config; :mod:`parl.experiment.config.build` turns it into a Manager."""

    name: str
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    agents: Annotated[int, Field(ge=1, le=MAX_AGENTS)] = 1
    log_dir: NonEmptyStr = Field(default_factory=lambda data: f"runs/{data['name']}")
    python_path: List[str] = []
    thread_placement: ThreadPlacement = "auto"
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    stall_seconds: Optional[PositiveFloat] = DEFAULT_STALL_SECONDS
    env: EnvConfig
    agent: Annotated[ClassSpec, Spec(parl.Agent, filled=("env",), reserved=(("seed", _AGENT_SEED),))] = Field(
        default={"class": DEFAULT_AGENT}, validate_default=True
    )
    tasks: Dict[str, TaskConfig]
    shared: Annotated[Dict[str, Dict[str, NonEmptyStr]], OrEmpty] = {}
    self_play: Optional[SelfPlayConfig] = None
    train: TrainConfig
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    faults: FaultsConfig = Field(default_factory=FaultsConfig)
    callbacks: List[Annotated[ClassSpec, Spec(base=Callback)]] = []
    _source: str = PrivateAttr("")

    @property
    def source(self) -> str:
        """The file the config came from (not a config key)."""
        return self._source

    @model_validator(mode="before")
    @classmethod
    def _old_placement_keys(cls, data: Any) -> Any:
        return fold_old_keys(data, OLD_PLACEMENT_KEYS) if isinstance(data, Mapping) else data

    @field_validator("name", mode="before")
    @classmethod
    def _run_name(cls, value: Any) -> str:
        if not isinstance(value, str) or not _RUN_NAME.match(value):
            raise ParameterError("name", "a name of letters, digits, '_', '-' and '.'", value)
        return value

    @field_validator("log_dir")
    @classmethod
    def _a_directory(cls, value: str) -> str:
        path = Path(value).resolve()
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise ValueError(f"not writable: {str(blocker)!r} is a file, not a directory")
        return value

    @field_validator("python_path", mode="before")
    @classmethod
    def _on_sys_path(cls, value: Any, info: ValidationInfo) -> List[str]:
        """Each directory, relative to the config's, checked and put in front of ``sys.path`` (the keys below
        import classes)."""
        entries = [] if value is None else [value] if isinstance(value, str) else value
        if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
            raise ParameterError("python_path", "a list of directories", value)
        directories = [str((Path((info.context or {}).get("base_dir", ".")) / entry).resolve()) for entry in entries]
        for index, directory in enumerate(directories):
            if not Path(directory).is_dir():
                raise ConfigError(f"python_path[{index}]: no such directory {directory!r}")
        sys.path[:0] = [d for d in directories if d not in sys.path]
        return directories

    @field_validator("callbacks", mode="before")
    @classmethod
    def _each_callback(cls, value: Any) -> Any:
        """Each callback resolved at its own key path (``callbacks[1].patience``)."""
        if value is None:
            return []
        if not isinstance(value, list):
            raise ParameterError("callbacks", "a list of class specs", value)
        return [resolve_spec(item, f"callbacks[{index}]", base=Callback) for index, item in enumerate(value)]

    @field_validator("tasks", mode="before")
    @classmethod
    def _each_task(cls, value: Any, info: ValidationInfo) -> Any:
        """Each task validated at its own key path, which its class specs keep."""
        if not isinstance(value, Mapping):
            return value
        if not value:
            raise ValueError("expected at least one task, got none")
        for name in value:
            if not isinstance(name, str) or not _TASK_NAME.match(name):
                raise ValueError(f"task names are letters, digits, '_' and '-', got {name!r}")
        return {name: _validated(TaskConfig, task, f"tasks.{name}", info.context or {}) for name, task in value.items()}

    @model_validator(mode="after")
    def _placement_features(self) -> "RobotConfig":
        entry = self.placement.entry
        if self.faults.restart_agents and "restart_agents" in entry.refuses:
            raise ConfigError(
                f"faults.restart_agents: placement {entry.name!r} restarts no agent (its agents end on failure), "
                f"got {self.faults.restart_agents}"
            )
        return self

    @model_validator(mode="after")
    def _self_play_tasks(self) -> "RobotConfig":
        if self.self_play is not None:
            check_self_play_config(self.self_play, self.tasks)
        return self

    @model_validator(mode="after")
    def _evaluation_start(self) -> "RobotConfig":
        try:
            self.evaluation_start()
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return self

    def evaluation_start(self) -> EvaluationStart:
        """A fresh start rule of this config's evaluations.

        Raises:
            ValueError: ``evaluation.start_return`` and ``start_fraction`` both given, or ``start_fraction``
                without ``train.target_return``.
        """
        evaluation = self.evaluation
        return EvaluationStart(
            start_return=evaluation.start_return,
            start_fraction=evaluation.start_fraction,
            target=self.train.target_return,
        )

    @model_validator(mode="after")
    def _agent_batches(self) -> "RobotConfig":
        for name, task in self.tasks.items():
            task._stated_batching = task.batching
            task.batching = task.batching.resolved(self.agents, f"tasks.{name}.batching", senders_known=False)
        return self


def _validated(model: Type[BaseModel], data: Any, key_path: str, context: Dict[str, Any]) -> Any:
    """``model`` from ``data`` found at ``key_path``; its first problem as a ConfigError."""
    try:
        return model.model_validate(data, context={**context, "key_path": key_path})
    except ValidationError as exc:
        for error in exc.errors():  # user code that exited while being loaded: the code failed, not the config
            if isinstance((error.get("ctx") or {}).get("error"), class_spec.UserExitError):
                raise error["ctx"]["error"] from None
        raise ConfigError(class_spec.first_error(exc, model, data, key_path)) from None


def load_config(path: str, overrides: Sequence[str] = ()) -> RobotConfig:
    """The checked config of the YAML file ``path``, with ``overrides`` (``key.path=value``) applied.

    Raises:
        ConfigError: ``<path>: no such file``, ``<path>:<line>: <YAML problem>`` or ``<key path>: <problem>``.
    """
    return config_loader(path)(overrides)


#: ``load(overrides)``: a config file's checked config with ``overrides`` applied (:func:`config_loader`).
ConfigLoader = Callable[[Sequence[str]], "RobotConfig"]


def config_loader(path: str) -> ConfigLoader:
    """What :func:`load_config` does, with the YAML file ``path`` read and parsed once, for many loads of
    one file with different overrides (a sweep's values and trials); each load raises as
    :func:`load_config` does.

    Raises:
        ConfigError: ``<path>: no such file`` or ``<path>:<line>: <YAML problem>``.
    """
    data = read_config_file(path)
    base_dir = str(Path(path).resolve().parent)

    def load(overrides: Sequence[str] = ()) -> RobotConfig:
        return parse_config(apply_overrides(data, overrides), source=str(path), base_dir=base_dir)

    return load


def parse_config(data: Mapping[str, Any], *, source: str, base_dir: str) -> RobotConfig:
    """The checked config of ``data`` (a parsed YAML file) from ``source`` (its stem is the default ``name``);
    relative ``python_path`` entries are relative to ``base_dir``.

    Raises:
        ConfigError: the first problem found, on one line starting with its key path.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of config keys, got a {type(data).__name__}")
    config = _validated(RobotConfig, {"name": Path(source).stem, **data}, "", {"base_dir": base_dir})
    config._source = source
    env = config.env
    where = "env.id" if env.id is not None else "env.factory"
    spaces = spaces_by_task(
        lambda: env.make(checked=True), f"env {env.id or env.factory}", where, config.agent, list(config.tasks)
    )
    for name, task in config.tasks.items():
        task._model_sizes = spaces[name].model_sizes(task.model)
        # The word agents: every helper that sends at once, each env copy's agents on the task.
        senders = getattr(spaces[name], "senders", 1)
        task.batching = task._stated_batching.resolved(config.agents * senders, f"tasks.{name}.batching")
    _check_by_building(config, spaces)
    return config


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> Dict[str, Any]:
    """A copy of ``data`` with each override ``key.path=value`` set, the value parsed as YAML (``seed=3``,
    ``train.target_return=null``); a key outside the schema is an error naming it (options of class specs
    are checked later, against the class).

    Raises:
        ConfigError: ``<key path>: <problem> (in -o <override>)``.
    """
    result = _unshared(dict(data))
    for text in overrides:
        key, sep, raw = text.partition("=")
        keys = key.strip().split(".")
        if not sep or not all(keys):
            raise ConfigError(f"{text}: expected an override key.path=value")
        _set(result, keys, parse_value(raw, key, f" (in -o {text})"), text)
    return result


def _unshared(node: Any) -> Any:
    """A copy of YAML data in which no two places share a mapping or list: a YAML alias (``*model``)
    loads as the anchor's own object, and an override of one place must not change the others
    (``copy.deepcopy`` keeps such sharing)."""
    if isinstance(node, dict):
        return {key: _unshared(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_unshared(value) for value in node]
    return copy.deepcopy(node)


def _set(node: Dict[str, Any], keys: List[str], value: Any, text: str) -> None:
    """``node[k0][k1]...[kn] = value``, creating mappings on the way, along the schema: a section's keys are its
    fields, a task must exist, anything goes in a class spec, ``env.kwargs`` and ``shared``."""
    schema: Any = RobotConfig
    for depth, key in enumerate(keys):
        path = ".".join(keys[: depth + 1])
        if typing.get_origin(schema) is dict:  # tasks
            if key not in node:
                raise ConfigError(f"{path}: no such task; tasks are {sorted(node)} (in -o {text})")
            schema = typing.get_args(schema)[1]
        elif schema is not None and key not in schema.model_fields:
            if not _free_key(schema, keys[: depth + 1]):
                raise ConfigError(
                    f"{path}: unknown key{class_spec.did_you_mean(key, list(schema.model_fields))} (in -o {text})"
                )
            schema = None
        elif schema is not None:
            hint = schema.model_fields[key].annotation
            item = typing.get_args(hint)[-1] if typing.get_origin(hint) is dict else hint
            schema = hint if isinstance(item, type) and issubclass(item, BaseModel) else None
        if depth == len(keys) - 1:
            node[key] = value
            return
        if node.get(key) is None:
            node[key] = {}
        if isinstance(node[key], str) and schema is PlacementConfig:  # a name alone: the block of that name
            node[key] = {"name": node[key]}
        if not isinstance(node[key], dict):
            raise ConfigError(
                f"{path}: expected a mapping to set {keys[depth + 1]!r} in, got {node[key]!r} (in -o {text})"
            )
        node = node[key]


def _free_key(schema: Type[BaseModel], keys: List[str]) -> bool:
    """Whether the key path ``keys``, not a field of ``schema``, may still be set: a placement option (the
    ``placement`` block takes its placement's keys) or a placement key of before that block."""
    if schema.model_config.get("extra") == "allow":
        return True
    return tuple(keys) in OLD_PLACEMENT_KEYS or (len(keys) == 1 and is_old_section(keys[0]))


def _check_by_building(config: RobotConfig, spaces: Mapping[str, EnvSpaces]) -> None:
    """Build once what the classes check themselves, and check the first model of each task the agent
    plays (that a GymAgent plays, those a PettingZooAgent maps agents to) against its spaces; nothing
    built is kept."""
    built = {}
    played = _played_tasks(config.agent, spaces)
    for name, task in config.tasks.items():
        models: List[parl.Model] = []

        def model_func(task: TaskConfig = task, models: List[parl.Model] = models) -> parl.Model:
            models.append(build_checked(task.model, extra=task.model_sizes))
            return models[-1]

        algorithm = build_checked(task.algorithm, args=(model_func,))
        if models and name in played:
            spaces[name].check_model(models[0], task.model, task.model_sizes)
        try:
            built[name] = parl.ComputationTask(name, algorithm, **dict(task.transforms))
        except Exception as exc:  # noqa: BLE001 - reported on one line
            raise ConfigError(f"tasks.{name}.transforms: {one_line(exc)}") from exc
        build_checked(task.helper, extra=task.helper.defaults_for({"seed": config.seed * 1000}))
    try:
        share_parts(built, config.shared)  # its messages start with shared.<group>
    except ValueError as exc:
        raise ConfigError(one_line(exc)) from exc
    class_spec.build_value(config.agent.kwargs, checked=True)
    _check_observation_inputs(config.agent)
    for callback in config.callbacks:
        build_checked(callback)


def _played_tasks(agent: ClassSpec, spaces: Mapping[str, EnvSpaces]) -> List[str]:
    """The tasks whose models the environment's spaces must fit: the one a :class:`~parl.utils.GymAgent` plays,
    those a :class:`~parl.multiagent.PettingZooAgent` maps environment agents to; none for other agents, whose
    tasks may see anything."""
    from parl.multiagent.agent import PettingZooAgent

    if isinstance(agent.cls, type) and issubclass(agent.cls, PettingZooAgent):
        return [name for name, task_spaces in spaces.items() if task_spaces.observation_space is not None]
    played = _played_task(agent)
    return [] if played is None else [played]


#: The agent keyword that names a function mapping observations to inputs (:class:`~parl.utils.GymAgent`'s).
OBSERVATION_INPUTS = "observation_inputs"


def _check_observation_inputs(agent: ClassSpec) -> None:
    """The agent's ``observation_inputs``, when it is a dotted path, imported as the agent will import it.

    Raises:
        ConfigError: ``agent.observation_inputs: cannot import ...``, or what it names is not callable.
    """
    path = agent.kwargs.get(OBSERVATION_INPUTS)
    if not isinstance(path, str):
        return
    key_path = f"{agent.key_path}.{OBSERVATION_INPUTS}"
    if not callable(class_spec.import_object(path, key_path)):
        raise ConfigError(f"{key_path}: expected a function, got {path!r}, which is not callable")


def _played_task(agent: ClassSpec) -> Optional[str]:
    """The task a :class:`~parl.utils.GymAgent` plays (its ``task`` option); None for other agents, whose tasks
    may see anything."""
    from parl.utils.gym_agent import GymAgent

    if not (isinstance(agent.cls, type) and issubclass(agent.cls, GymAgent)):
        return None
    parameter = inspect.signature(agent.cls).parameters.get("task")
    default = None if parameter is None or parameter.default is parameter.empty else parameter.default
    return agent.kwargs.get("task", default)
