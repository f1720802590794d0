"""RLX messages: what a client and a server say to each other, checked field by field when read.

    frame = framing.encode(Step(reward=1.0, obs=obs).to_data())   # a client's step
    message = parse_client(body)                                   # the server: Step(reward=1.0, ...)
    reply = parse_server(body)                                     # the client: Action(action=1, ...)

Every message is a msgpack map whose ``type`` names it; docs/rlx.md gives each one's fields.
Reading a message checks its fields' presence and types (a map with a missing, unknown or
ill-typed field is refused with ``bad_message`` naming it) and turns arrays into numpy; what the
values must be for one robot (an observation's shape, an action's range) the server checks
against its spaces.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Union

import numpy as np

from parl.rlx import spaces
from parl.rlx.errors import BAD_MESSAGE, CODES, ProtocolError
from parl.rlx.framing import decode, to_array, to_observation

#: The protocol version this package speaks: 2 adds dict observation spaces to version 1.
VERSION = 2
#: The versions a server speaks (the ``welcome`` answers in the client's); a version 1 client can
#: play every robot whose observation space is not a dict space.
VERSIONS = (1, 2)
#: The first version whose observations may be dict spaces.
DICT_SPACES_SINCE = 2
#: The longest token a hello may carry, in bytes.
MAX_TOKEN_BYTES = 4096
#: Metric names: letters, digits, ``_ . / -``, 1 to 128 of them.
METRIC_NAME = re.compile(r"^[A-Za-z0-9_./\-]{1,128}$")
_MAX_CLIENT_NAME = 128
#: The largest metric step: steps are int64 where metrics are written (2**63 - 1).
MAX_STEP = (1 << 63) - 1

#: An action as it travels: an int (discrete spaces) or an array (box spaces).
ActionValue = Union[int, np.ndarray]
#: An observation as it travels: an array (box and discrete spaces) or key -> array (dict spaces).
Observation = Union[np.ndarray, Dict[str, np.ndarray]]


# -- client to server ---------------------------------------------------------------------------


class Hello(NamedTuple):
    """The first message of a connection: the protocol version, the token (None: none), and a
    free-form name of the client for the server's logs."""

    version: int = VERSION
    token: Optional[bytes] = None
    client: str = ""

    def to_data(self) -> Dict[str, object]:
        data: Dict[str, object] = {"type": "hello", "version": self.version}
        if self.token is not None:
            data["token"] = self.token
        if self.client:
            data["client"] = self.client
        return data


class Init(NamedTuple):
    """Starts an episode with its first observation; the reply is an ``action``."""

    obs: Observation

    def to_data(self) -> Dict[str, object]:
        return {"type": "init", "obs": self.obs}


class Step(NamedTuple):
    """The reward of the last action and the observation it led to. With ``terminated`` or
    ``truncated`` the episode ends and the reply is ``done``, else an ``action``. ``action_taken``:
    the action the environment really took, when it was not the one sent (off-policy logging)."""

    reward: float
    obs: Observation
    terminated: bool = False
    truncated: bool = False
    action_taken: Optional[ActionValue] = None

    def to_data(self) -> Dict[str, object]:
        data = {"type": "step", "reward": self.reward, "obs": self.obs}
        if self.terminated:
            data["terminated"] = True
        if self.truncated:
            data["truncated"] = True
        if self.action_taken is not None:
            data["action_taken"] = self.action_taken
        return data


class Reset(NamedTuple):
    """Ends the episode with the reward of the last action; the reply is ``done``. Terminated unless
    ``truncated``; ``obs``, the last observation, is what a truncated episode bootstraps from (the
    one before it stands in when it is left out)."""

    reward: float
    truncated: bool = False
    obs: Optional[Observation] = None
    action_taken: Optional[ActionValue] = None

    def to_data(self) -> Dict[str, object]:
        data: Dict[str, object] = {"type": "reset", "reward": self.reward}
        if self.truncated:
            data["truncated"] = True
        if self.obs is not None:
            data["obs"] = self.obs
        if self.action_taken is not None:
            data["action_taken"] = self.action_taken
        return data


