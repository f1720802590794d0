"""Class specs: ``{class: package.module.Name, <keyword arguments>}`` in a robot config, resolved and built.

    spec = resolve_spec({"class": "parl.utils.LinearSchedule", "start": 1.0, "end": 0.02, "steps": 1000},
                        "agent.epsilon")
    schedule = spec.build()          # LinearSchedule(start=1.0, end=0.02, steps=1000), fresh on every call

Resolving imports the class and checks the options against its signature; pydantic validates each against
its type hint, strictly (no bool for an int), taking ints for floats and lists for tuples. A mapping with a
``class`` key anywhere among the options is a nested spec. Every problem is a one-line :class:`ConfigError`
that starts with the key path; :func:`error_line` words pydantic's errors so.
"""

from __future__ import annotations

import collections.abc
import difflib
import functools
import importlib
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, cast

from pydantic import BaseModel, ConfigDict, Strict, TypeAdapter, ValidationError, ValidationInfo, WrapValidator
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, core_schema

from parl.validation import ParameterError

CLASS_KEY = "class"
#: Config values are validated strictly (no bool for an int, no text for a number, no inf or nan for a float);
#: any class may be a hint.
STRICT = ConfigDict(strict=True, allow_inf_nan=False, arbitrary_types_allowed=True)


class ConfigError(ValueError):
    """A robot config problem: one line that starts with the key path, e.g.
    ``tasks.RL.algorithm.gamma: expected a number in [0.0, 1.0], got 1.5``."""


class UserExitError(ConfigError):
    """User code (a class of the config, a module it imports, an environment factory) called ``sys.exit`` while a
    config was loaded or a robot built: ``tasks.RL.model: my_models.Model called sys.exit(0) while being built``."""


def exit_call(exc: SystemExit) -> str:
    """The call that raised ``exc``: ``sys.exit()``, ``sys.exit(3)``, ``sys.exit('no GPU')``."""
    return "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"


@dataclass(repr=False)
class ClassSpec:
    """A resolved class spec: the class (or function) at ``import_path`` with the checked ``kwargs`` (nested
    specs as ClassSpecs), found at ``key_path``; ``accepted`` are the keywords it takes (None: any)."""

    key_path: str
    import_path: str
    cls: Callable[..., Any]
    kwargs: Dict[str, Any]
    accepted: Optional[FrozenSet[str]] = None

    def accepts(self, keyword: str) -> bool:
        """Whether the class takes ``keyword`` as a keyword argument."""
        return self.accepted is None or keyword in self.accepted

    def defaults_for(self, values: Mapping[str, Any]) -> Dict[str, Any]:
        """Those of ``values`` that the class takes and the config does not give (a helper's ``seed``)."""
        return {k: v for k, v in values.items() if self.accepts(k) and k not in self.kwargs}

    def build(self, args: Sequence[Any] = (), extra: Optional[Mapping[str, Any]] = None) -> Any:
        """``cls(*args, **kwargs, **extra)`` with nested specs built afresh."""
        return _build(self, args, extra, checked=False)

    def to_dict(self) -> Dict[str, Any]:
        """The spec as plain YAML data: ``{"class": import_path, **kwargs}``."""
        return {CLASS_KEY: self.import_path, **plain_value(self.kwargs)}

    def __repr__(self) -> str:
        return f"{{class: {self.import_path}}}"


@dataclass(frozen=True)
class Spec:
    """Marks a pydantic field as a class spec (``agent: Annotated[ClassSpec, Spec(base=parl.Agent)]``), resolved
    by :func:`resolve_spec` at the validation context's ``key_path`` and the field's name."""

    base: Optional[type] = None
    filled: Tuple[str, ...] = ()
    reserved: Tuple[Tuple[str, str], ...] = ()
    supplied: Tuple[str, ...] = ()

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        dump = core_schema.plain_serializer_function_ser_schema(ClassSpec.to_dict)
        return core_schema.with_info_plain_validator_function(self._resolve, serialization=dump)

    def _resolve(self, data: Any, info: ValidationInfo) -> ClassSpec:
        if isinstance(data, ClassSpec):
            return data
        key_path = join((info.context or {}).get("key_path", ""), info.field_name)
        options: Dict[str, Any] = {"filled": self.filled, "reserved": dict(self.reserved), "supplied": self.supplied}
        return resolve_spec(data, key_path, base=self.base, **options)


