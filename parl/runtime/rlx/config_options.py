"""ServerConfig: how a robot config's ``placement:`` block sets up placement ``"rlx"``'s server.

    placement: {name: rlx, bind: "0.0.0.0:7070", token_file: token.txt}

The keys of :class:`~parl.runtime.rlx.settings.ServerSettings`, but for the token, which a config
never holds: ``token_file`` names the file it is read from (whitespace at either end stripped), and
the memory floor is in MiB (``min_free_memory_mb``). The file is read when the config is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, Optional

from parl.rlx.messages import MAX_TOKEN_BYTES
from parl.runtime.rlx.settings import ServerSettings
from parl.validation import ParameterError, check_int

_DEFAULTS: Dict[str, Any] = {f.name: f.default for f in fields(ServerSettings)}


@dataclass(frozen=True)
class ServerConfig:
    """A config's settings of an RLX server; :meth:`options` gives the :class:`ServerSettings`.

    Raises:
        ParameterError: a bad value, naming its key (``token_file`` for a token that cannot be read or
            is refused).
    """

    bind: str = _DEFAULTS["bind"]
    token_file: Optional[str] = None
    max_frame_bytes: int = _DEFAULTS["max_frame_bytes"]
    idle_timeout: float = _DEFAULTS["idle_timeout"]
    episode_timeout: Optional[float] = _DEFAULTS["episode_timeout"]
    handshake_timeout: float = _DEFAULTS["handshake_timeout"]
    max_handshakes: int = _DEFAULTS["max_handshakes"]
    max_connections_per_address: int = _DEFAULTS["max_connections_per_address"]
    min_free_memory_mb: int = _DEFAULTS["min_free_memory"] >> 20
    max_abs_reward: float = _DEFAULTS["max_abs_reward"]
    max_abs_observation: float = _DEFAULTS["max_abs_observation"]
    max_metrics_per_second: float = _DEFAULTS["max_metrics_per_second"]
    _settings: Optional[ServerSettings] = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.token_file is not None and (not isinstance(self.token_file, str) or not self.token_file):
            raise ParameterError("token_file", "the path of a file, or None", self.token_file)
        check_int("min_free_memory_mb", self.min_free_memory_mb, 0)
        token = None if self.token_file is None else read_token(self.token_file)
        options = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.init and f.name not in ("token_file", "min_free_memory_mb")
        }
        try:
            settings = ServerSettings(token=token, min_free_memory=self.min_free_memory_mb << 20, **options)
        except ParameterError as exc:
            name = "token_file" if exc.name == "token" else exc.name
            raise ParameterError(name, exc.expected, exc.value) from None
        object.__setattr__(self, "_settings", settings)

    def options(self) -> ServerSettings:
        """The server's settings (the token read when this was made)."""
        assert self._settings is not None  # set by __post_init__
        return self._settings


def read_token(path: str) -> bytes:
    """The token in file ``path`` (relative to the working directory), whitespace at either end stripped.

    Raises:
        ParameterError: ``token_file``, naming the file and why, when it cannot be read.
    """
    try:
        with open(path, "rb") as f:
            return f.read(MAX_TOKEN_BYTES + 64).strip()
    except OSError as exc:
        raise ParameterError("token_file", f"a file that can be read ({exc.strerror or exc})", path) from None