class Metrics(NamedTuple):
    """A scalar for the server's metrics (``client/<name>``), at ``step`` (None: the robot's env steps); no reply."""

    name: str
    value: float
    step: Optional[int] = None

    def to_data(self) -> Dict[str, object]:
        data: Dict[str, object] = {"type": "metrics", "name": self.name, "value": self.value}
        if self.step is not None:
            data["step"] = self.step
        return data


class Bye(NamedTuple):
    """The client leaves; an episode under way ends as truncated. No reply: the server closes."""

    def to_data(self) -> Dict[str, object]:
        return {"type": "bye"}


ClientMessage = Union[Hello, Init, Step, Reset, Metrics, Bye]


# -- server to client ---------------------------------------------------------------------------


class Welcome(NamedTuple):
    """The reply to ``hello``: the spaces, the server's limits (``max_frame_bytes``, ``idle_timeout``,
    ``episode_timeout`` in seconds or None), the robot's env steps so far and this connection's slot."""

    version: int
    observation_space: spaces.Space
    action_space: spaces.Space
    limits: Dict[str, Any]
    env_steps: int
    slot: int

    def to_data(self) -> Dict[str, object]:
        return {
            "type": "welcome",
            "version": self.version,
            "observation_space": self.observation_space.to_data(),
            "action_space": self.action_space.to_data(),
            "limits": dict(self.limits),
            "env_steps": self.env_steps,
            "slot": self.slot,
        }


class Action(NamedTuple):
    """The action to take, and ``weights_version``: the updates of the robot's tasks before it was chosen."""

    action: ActionValue
    weights_version: int

    def to_data(self) -> Dict[str, object]:
        return {"type": "action", "action": self.action, "weights_version": self.weights_version}


class Done(NamedTuple):
    """The reply to the message that ended an episode: its return (the sum of its rewards) and length (actions)."""

    episode_return: float
    length: int

    def to_data(self) -> Dict[str, object]:
        return {"type": "done", "return": self.episode_return, "length": self.length}


class Error(NamedTuple):
    """Why the server ends the connection (it closes right after): a code of :data:`~parl.rlx.errors.CODES`."""

    code: str
    message: str

    def to_data(self) -> Dict[str, object]:
        return {"type": "error", "code": self.code, "message": self.message}


ServerMessage = Union[Welcome, Action, Done, Error]


# -- reading ------------------------------------------------------------------------------------


class _Fields:
    """The fields of one message being read, each taken once; what is left over is an error."""

    def __init__(self, data: Dict[str, object], kind: str) -> None:
        self.data = dict(data)
        self.kind = kind
        del self.data["type"]

    def take(self, name: str, check: Callable[[object, str], Any], default: Any = ...) -> Any:
        where = f"{self.kind}: {name}"
        if name not in self.data:
            if default is ...:
                raise ProtocolError(BAD_MESSAGE, f"{where} is missing")
            return default
        return check(self.data.pop(name), where)

    def done(self) -> None:
        if self.data:
            names = sorted(str(key) for key in self.data)
            raise ProtocolError(BAD_MESSAGE, f"{self.kind}: unknown field{'s' if len(names) > 1 else ''} {names}")


