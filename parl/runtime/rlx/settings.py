"""ServerSettings, the options of placement ``"rlx"``: how it serves its remote environments (address,
token, limits and timeouts).

    settings = ServerSettings(bind="0.0.0.0:7070", token=Path("token").read_bytes().strip())
    manager = parl.Manager(tasks, placement=settings)       # placement "rlx", as its options are these

Safe by default: the server listens on this machine only (``127.0.0.1``) unless told otherwise,
and refuses to listen anywhere else without a token of at least :data:`MIN_TOKEN_BYTES` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from parl.rlx.address import DEFAULT_ADDRESS, is_loopback, split_address
from parl.rlx.framing import MAX_FRAME_BYTES
from parl.rlx.messages import MAX_TOKEN_BYTES
from parl.runtime.rlx.values import FLOAT32_MAX
from parl.validation import ParameterError, check_int, check_positive, check_range

#: The shortest token: 32 bytes (256 bits when random; ``openssl rand -hex 32`` gives 64 characters).
MIN_TOKEN_BYTES = 32
#: Bounds of ``max_frame_bytes``: 1 KiB to 64 MiB.
FRAME_BYTES_RANGE = (1 << 10, 64 << 20)


@dataclass(frozen=True)
class ServerSettings:
    """The settings of an RLX server (placement ``"rlx"``); checked when made.

    Attributes:
        bind: ``host:port`` to listen on (port 0: a free port, see ``RlxRunner.address``).
        token: the secret each client's hello must carry (compared in constant time), None for
            none; required, of :data:`MIN_TOKEN_BYTES` to 4096 bytes, unless ``bind`` is a loopback
            address. Never shown in reprs or logs.
        max_frame_bytes: the largest frame body a client may send (default 1 MiB); a larger one
            ends its connection as soon as its header arrives.
        idle_timeout: seconds a client may stay silent while the server waits on it (between the
            server's reply and the next request, or with no episode under way).
        episode_timeout: the longest an episode may last, in seconds (None: no limit).
        handshake_timeout: seconds from connecting to the hello (default 5: a client says hello as soon
            as it has connected, one round trip; 5 s leaves room for a lost packet resent on a slow
            link, and bounds how long a silent connection holds one of ``max_handshakes``).
        max_handshakes: connections waiting for their hello at once (they hold no slot); a new one
            beyond them ends the oldest, of the address with the most waiting, with ``error timeout``.
        max_connections_per_address: connections open at once from one host, waiting or playing; a new
            one beyond them gets ``error busy`` at once.
        min_free_memory: bytes of available memory (``MemAvailable``) below which a new client is
            refused as busy (0: no floor).
        max_abs_reward: the largest reward magnitude a client may send (default 1e6, at most float32's
            largest); a larger one ends its connection with ``bad_message``, so that no client's data
            can make the robot's updates non-finite.
        max_abs_observation: the same for each value of an observation of a float space (default 1e6).
        max_metrics_per_second: ``metrics`` messages a connection may send a second on average (and
            at once after a quiet second; default 50); the server drops the rest and counts them.

    Raises:
        ParameterError: a setting out of its range, naming it; ``token`` when ``bind`` is not a
            loopback address and no token is given.
    """

    bind: str = DEFAULT_ADDRESS
    token: Optional[bytes] = field(default=None, repr=False)
    max_frame_bytes: int = MAX_FRAME_BYTES
    idle_timeout: float = 60.0
    episode_timeout: Optional[float] = 3600.0
    handshake_timeout: float = 5.0
    max_handshakes: int = 16
    max_connections_per_address: int = 64
    min_free_memory: int = 256 << 20
    max_abs_reward: float = 1e6
    max_abs_observation: float = 1e6
    max_metrics_per_second: float = 50.0

    def __post_init__(self) -> None:
        try:
            host, _ = split_address(self.bind)
        except ValueError:
            raise ParameterError("bind", "an address host:port", self.bind) from None
        if self.token is None:
            if not is_loopback(host):
                raise ParameterError(
                    "token",
                    f"a secret of at least {MIN_TOKEN_BYTES} bytes to listen on {self.bind}, which is not a loopback "
                    "address",
                    None,
                )
        elif not isinstance(self.token, bytes) or not MIN_TOKEN_BYTES <= len(self.token) <= MAX_TOKEN_BYTES:
            length = len(self.token) if isinstance(self.token, (bytes, str)) else type(self.token).__name__
            raise ParameterError("token", f"bytes, {MIN_TOKEN_BYTES} to {MAX_TOKEN_BYTES} of them", f"<{length}>")
        check_int("max_frame_bytes", self.max_frame_bytes, *FRAME_BYTES_RANGE)
        check_positive("idle_timeout", self.idle_timeout)
        check_positive("handshake_timeout", self.handshake_timeout)
        if self.episode_timeout is not None:
            check_positive("episode_timeout", self.episode_timeout)
        check_int("min_free_memory", self.min_free_memory, 0)
        check_int("max_handshakes", self.max_handshakes, 1)
        check_int("max_connections_per_address", self.max_connections_per_address, 1)
        check_range("max_metrics_per_second", self.max_metrics_per_second, 1.0, 1e9)
        for name in ("max_abs_reward", "max_abs_observation"):
            check_positive(name, getattr(self, name))
            check_range(name, getattr(self, name), 0.0, FLOAT32_MAX)

    def limits(self) -> dict:
        """The limits a ``welcome`` tells each client."""
        return {
            "max_frame_bytes": self.max_frame_bytes,
            "idle_timeout": self.idle_timeout,
            "episode_timeout": self.episode_timeout,
        }
