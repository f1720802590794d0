"""Robot config files as YAML data, every problem a one-line ConfigError naming the file (and line).

    data = read_config_file("configs/ppo_cartpole.yaml")   # a mapping of config keys
    value = parse_value("[32, 32]", "tasks.RL.model.hidden_sizes")     # a list; a YAML problem names the key

Files are read with a ``yaml.SafeLoader`` that also reads ``1e-3`` as a float (as Python and YAML 1.2
do; YAML 1.1 wants ``1.0e-3``) and rejects a key given twice in one mapping. Before anything is built,
YAML that could not be a config is refused: a file over :data:`MAX_BYTES`, nesting deeper than
:data:`MAX_DEPTH`, aliases that expand past :data:`MAX_VALUES` values (a "billion laughs") or that refer
to a mapping or list holding them (docs/configs.md, "YAML").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping

import yaml

from parl.experiment.config.class_spec import ConfigError, one_line

#: The largest config file read, in bytes.
MAX_BYTES = 1 << 20
#: The deepest nesting of mappings and lists.
MAX_DEPTH = 32
#: The most values (mappings, lists, scalars) a file or override holds once its aliases are expanded.
MAX_VALUES = 100_000


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` with ``1e-3`` a float and duplicate keys rejected."""

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


def read_config_file(path: str) -> Mapping[str, Any]:
    """The mapping of config keys in the YAML file ``path``.

    Raises:
        ConfigError: ``<path>: no such file``, ``<path>:<line>: <YAML problem>``, an empty file or one
            that holds no mapping.
    """
    try:
        if Path(path).stat().st_size > MAX_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_BYTES} bytes; no config is")
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or one_line(exc)}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        _check_shape(text, path)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark, problem = exc.problem_mark or exc.context_mark, exc.problem or exc.context or "invalid YAML"
        raise ConfigError(f"{path}:{mark.line + 1}: {problem}" if mark else f"{path}: {problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {one_line(exc)}") from None
    if data is None:
        raise ConfigError(f"{path}: the file is empty")
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of config keys, got a {type(data).__name__}")
    return data


def parse_value(raw: str, key_path: str, origin: str = "") -> Any:
    """The YAML value ``raw`` (``3``, ``1e-3``, ``null``, ``[32, 32]``) given for ``key_path``.

    Raises:
        ConfigError: ``<key_path>: cannot parse '<raw>': <YAML problem><origin>``.
    """
    try:
        _check_shape(raw, f"-o {key_path}", key_path)
        return yaml.load(raw, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or one_line(exc)
        raise ConfigError(f"{key_path}: cannot parse {raw!r}: {problem}{origin}") from None


def split_values(raw: str, key_path: str, origin: str = "") -> List[str]:
    """The comma-separated YAML values of ``raw`` (``0.1,0.2``, ``[32, 32],[64, 64]``, ``"a,b",c``) as
    typed, each one text that :func:`parse_value` reads: ``raw`` is read as the YAML flow sequence
    ``[raw]``, so commas inside brackets or quotes do not split.

    Raises:
        ConfigError: ``<key_path>: cannot parse '<raw>': <YAML problem><origin>``, or no value given.
    """
    text = f"[{raw}]"
    try:
        _check_shape(text, f"-o {key_path}", key_path)
        node = yaml.compose(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or one_line(exc)
        raise ConfigError(f"{key_path}: cannot parse {raw!r}: {problem}{origin}") from None
    values = [text[item.start_mark.index : item.end_mark.index] for item in node.value]
    if not values:
        raise ConfigError(f"{key_path}: expected at least one value, got {raw!r}{origin}")
    return values


def _check_shape(text: str, source: str, key_path: str = "") -> None:
    """Refuse ``text`` (found at ``key_path``) when it nests deeper than MAX_DEPTH or its aliases expand past
    MAX_VALUES values or into themselves, from its YAML events (nothing is built; the parser keeps no stack)."""
    expanded: Dict[str, int] = {}  # anchor -> values under its node, aliases expanded
    frames: List[Dict[str, Any]] = []  # the open mappings and lists, outermost first
    for event in _events(text):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(frames) == MAX_DEPTH:
                _refuse(f"nested deeper than {MAX_DEPTH} mappings and lists", frames, event, source, key_path)
            mapping = isinstance(event, yaml.MappingStartEvent)
            frames.append({"anchor": event.anchor, "values": 1, "mapping": mapping, "nodes": 0, "key": None})
            continue
        if isinstance(event, yaml.AliasEvent):
            if any(frame["anchor"] == event.anchor for frame in frames):
                _refuse(
                    f"alias *{event.anchor} refers to a mapping or list that holds it", frames, event, source, key_path
                )
            anchor, values = None, expanded.get(event.anchor, 1)  # an undefined alias: the loader says so
        elif isinstance(event, yaml.ScalarEvent):
            anchor, values = event.anchor, 1
        elif isinstance(event, yaml.CollectionEndEvent):
            closed = frames.pop()
            anchor, values = closed["anchor"], closed["values"]
        else:
            continue
        if anchor is not None:
            expanded[anchor] = values
        if frames:
            parent = frames[-1]
            if parent["mapping"] and parent["nodes"] % 2 == 0:
                parent["key"] = event.value if isinstance(event, yaml.ScalarEvent) else "?"
            if parent["values"] + values > MAX_VALUES:
                _refuse(f"aliases expand to more than {MAX_VALUES} values", frames, event, source, key_path)
            parent["nodes"] += 1
            parent["values"] += values


def _refuse(problem: str, frames: List[Dict[str, Any]], event: yaml.Event, source: str, key_path: str) -> None:
    """Raise ``<key path>: <problem> (<source>:<line>)``, the key path of the node ``event`` is in."""
    for frame in frames:
        if not frame["mapping"]:
            key_path += f"[{frame['nodes']}]"
        elif frame["nodes"] % 2 == 1:
            key_path += f".{frame['key']}" if key_path else str(frame["key"])
    where = f"{source}:{event.start_mark.line + 1}"
    raise ConfigError(f"{key_path}: {problem} ({where})" if key_path else f"{where}: {problem}")


def _events(text: str) -> Iterable[yaml.Event]:
    """The YAML events of ``text``, from libyaml's parser where PyYAML has it (ten times faster); text it
    cannot parse goes to PyYAML's own, whose messages the loader gives."""
    try:
        return list(yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", _Loader)))
    except yaml.YAMLError:
        return yaml.parse(text, Loader=_Loader)
