"""The ``placement:`` block of a robot config: a registered placement's ``name`` and its options.

    placement: cooperative                                  # a name alone: its default options
    placement: {name: processes, workers: 4, restart_workers: true}

The keys beside ``name`` are the placement's own (:mod:`parl.runtime.registry`: the fields of its
options type, or of its config form where they differ), checked by that type when the config is
loaded; nothing here knows any placement. A problem is one :class:`ConfigError` line naming the
key: ``placement.workers: expected an integer >= 1, got 0``.

The keys from before the block still load, each with a DeprecationWarning naming its new place
(:func:`fold_old_keys`): ``workers``, ``heartbeat_timeout`` and ``faults.restart_workers`` become
``placement.<key>``, and a top-level section named after a placement (``ray:``, ``rlx:``) gives its
keys to the block of that placement. A section of another placement is refused, but for a
placement with remote environments, whose section set up ``parl serve`` whatever the config's own
placement was: it is ignored then.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Tuple

from pydantic import BaseModel, ConfigDict, PrivateAttr, field_validator, model_serializer, model_validator

from parl.experiment.config.class_spec import ConfigError, check_value, did_you_mean, one_line, plain_value
from parl.moved_names import DEPRECATED_IN, deprecated
from parl.runtime import registry
from parl.validation import ParameterError, check_choice


class PlacementConfig(BaseModel):
    """``placement``: where the agents run (``parl.Manager``'s ``placement``), as the module docstring says."""

    model_config = ConfigDict(extra="allow", strict=True)

    name: str = registry.DEFAULT
    _form: Any = PrivateAttr(None)
    _options: Any = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _a_name_alone(cls, data: Any) -> Any:
        if data is None:
            return {}
        return {"name": data} if isinstance(data, str) else data

    @field_validator("name", mode="before")
    @classmethod
    def _registered(cls, value: Any) -> str:
        return check_choice("name", value, tuple(registry.names()))

    @model_validator(mode="after")
    def _checked_options(self) -> "PlacementConfig":
        entry = registry.entry(self.name)
        values = dict(self.model_extra or {})
        keys = entry.config_keys()
        for key, value in values.items():
            if key not in keys:
                hint = did_you_mean(key, keys) or (f"; its keys are {', '.join(keys)}" if keys else "; it takes none")
                raise ConfigError(f"placement.{key}: unknown key for placement {self.name!r}{hint}")
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"placement.{key}: expected a finite number, got {value!r}")
        try:
            self._form, self._options = entry.read_config(values)
        except ParameterError as exc:
            raise ConfigError(f"placement.{exc.name}: expected {exc.expected}, got {exc.value!r}") from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"placement: {one_line(exc)}") from None
        try:
            entry.available()
        except ImportError as exc:  # its message says what to install
            raise ConfigError(f"placement: {exc}") from None
        return self

    @model_serializer(mode="plain")
    def _every_key(self) -> Dict[str, Any]:
        """The block with every option, defaults included (a resolved config loads back to an equal one)."""
        return {"name": self.name, **plain_value(registry.option_values(self._form))}

    @property
    def entry(self) -> registry.Placement:
        """The placement's registry entry."""
        return registry.entry(self.name)

    @property
    def options(self) -> object:
        """The placement's options, as its runner gets them (``parl.Manager(placement=...)``)."""
        return self._options


def fold_old_keys(data: Mapping[str, Any], old_keys: Mapping[Tuple[str, ...], Any]) -> Dict[str, Any]:
    """``data`` (a whole config) with the placement keys of before the block moved into ``placement``
    (see the module docstring), one DeprecationWarning per key moved. ``old_keys``: the key paths of
    the options that were keys of their own (each now ``placement.<its last key>``), with the type
    each was checked against then (null and false: not set).

    Raises:
        ConfigError: an old key of a bad value, one that the placement does not take, or one that
            the block sets too.
    """
    data = dict(data)
    moved: List[Tuple[str, str, Any]] = []  # (old key path, option, value)
    for path, hint in old_keys.items():
        value = _pop(data, path)
        if value is not None and value is not False:
            moved.append((".".join(path), path[-1], check_value(value, hint, ".".join(path))))
    block = data.get("placement")
    block = {} if block is None else {"name": block} if isinstance(block, str) else block
    if not isinstance(block, Mapping):
        return data  # the schema says what is wrong with it
    chosen = block.get("name", registry.DEFAULT)
    for name in registry.names():
        section = data.pop(name, None)
        if section is None:
            continue
        if not isinstance(section, Mapping):
            raise ConfigError(f"{name}: expected a mapping of placement {name!r}'s options, got {section!r}")
        if name != chosen:
            if registry.entry(name).remote_environments:
                ignored = f"config key {name} (ignored with placement {chosen!r})"
                deprecated(ignored, f"placement.<key> with placement.name: {name}", DEPRECATED_IN)
                continue
            raise ConfigError(f"{name}: {name} applies to placement {name!r} only, got placement {chosen!r}")
        moved.extend((f"{name}.{key}", key, value) for key, value in section.items())
    if not moved:
        return data
    block = dict(block)
    for old, option, value in moved:
        if (
            isinstance(chosen, str)
            and chosen in registry.names()
            and option not in registry.entry(chosen).config_keys()
        ):
            takers = " or ".join(map(repr, registry.taking(option))) or "no placement"
            raise ConfigError(f"{old}: {option} applies to placement {takers} only, got placement {chosen!r}")
        if option in block:
            raise ConfigError(f"{old}: placement.{option} is set too; keep that one ({old} is deprecated)")
        block[option] = value
        deprecated(f"config key {old}", f"placement.{option}", DEPRECATED_IN)
    data["placement"] = block
    return data


def is_old_section(key: str) -> bool:
    """Whether a top-level config key is a section of before the block (named after a placement)."""
    return key in registry.names()


def _pop(data: Dict[str, Any], path: Tuple[str, ...]) -> Any:
    """Remove the key at ``path`` from ``data`` (copying the mappings on the way); its value, or None."""
    node = data
    for key in path[:-1]:
        if not isinstance(node.get(key), Mapping):
            return None
        node[key] = dict(node[key])
        node = node[key]
    return node.pop(path[-1], None)
