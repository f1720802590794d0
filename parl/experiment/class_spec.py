"""Class specs: ``{class: package.module.Name, <keyword arguments>}`` in a robot config, resolved and built.

    spec = resolve_spec({"class": "parl.utils.LinearSchedule", "start": 1.0, "end": 0.02, "steps": 1000},
                        "agent.epsilon")
    schedule = spec.build()          # LinearSchedule(start=1.0, end=0.02, steps=1000), fresh on every call

Resolving imports the class (or function), checks every keyword argument
against its signature (unknown options, missing required ones) and its type
hints (``typing.get_type_hints``: Optional, Union, tuple, Sequence, Mapping,
Literal, bool apart from int), turns lists into tuples where a tuple is
expected, and resolves nested specs: a mapping with a ``class`` key anywhere
among the arguments. Every problem raises :class:`ConfigError`, one line that
starts with the key path of the bad value.
"""

from __future__ import annotations

import collections.abc
import difflib
import importlib
import inspect
import numbers
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from parl.validation import ParameterError

#: The key that makes a mapping a class spec.
CLASS_KEY = "class"


class ConfigError(ValueError):
    """A robot config problem: one line that starts with the key path, e.g.
    ``tasks.RL.algorithm.gamma: expected a number in [0.0, 1.0], got 1.5``."""


@dataclass
class ClassSpec:
    """A resolved class spec.

    Attributes:
        key_path: where the spec sits in the config (``"tasks.RL.model"``).
        import_path: the ``class`` value as written (``"parl.models.MLPActorCritic"``).
        cls: the imported class or function.
        kwargs: the checked keyword arguments; nested specs are ClassSpec objects.
        accepted: keywords the class takes (None: any, it has ``**kwargs``).
    """

    key_path: str
    import_path: str
    cls: Callable[..., Any]
    kwargs: Dict[str, Any]
    accepted: Optional[FrozenSet[str]] = None

    def accepts(self, keyword: str) -> bool:
        """Whether the class takes ``keyword`` as a keyword argument."""
        return self.accepted is None or keyword in self.accepted

    def defaults_for(self, values: Mapping[str, Any]) -> Dict[str, Any]:
        """Those of ``values`` that the class takes and the config does not give (``{"seed": 3}`` for a
        helper that takes ``seed`` when its spec sets none)."""
        return {k: v for k, v in values.items() if self.accepts(k) and k not in self.kwargs}

    def build(self, args: Sequence[Any] = (), extra: Optional[Mapping[str, Any]] = None) -> Any:
        """``cls(*args, **kwargs, **extra)`` with nested specs built afresh."""
        return _build(self, args, extra, checked=False)

    def to_dict(self) -> Dict[str, Any]:
        """The spec as plain YAML data: ``{"class": import_path, **kwargs}``."""
        return {CLASS_KEY: self.import_path, **{k: plain_value(v) for k, v in self.kwargs.items()}}


def build_checked(spec: ClassSpec, args: Sequence[Any] = (), extra: Optional[Mapping[str, Any]] = None) -> Any:
    """:meth:`ClassSpec.build`, with what the classes raise turned into ConfigErrors.

    A :class:`~parl.validation.ParameterError` about one of the
    class's keywords becomes ``<key path>.<keyword>: expected <expected>, got
    <value>``; any other exception ``<key path>: <message>``.
    """
    return _build(spec, args, extra, checked=True)


def build_value(value: Any, checked: bool = False) -> Any:
    """``value`` with every nested ClassSpec built (fresh lists, tuples and dicts around them)."""
    if isinstance(value, ClassSpec):
        return _build(value, (), None, checked)
    if isinstance(value, tuple):
        return tuple(build_value(v, checked) for v in value)
    if isinstance(value, list):
        return [build_value(v, checked) for v in value]
    if isinstance(value, dict):
        return {k: build_value(v, checked) for k, v in value.items()}
    return value


def plain_value(value: Any) -> Any:
    """``value`` as plain YAML data: specs as mappings, tuples as lists."""
    if isinstance(value, ClassSpec):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, dict):
        return {k: plain_value(v) for k, v in value.items()}
    return value