def build_checked(spec: ClassSpec, args: Sequence[Any] = (), extra: Optional[Mapping[str, Any]] = None) -> Any:
    """:meth:`ClassSpec.build`, what the class raises as a ConfigError: a ParameterError about one of its
    keywords at ``<key path>.<keyword>``, anything else at ``<key path>``."""
    return _build(spec, args, extra, checked=True)


def build_value(value: Any, checked: bool = False) -> Any:
    """``value`` with every nested ClassSpec built (fresh lists, tuples and dicts around them)."""
    if isinstance(value, ClassSpec):
        return _build(value, (), None, checked)
    if isinstance(value, (list, tuple)):
        return type(value)(build_value(v, checked) for v in value)
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
    kwargs = {**build_value(spec.kwargs, checked), **(extra or {})}
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
    except SystemExit as exc:
        raise UserExitError(f"{spec.key_path}: {spec.import_path} called {exit_call(exc)} while being built") from exc
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


def join(key_path: str, key: Any) -> str:
    """The key path of ``key`` in ``key_path``: ``a.b``, ``a[0]`` for a list index, ``b`` at the top."""
    return f"{key_path}[{key}]" if isinstance(key, int) else f"{key_path}.{key}" if key_path else str(key)


def import_object(import_path: object, key_path: str) -> Any:
    """The object named ``package.module.Name`` (the longest importable module, then attributes).

    Raises:
        ConfigError: ``<key_path>: cannot import '<import_path>': <why>``.
    """
    if not isinstance(import_path, str):
        raise ConfigError(f"{key_path}: expected an import path package.module.Name, got {import_path!r}")
    parts, why = import_path.split("."), f"{key_path}: cannot import {import_path!r}"
    if len(parts) < 2 or not all(part.isidentifier() for part in parts):
        raise ConfigError(f"{why}: expected a dotted path package.module.Name")
    for end in range(len(parts) - 1, 0, -1):
        owner = ".".join(parts[:end])
        try:
            obj = importlib.import_module(owner)
            break
        except ModuleNotFoundError as exc:
            if exc.name is not None and (owner + ".").startswith(exc.name + "."):
                continue  # this prefix is not a module: try a shorter one
            raise ConfigError(f"{why}: {one_line(exc)}") from exc
        except SystemExit as exc:
            raise UserExitError(f"{key_path}: importing {owner!r} called {exit_call(exc)}") from exc
        except Exception as exc:  # noqa: BLE001 - the module itself fails to import
            raise ConfigError(f"{why}: {one_line(exc)}") from exc
    else:
        raise ConfigError(f"{why}: no module named {parts[0]!r}")
    for attribute in parts[end:]:
        if not hasattr(obj, attribute):
            close = did_you_mean(attribute, [n for n in dir(obj) if not n.startswith("_")])
            raise ConfigError(f"{why}: {owner!r} has no attribute {attribute!r}{close}")
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
        filled: the leading positional arguments the builder passes (an algorithm's ``model_func``).
        reserved: keywords the builder passes, each with why (an agent's ``seed``): the class must take them,
            a config cannot give them.
        supplied: keywords the builder may fill when the config gives none (a model's sizes).
    """
    if not isinstance(data, Mapping) or CLASS_KEY not in data:
        raise ConfigError(f"{key_path}: expected a mapping with a {CLASS_KEY!r} key, got {data!r}")
    import_path = data[CLASS_KEY]
    cls = import_object(import_path, f"{key_path}.{CLASS_KEY}")
    if base is not None and not (isinstance(cls, type) and issubclass(cls, base)):
        expected = f"{base.__module__.split('.')[0]}.{base.__name__}"
        raise ConfigError(f"{key_path}.{CLASS_KEY}: expected a subclass of {expected}, got {import_path!r}")
    if not callable(cls):
        raise ConfigError(f"{key_path}.{CLASS_KEY}: expected a class or function, got {import_path!r}")
    kwargs = {k: v for k, v in data.items() if k != CLASS_KEY}
    options: Dict[str, Any] = {"filled": filled, "reserved": reserved, "supplied": supplied}
    return ClassSpec(key_path, import_path, cls, *check_arguments(cls, import_path, kwargs, key_path, **options))


def check_arguments(
    target: Callable[..., Any],
    import_path: str,
    kwargs: Mapping[Any, Any],
    key_path: str,
    *,
    filled: Sequence[str] = (),
    reserved: Optional[Mapping[str, str]] = None,
    class_path: Optional[str] = None,
    supplied: Sequence[str] = (),
) -> Tuple[Dict[str, Any], Optional[FrozenSet[str]]]:
    """``kwargs`` checked against ``target``'s signature and type hints, and the keywords it accepts (None:
    any); the rest as in :func:`resolve_spec`, problems of the class itself at ``class_path`` (``<key_path>.class``)."""
    class_path, reserved = class_path or f"{key_path}.{CLASS_KEY}", reserved or {}
    for key in kwargs:
        if not isinstance(key, str):
            raise ConfigError(f"{key_path}: keys must be strings, got {key!r}")
    named = cast(Mapping[str, Any], kwargs)  # every key a string, as just checked
    params, hints = _signature(target)
    if params is None:  # no signature to check against (a builtin)
        return {k: check_value(v, Any, f"{key_path}.{k}") for k, v in named.items()}, None
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) < len(filled) and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise ConfigError(f"{class_path}: {import_path} must take {', '.join(filled)} as its first positional argument")
    params = [p for p in params if p not in positional[: len(filled)]]
    keywords = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    any_keyword, accepted = any(p.kind == p.VAR_KEYWORD for p in params), frozenset(p.name for p in keywords)
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
    for key in named:
        if key not in accepted and not any_keyword:
            close = did_you_mean(key, options)
            raise ConfigError(
                f"{key_path}.{key}: unknown option of {import_path}{close} (options: {', '.join(options) or 'none'})"
            )
    for p in keywords:
        if p.default is p.empty and p.name not in kwargs and p.name not in reserved and p.name not in supplied:
            raise ConfigError(f"{key_path}.{p.name}: missing, required by {import_path}")
    checked = {k: check_value(v, hints.get(k, Any), f"{key_path}.{k}") for k, v in named.items()}
    return checked, None if any_keyword else accepted


def _signature(target: Callable[..., Any]) -> Tuple[Optional[List[inspect.Parameter]], Dict[str, Any]]:
    """The parameters a call of ``target`` fills (``self`` left out; None when unknown), and their type hints."""
    function = cast(Any, target).__init__ if isinstance(target, type) else target
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None, {}
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception:  # noqa: BLE001 - unresolvable hints are not checked
        hints = {}
    if isinstance(target, type):
        params = [] if function is object.__init__ else params[1:]
    return params, hints


def check_value(value: Any, hint: Any, key_path: str) -> Any:
    """``value`` with its nested specs resolved, validated against the type hint ``hint`` (a spec stands for
    an instance of its class; a hint pydantic cannot check accepts anything).

    Raises:
        ConfigError: ``<key_path>: expected <what the hint asks for>, got <value>``.
    """
    value = _resolve_nested(value, key_path)
    try:
        adapter = _adapter(hint)
    except Exception:  # noqa: BLE001 - a hint pydantic cannot check (a forward reference) or cache: accepted
        return value
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise ConfigError(first_error(exc, hint, value, key_path)) from None


@functools.lru_cache(maxsize=None)
def _adapter(hint: Any) -> TypeAdapter:
    return TypeAdapter(_lenient(hint), config=STRICT)


_UNIONS = (typing.Union, getattr(types, "UnionType", typing.Union))  # Optional[X], Union[X, Y], X | Y
_CALLABLE = collections.abc.Callable


def _lenient(hint: Any) -> Any:
    """``hint`` for pydantic: a list taken for a tuple, a ClassSpec for an instance of a class or a callable."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (Any, bool, int, float, str, type(None), list, dict) or origin in (typing.Literal, Annotated):
        return hint
    if hint is tuple or origin is tuple:
        items = tuple(a if a is Ellipsis else _lenient(a) for a in args)
        return Annotated[Tuple[items] if items else tuple, Strict(False)]
    if origin in _UNIONS:
        return typing.Union[tuple(_lenient(a) for a in args)]
    if args and origin is not _CALLABLE:  # an Iterable is checked as a list, not consumed
        return (collections.abc.Sequence if origin is collections.abc.Iterable else origin)[tuple(map(_lenient, args))]
    if isinstance(hint, type) or hint is _CALLABLE or origin is _CALLABLE:
        return Annotated[hint, WrapValidator(functools.partial(_spec_or_value, hint))]
    return hint


def _spec_or_value(hint: Any, value: Any, handler: Callable[[Any], Any]) -> Any:
    """A ClassSpec of a subclass of the class ``hint`` (of anything for a callable) as it is, else pydantic's check."""
    if isinstance(value, ClassSpec):
        if not (isinstance(hint, type) and isinstance(value.cls, type)) or issubclass(value.cls, hint):
            return value
    return handler(value)


def _resolve_nested(value: Any, key_path: str) -> Any:
    if isinstance(value, Mapping):
        if CLASS_KEY in value:
            return resolve_spec(value, key_path)
        return {k: _resolve_nested(v, join(key_path, k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve_nested(v, join(key_path, i)) for i, v in enumerate(value)]
    return value


# -- pydantic's errors as one line ------------------------------------------------------------

_RANKS = {"extra_forbidden": 0, "invalid_key": 0, "missing": 1, "default_factory_not_called": 3}
#: Errors worded without the bounds (``expected an integer, got 'eight'``, as :func:`parl.validation.check_int`).
_NOT_AN_INTEGER = ("int_type", "int_parsing", "int_from_float")


def first_error(exc: ValidationError, hint: Any, value: Any, key_path: str) -> str:
    """The first problem of ``exc`` (unknown keys first, then missing ones) as :func:`error_line` words it."""
    return error_line(min(exc.errors(), key=lambda e: _RANKS.get(e["type"], 2)), hint, value, key_path)


def error_line(error: ErrorDetails, hint: Any, value: Any, key_path: str) -> str:
    """Pydantic's ``error`` from validating ``value`` (found at ``key_path``) against ``hint`` (a type hint or a
    model) as ``<key path>: <problem>``; a ConfigError raised inside the validation is kept as it is."""
    loc, kind, cause = error["loc"], error["type"], (error.get("ctx") or {}).get("error")
    if kind == "invalid_key" or loc[-1:] == ("[key]",):
        path, _, _ = _follow(loc[: -1 if kind == "invalid_key" else -2], hint, value, key_path)
        return f"{path or 'config'}: keys must be strings, got {error['input']!r}"
    path, hint, value = _follow(loc, hint, value, key_path)
    if isinstance(cause, ConfigError):
        return str(cause)
    if isinstance(cause, ParameterError):
        return f"{path}: expected {cause.expected}, got {cause.value!r}"
    if cause is not None:
        return f"{path}: {one_line(cause)}"
    if kind == "missing":
        return f"{path}: missing required key"
    if kind == "extra_forbidden":
        known = list(hint.model_fields)
        return f"{path}: unknown key{did_you_mean(str(loc[-1]), known) or '; expected one of: ' + ', '.join(known)}"
    words = "a finite number" if kind == "finite_number" else describe(hint, "" if kind in _NOT_AN_INTEGER else kind)
    return f"{path}: expected {words}, got {value!r}"


def _follow(loc: Tuple[Any, ...], hint: Any, value: Any, key_path: str) -> Tuple[str, Any, Any]:
    """The key path, hint and value pydantic's error location ``loc`` points to; it stops at a union (whose
    members pydantic names in the location) and at an unknown key (with its model as the hint)."""
    for part in loc:
        bare = _bare(hint)
        origin, args = typing.get_origin(bare), typing.get_args(bare)
        if origin in _UNIONS:
            break
        key_path = join(key_path, part)
        value = value.get(part) if isinstance(value, Mapping) else value[part] if isinstance(value, list) else None
        if isinstance(bare, type) and issubclass(bare, BaseModel):
            if part not in bare.model_fields:
                return key_path, bare, value
            field = bare.model_fields[part]
            hint = Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation
        elif origin is tuple and args and args[-1] is not Ellipsis:
            hint = args[part]
        else:
            hint = args[-1] if origin in (dict, collections.abc.Mapping) else args[0] if args else Any
    return key_path, hint, value


def _bare(hint: Any) -> Any:
    """``hint`` without Annotated's metadata and Optional's None."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated or (origin in _UNIONS and len(args) == 2 and type(None) in args):
        return _bare(args[0] if origin is Annotated or args[1] is type(None) else args[1])
    return hint


_SIMPLE = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "null"}
_PLURALS = {bool: "booleans (true or false)", int: "integers", float: "numbers", str: "strings"}
_SEQUENCES = (tuple, list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable)


def describe(hint: Any, bounds: str = "") -> str:
    """What a type hint asks for, in words (``"a list of numbers or null"``); with ``bounds``, pydantic's error
    type, its constraints too (``"an integer >= 1"``)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _bounded(args[0], args[1:], bounds) if bounds else describe(args[0])
    if origin in _UNIONS:
        words = " or ".join(describe(a, bounds) for a in args if a is not type(None))
        return words + (" or null" if type(None) in args else "")
    if origin is typing.Literal:
        return repr(args[0]) if len(args) == 1 else f"one of {list(args)}"
    if hint in _SIMPLE:
        return _SIMPLE[hint]
    if hint in _SEQUENCES or origin in _SEQUENCES:
        if origin is tuple and args and args[-1] is not Ellipsis:
            return f"a list of {len(args)} items ({', '.join(describe(a) for a in args)})"
        item = args[0] if args else Any
        return "a list" if item is Any else f"a list of {_PLURALS.get(item, f'items each {describe(item)}')}"
    if hint in (dict, collections.abc.Mapping) or origin in (dict, collections.abc.Mapping):
        return "a mapping"
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        return "a mapping"
    if hint is _CALLABLE or origin is _CALLABLE:
        return "a callable (a {class: ...} mapping)"
    return (
        f"a {hint.__module__}.{hint.__qualname__} (a {{class: ...}} mapping)" if isinstance(hint, type) else str(hint)
    )


def _bounded(hint: Any, metadata: Sequence[Any], kind: str) -> str:
    """``hint`` with its constraints (``Field(ge=1, le=64)``, ``gt=0``, ``min_length=1``) for pydantic's error
    ``kind``: a value below a range is told the lower bound (``an integer >= 1``, as check_int says), others
    the whole range."""
    found: Dict[str, Any] = {}
    for constraint in (c for m in metadata for c in (m.metadata if isinstance(m, FieldInfo) else [m])):
        names = ("gt", "ge", "le", "min_length")
        found.update({k: getattr(constraint, k) for k in names if getattr(constraint, k, None) is not None})
    noun, low, high = "an integer" if hint is int else "a number", found.get("ge"), found.get("le")
    high = None if kind == "greater_than_equal" else high
    if low is not None and high is not None:
        return f"{noun} in [{low}, {high}]"
    if low is not None or high is not None:
        return f"{noun} >= {low}" if low is not None else f"{noun} <= {high}"
    if found.get("gt") == 0:
        return "a positive number"
    return "a non-empty string" if found.get("min_length") == 1 and hint is str else describe(hint, kind)