def _number(value: object, where: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if math.isfinite(number):
            return number
    raise ProtocolError(BAD_MESSAGE, f"{where} must be a finite number, got {_shown(value)}")


def _count(value: object, where: str) -> int:
    if type(value) is int and value >= 0:
        return value
    raise ProtocolError(BAD_MESSAGE, f"{where} must be an integer >= 0, got {_shown(value)}")


def _step(value: object, where: str) -> int:
    if type(value) is int and 0 <= value <= MAX_STEP:
        return value
    raise ProtocolError(BAD_MESSAGE, f"{where} must be an integer in [0, 2**63 - 1], got {_shown(value)}")


def _flag(value: object, where: str) -> bool:
    if type(value) is bool:
        return value
    raise ProtocolError(BAD_MESSAGE, f"{where} must be true or false, got {_shown(value)}")


def _text(limit: int, pattern: Optional[re.Pattern] = None) -> Callable[[object, str], str]:
    def check(value: object, where: str) -> str:
        if isinstance(value, str) and len(value) <= limit and (pattern is None or pattern.match(value)):
            return value
        rule = f"matching {pattern.pattern}" if pattern is not None else f"of at most {limit} characters"
        raise ProtocolError(BAD_MESSAGE, f"{where} must be a string {rule}, got {_shown(value)}")

    return check


def _token(value: object, where: str) -> bytes:
    token = value.encode("utf-8") if isinstance(value, str) else value
    if isinstance(token, bytes) and len(token) <= MAX_TOKEN_BYTES:
        return token
    raise ProtocolError(BAD_MESSAGE, f"{where} must be a string or bytes of at most {MAX_TOKEN_BYTES} bytes")


def _action(value: object, where: str) -> ActionValue:
    if type(value) is int:
        return value
    return to_array(value, where)


def _error_code(value: object, where: str) -> str:
    if value in CODES:
        return value
    raise ProtocolError(BAD_MESSAGE, f"{where} must be one of {list(CODES)}, got {_shown(value)}")


def _limits(value: object, where: str) -> Dict[str, Any]:
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return value
    raise ProtocolError(BAD_MESSAGE, f"{where} must be a map, got {_shown(value)}")


def _read_hello(f: _Fields) -> Hello:
    version = f.take("version", _count)
    return Hello(version, f.take("token", _token, None), f.take("client", _text(_MAX_CLIENT_NAME), ""))


def _read_init(f: _Fields) -> Init:
    return Init(f.take("obs", to_observation))


def _read_step(f: _Fields) -> Step:
    return Step(
        f.take("reward", _number),
        f.take("obs", to_observation),
        f.take("terminated", _flag, False),
        f.take("truncated", _flag, False),
        f.take("action_taken", _action, None),
    )


def _read_reset(f: _Fields) -> Reset:
    return Reset(
        f.take("reward", _number),
        f.take("truncated", _flag, False),
        f.take("obs", to_observation, None),
        f.take("action_taken", _action, None),
    )


def _read_metrics(f: _Fields) -> Metrics:
    return Metrics(f.take("name", _text(128, METRIC_NAME)), f.take("value", _number), f.take("step", _step, None))


def _read_welcome(f: _Fields) -> Welcome:
    return Welcome(
        f.take("version", _count),
        f.take("observation_space", spaces.from_data),
        f.take("action_space", spaces.action_from_data),
        f.take("limits", _limits),
        f.take("env_steps", _count),
        f.take("slot", _count),
    )


_CLIENT: Dict[str, Callable[[_Fields], ClientMessage]] = {
    "hello": _read_hello,
    "init": _read_init,
    "step": _read_step,
    "reset": _read_reset,
    "metrics": _read_metrics,
    "bye": lambda f: Bye(),
}
_SERVER: Dict[str, Callable[[_Fields], ServerMessage]] = {
    "welcome": _read_welcome,
    "action": lambda f: Action(f.take("action", _action), f.take("weights_version", _count)),
    "done": lambda f: Done(f.take("return", _number), f.take("length", _count)),
    "error": lambda f: Error(f.take("code", _error_code), f.take("message", _text(4096))),
}


def parse_client(body: bytes) -> ClientMessage:
    """The client message in a frame's body.

    Raises:
        ProtocolError: ``bad_frame`` (not a msgpack map) or ``bad_message`` (naming the type and field).
    """
    return _parse(body, _CLIENT)


def parse_server(body: bytes) -> ServerMessage:
    """The server message in a frame's body.

    Raises:
        ProtocolError: as :func:`parse_client`.
    """
    return _parse(body, _SERVER)


def _parse(body: bytes, readers: Mapping[str, Callable[[_Fields], Any]]) -> Any:
    data = decode(body)
    kind = data.get("type")
    if not isinstance(kind, str) or (reader := readers.get(kind)) is None:
        raise ProtocolError(BAD_MESSAGE, f"unknown message type {_shown(kind)}; expected one of {list(readers)}")
    fields = _Fields(data, kind)
    message = reader(fields)
    fields.done()
    return message


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
