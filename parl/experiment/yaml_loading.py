"""Robot config files as YAML data, every problem a one-line ConfigError naming the file (and line).

    data = read_config_file("configs/ppo_cartpole.yaml")   # a mapping of config keys
    value = parse_value("[32, 32]", "tasks.RL.model.hidden_sizes")     # a list; a YAML problem names the key

Files are read with a ``yaml.SafeLoader`` that also reads ``1e-3`` as a float (as Python and YAML 1.2
do; YAML 1.1 wants ``1.0e-3``) and rejects a key given twice in one mapping (docs/configs.md, "YAML").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Mapping

import yaml

from parl.experiment.class_spec import ConfigError, one_line


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
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or one_line(exc)}") from None
    try:
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
        return yaml.load(raw, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or one_line(exc)
        raise ConfigError(f"{key_path}: cannot parse {raw!r}: {problem}{origin}") from None