def _build(spec: ClassSpec, args: Sequence[Any], extra: Optional[Mapping[str, Any]], checked: bool) -> Any:
    kwargs = {k: build_value(v, checked) for k, v in spec.kwargs.items()}
    kwargs.update(extra or {})
    if not checked:
        return spec.cls(*args, **kwargs)
    try:
        return spec.cls(*args, **kwargs)
    except ConfigError:
        raise
    except ParameterError as exc:
        if exc.name in kwargs or (spec.accepted is not None and exc.name in spec.accepted):
            raise ConfigError(f"{spec.key_path}.{exc.name}: expected {exc.expected}, got {exc.value!r}") from exc
        raise ConfigError(f"{spec.key_path}: {one_line(exc)}") from exc
    except Exception as exc:  # noqa: BLE001 - any failure of a user class is reported on one line
        raise ConfigError(f"{spec.key_path}: {one_line(exc)}") from exc


def one_line(exc: BaseException) -> str:
    """The exception's message on one line; the type name is kept unless it is a ValueError."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = "; ".join(lines) or type(exc).__name__
    return text if isinstance(exc, ValueError) or not lines else f"{type(exc).__name__}: {text}"


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``choices`` (difflib), or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def import_object(import_path: object, key_path: str) -> Any:
    """The object named ``package.module.Name`` (attributes of attributes allowed).

    Raises:
        ConfigError: ``<key_path>: cannot import '<import_path>': <why>``.
    """
    if not isinstance(import_path, str):
        raise ConfigError(f"{key_path}: expected an import path package.module.Name, got {import_path!r}")
    parts = import_path.split(".")
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise ConfigError(f"{key_path}: cannot import {import_path!r}: expected a dotted path package.module.Name")
    module = None
    for end in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:end])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
                continue  # this prefix is not a module: try a shorter one
            raise ConfigError(f"{key_path}: cannot import {import_path!r}: {one_line(exc)}") from exc
        except Exception as exc:  # noqa: BLE001 - the module itself fails to import
            raise ConfigError(f"{key_path}: cannot import {import_path!r}: {one_line(exc)}") from exc
        break
    if module is None:
        raise ConfigError(f"{key_path}: cannot import {import_path!r}: no module named {parts[0]!r}")
    obj, owner = module, module_name
    for attribute in parts[end:]:
        if not hasattr(obj, attribute):
            names = [n for n in dir(obj) if not n.startswith("_")]
            raise ConfigError(
                f"{key_path}: cannot import {import_path!r}: {owner!r} has no attribute {attribute!r}"
                f"{did_you_mean(attribute, names)}"
            )
        obj, owner = getattr(obj, attribute), f"{owner}.{attribute}"
    return obj


def resolve_spec(
    data: object,
    key_path: str,
    *,
    base: Optional[type] = None,
    filled: Sequence[str] = (),
    reserved: Optional[Mapping[str, str]] = None,
    supplied: Sequence[str] = (),
) -> ClassSpec:
    """The checked ClassSpec of the mapping ``data`` found at ``key_path``.

    Args:
        base: the class must be a subclass of this.
        filled: names of the leading positional arguments the builder passes (an
            algorithm's ``model_func``, an agent's ``env``); a config cannot give them.
        reserved: keywords the builder passes, each with why (an agent's ``seed``);
            the class must accept them and a config cannot give them.
        supplied: keywords the builder may fill when the config gives none (a model's sizes,
            from the environment's spaces); a required one the config leaves out is not an error here.
    """
    if not isinstance(data, Mapping) or CLASS_KEY not in data:
        raise ConfigError(f"{key_path}: expected a mapping with a {CLASS_KEY!r} key, got {data!r}")
    import_path = data[CLASS_KEY]
    cls = import_object(import_path, f"{key_path}.{CLASS_KEY}")
    if base is not None and not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConfigError(
            f"{key_path}.{CLASS_KEY}: expected a subclass of {base.__module__.split('.')[0]}.{base.__name__}, "
            f"got {import_path!r}"
        )
    if not callable(cls):
        raise ConfigError(f"{key_path}.{CLASS_KEY}: expected a class or function, got {import_path!r}")
    kwargs = {k: v for k, v in data.items() if k != CLASS_KEY}
    converted, accepted = check_arguments(
        cls, import_path, kwargs, key_path, filled=filled, reserved=reserved, supplied=supplied
    )
    return ClassSpec(key_path, import_path, cls, converted, accepted)


def check_arguments(
    target: Callable[..., Any],
    import_path: str,
    kwargs: Mapping[object, Any],
    key_path: str,
    *,
    filled: Sequence[str] = (),
    reserved: Optional[Mapping[str, str]] = None,
    class_path: Optional[str] = None,
    supplied: Sequence[str] = (),
) -> Tuple[Dict[str, Any], Optional[FrozenSet[str]]]:
    """``kwargs`` checked against ``target``'s signature and type hints, and the keywords it accepts.

    ``filled``, ``reserved`` and ``supplied`` are as in :func:`resolve_spec`; problems with the class itself are
    reported at ``class_path`` (default ``<key_path>.class``).

    Returns:
        (converted keyword arguments, accepted keywords or None when it takes ``**kwargs``).
    """
    class_path = class_path or f"{key_path}.{CLASS_KEY}"
    reserved = reserved or {}
    params = _parameters(target)
    hints = _type_hints(target)
    for key in kwargs:
        if not isinstance(key, str):
            raise ConfigError(f"{key_path}: keys must be strings, got {key!r}")
    if params is None:  # no signature to check against (a builtin)
        return {k: resolve_value(v, Any, f"{key_path}.{k}") for k, v in kwargs.items()}, None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < len(filled) and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise ConfigError(f"{class_path}: {import_path} must take {', '.join(filled)} as its first positional argument")
    params = [p for p in params if p not in positional[: len(filled)]]
    keywords = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    any_keyword = any(p.kind == p.VAR_KEYWORD for p in params)
    accepted = frozenset(p.name for p in keywords)
    for name, why in reserved.items():
        if name in kwargs:
            raise ConfigError(f"{key_path}.{name}: not an option here: {why}")
        if name not in accepted and not any_keyword:
            raise ConfigError(f"{class_path}: {import_path} must accept the keyword {name!r} ({why})")
    for p in params:
        if p.kind == p.POSITIONAL_ONLY and p.default is p.empty:
            raise ConfigError(
                f"{class_path}: {import_path} needs the positional argument {p.name!r}, which a config cannot give"
            )
    options = sorted(accepted - set(reserved))
    for key in kwargs:
        if key not in accepted and not any_keyword:
            raise ConfigError(
                f"{key_path}.{key}: unknown option of {import_path}{did_you_mean(key, options)} (options: "
                f"{', '.join(options) or 'none'})"
            )
    for p in keywords:
        if p.default is p.empty and p.name not in kwargs and p.name not in reserved and p.name not in supplied:
            raise ConfigError(f"{key_path}.{p.name}: missing, required by {import_path}")
    converted = {k: resolve_value(v, hints.get(k, Any), f"{key_path}.{k}") for k, v in kwargs.items()}
    return converted, None if any_keyword else accepted


def resolve_value(value: Any, hint: Any, key_path: str) -> Any:
    """``value`` checked against the type hint ``hint`` and converted (lists to tuples where a
    tuple is expected, ints to floats where a float is); nested specs resolved.

    Raises:
        ConfigError: ``<key_path>: expected <what the hint asks for>, got <value>``.
    """
    if isinstance(value, Mapping) and CLASS_KEY in value:
        spec = resolve_spec(value, key_path)
        if isinstance(hint, type) and hint is not object and isinstance(spec.cls, type):
            if not issubclass(spec.cls, hint):
                raise ConfigError(f"{key_path}: expected {describe(hint)}, got {spec.import_path}")
        return spec
    converted = _convert(value, hint, key_path)
    if converted is _MISMATCH:
        raise ConfigError(f"{key_path}: expected {describe(hint)}, got {value!r}")
    return converted


_MISMATCH = object()
_UNIONS = (typing.Union, getattr(types, "UnionType", typing.Union))  # Optional[X], Union[X, Y], X | Y
_SEQUENCES = (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _convert(value: Any, hint: Any, key_path: str) -> Any:
    """The converted value, or _MISMATCH when it does not fit ``hint``."""
    if hint is Any or hint is inspect.Parameter.empty or isinstance(hint, (str, typing.ForwardRef, typing.TypeVar)):
        return _resolve_nested(value, key_path)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _UNIONS:
        for option in args:
            try:
                converted = _convert(value, option, key_path)
            except ConfigError:
                continue
            if converted is not _MISMATCH:
                return converted
        return _MISMATCH
    if origin is typing.Literal:
        return value if value in args else _MISMATCH
    if hint is type(None):
        return None if value is None else _MISMATCH
    if hint is bool:
        return value if isinstance(value, bool) else _MISMATCH
    if hint is int:
        return value if isinstance(value, int) and not isinstance(value, bool) else _MISMATCH
    if hint is float:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else _MISMATCH
    if hint is str:
        return value if isinstance(value, str) else _MISMATCH
    if hint is tuple or origin is tuple:
        return _convert_tuple(value, args, key_path)
    if hint in _SEQUENCES or origin in _SEQUENCES:
        if not isinstance(value, (list, tuple)):
            return _MISMATCH
        item = args[0] if args else Any
        return [resolve_value(v, item, f"{key_path}[{i}]") for i, v in enumerate(value)]
    if hint in _MAPPINGS or origin in _MAPPINGS:
        if not isinstance(value, Mapping):
            return _MISMATCH
        item = args[1] if len(args) == 2 else Any
        return {k: resolve_value(v, item, f"{key_path}.{k}") for k, v in value.items()}
    if hint is collections.abc.Callable or origin is collections.abc.Callable:
        return value if callable(value) else _MISMATCH
    if isinstance(hint, type):
        if hint is numbers.Real and isinstance(value, bool):
            return _MISMATCH
        return value if isinstance(value, hint) else _MISMATCH
    return _resolve_nested(value, key_path)  # a hint this check does not know: accept


def _convert_tuple(value: Any, args: Tuple[Any, ...], key_path: str) -> Any:
    if not isinstance(value, (list, tuple)):
        return _MISMATCH
    if not args or args == ((),):
        items: List[Any] = [Any] * len(value) if not args else []
    elif len(args) == 2 and args[1] is Ellipsis:
        items = [args[0]] * len(value)
    else:
        items = list(args)
    if len(items) != len(value):
        return _MISMATCH
    return tuple(resolve_value(v, h, f"{key_path}[{i}]") for i, (v, h) in enumerate(zip(value, items)))


def _resolve_nested(value: Any, key_path: str) -> Any:
    """An unchecked value with the specs inside it resolved."""
    if isinstance(value, Mapping):
        if CLASS_KEY in value:
            return resolve_spec(value, key_path)
        return {k: _resolve_nested(v, f"{key_path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_nested(v, f"{key_path}[{i}]") for i, v in enumerate(value)]
    return value


_PLURALS = {int: "integers", float: "numbers", bool: "booleans (true or false)", str: "strings"}


def describe(hint: Any) -> str:
    """What a type hint asks for, in words: ``"an integer"``, ``"a list of numbers or null"``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _UNIONS:
        others = [describe(a) for a in args if a is not type(None)]
        return " or ".join(others) + (" or null" if type(None) in args else "")
    if origin is typing.Literal:
        return f"one of {list(args)}"
    simple = {
        bool: "true or false",
        int: "an integer",
        float: "a number",
        str: "a string",
        type(None): "null",
        tuple: "a list",
    }
    for simple_hint, text in simple.items():
        if hint is simple_hint:
            return text
    if origin is tuple or hint in _SEQUENCES or origin in _SEQUENCES:
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return f"a list of {len(args)} items ({', '.join(describe(a) for a in args)})"
        item = args[0] if args else None
        if item is None or item is Any:
            return "a list"
        return f"a list of {_PLURALS.get(item, f'items each {describe(item)}')}"
    if hint in _MAPPINGS or origin in _MAPPINGS:
        return "a mapping"
    if hint is collections.abc.Callable or origin is collections.abc.Callable:
        return "a callable (a {class: ...} mapping)"
    if isinstance(hint, type):
        return f"a {hint.__module__}.{hint.__qualname__} (a {{class: ...}} mapping)"
    return str(hint)


def _parameters(target: Callable[..., Any]) -> Optional[List[inspect.Parameter]]:
    """The parameters a call of ``target`` fills (``self`` left out), or None when unknown."""
    function = target.__init__ if isinstance(target, type) else target
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    if isinstance(target, type):
        if function is object.__init__:
            return []
        params = params[1:]
    return params


def _type_hints(target: Callable[..., Any]) -> Dict[str, Any]:
    function = target.__init__ if isinstance(target, type) else target
    try:
        return typing.get_type_hints(function)
    except Exception:  # noqa: BLE001 - unresolvable hints are not checked
        return {}
