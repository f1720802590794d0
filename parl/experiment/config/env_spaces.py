"""The spaces of a robot config's environment: the model sizes they declare, and a built model checked against them.

    spaces = EnvSpaces.of(lambda: config.env.make(), "env CartPole-v1")   # one environment, closed at once
    sizes = spaces.model_sizes(task.model)       # {"obs_dim": 4, "num_actions": 2}: what the config leaves out
    spaces.check_model(model, task.model, sizes)  # a ConfigError at the size key that does not fit

docs/configs.md ("Sizes from the environment", "The spec check") describes both.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Mapping

import parl
from parl.experiment.config.class_spec import ClassSpec, ConfigError, one_line
from parl.utils.spaces import (
    ACTION_SIZE_KEYS,
    OBSERVATION_SIZE_KEYS,
    action_sizes,
    describe_space,
    observation_sizes,
    spec_mismatch,
)

#: Every size keyword a model may take from the spaces.
SIZE_KEYS = OBSERVATION_SIZE_KEYS + ACTION_SIZE_KEYS


@dataclass
class EnvSpaces:
    """The spaces of the config's environment and the model sizes they declare.

    Attributes:
        name: the environment in messages (``"env CartPole-v1"``).
        sizes: size keyword -> value, for the sizes the spaces declare (``observation_shapes`` and
            ``observation_dtypes``, mappings by input name, for a Dict or Tuple observation space).
        unavailable: size keyword -> why the environment gives none.
    """

    name: str
    observation_space: Any
    action_space: Any
    sizes: Dict[str, Any]
    unavailable: Dict[str, str]

    @classmethod
    def of(cls, make_env: Callable[[], Any], name: str, key_path: str = "env") -> "EnvSpaces":
        """The spaces of one environment from ``make_env()`` (configured at ``key_path``), closed at once.

        Raises:
            ConfigError: ``env.id: ...`` for an id gymnasium does not know, ``<key_path>: ...`` for what
                has no spaces, ``env: ...`` for any other failure.
        """
        instance = made_env(make_env)
        if not (hasattr(instance, "observation_space") and hasattr(instance, "action_space")):
            raise ConfigError(f"{key_path}: expected an environment (with spaces), got {instance!r}"[:300])
        try:
            observation_space, action_space = instance.observation_space, instance.action_space
        finally:
            close_env(instance)
        return cls.from_spaces(name, observation_space, action_space)

    @classmethod
    def from_spaces(cls, name: str, observation_space: Any, action_space: Any) -> "EnvSpaces":
        """The model sizes ``observation_space`` and ``action_space`` declare (``name`` names them in errors)."""
        sizes: Dict[str, Any] = {}
        unavailable: Dict[str, str] = {}
        for keys, function, space, word in (
            (OBSERVATION_SIZE_KEYS, observation_sizes, observation_space, "observation"),
            (ACTION_SIZE_KEYS, action_sizes, action_space, "action"),
        ):
            try:
                sizes.update(function(space))
            except ValueError as exc:
                unavailable.update(dict.fromkeys(keys, str(exc)))
            for key in keys:
                if key not in sizes and key not in unavailable:
                    unavailable[key] = f"its {word} space is {describe_space(space)}"
        return cls(name, observation_space, action_space, sizes, unavailable)

    def model_sizes(self, spec: ClassSpec) -> Dict[str, Any]:
        """The sizes ``spec``'s class takes that its config leaves out; a size group the config
        states any of (``num_actions`` or ``action_dim``) is left to the config.

        Raises:
            ConfigError: the class requires a size the environment does not declare.
        """
        required = required_keywords(spec.cls)
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

    def check_model(self, model: parl.Model, spec: ClassSpec, sizes: Mapping[str, Any]) -> None:
        """Raise a ConfigError naming the config key when ``model``'s observation inputs (``obs``, or one per
        part of a Dict or Tuple space) or ``action`` spec does not fit the spaces."""
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
        raise ConfigError(f"{spec.key_path}: {mismatch.model_side} does not match {self.name}'s {mismatch.env_side}")


def required_keywords(cls: Callable[..., Any]) -> FrozenSet[str]:
    """The keyword arguments of ``cls`` without a default (none when it has no signature)."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in params if p.kind in kinds and p.default is p.empty)


def close_env(instance: Any) -> None:
    """``instance.close()`` where it has one."""
    close = getattr(instance, "close", None)
    if callable(close):
        close()


def made_env(make_env: Callable[[], Any]) -> Any:
    """``make_env()``, its failures as ConfigErrors."""
    import gymnasium

    try:
        return make_env()
    except ConfigError:
        raise
    except (gymnasium.error.UnregisteredEnv, gymnasium.error.DeprecatedEnv) as exc:
        raise ConfigError(f"env.id: {one_line(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - any failure to make the environment is reported on one line
        raise ConfigError(f"env: {one_line(exc)}") from exc
