"""A Ray cluster's address checked before it is joined: one line when nothing answers there.

    check_reachable("10.0.0.5:6379")
    # RayJoinError: cannot reach the Ray cluster at 10.0.0.5:6379: Connection refused

``ray.init(address=...)`` retries an address where nothing listens for many minutes (20 tries of
some 36 s each in Ray 2.60), printing a warning every few seconds, and then raises an error of
some 60 lines. A TCP connection to the address, with a timeout of seconds, tells the same at once.

A cluster with token authentication refuses a process that joins it at an address without
``RAY_AUTH_MODE=token`` in its environment: Ray retries for some 20 s, then says only
``Failed to connect to Ray cluster at <address>``; :func:`join_error` adds what to set.
"""

from __future__ import annotations

import os
import socket
from typing import Optional, Tuple

from parl.runtime.errors import PlacementStartError

#: Seconds a TCP connection to a cluster's address may take to open before it counts as unreachable.
CONNECT_SECONDS = 5.0
#: The scheme of Ray Client addresses (``ray://host:10001``).
CLIENT_SCHEME = "ray://"
#: What a process that joins a cluster with token authentication needs (Ray 2.60; docs/distributed.md).
AUTH_HINT = "a cluster with token authentication needs RAY_AUTH_MODE=token and its token here (docs/distributed.md)"


class RayJoinError(PlacementStartError, ConnectionError):
    """The Ray cluster at an address cannot be joined; the message is one line naming the address and why."""


def host_and_port(address: str) -> Optional[Tuple[str, int]]:
    """``(host, port)`` of ``host:port``, ``[v6 host]:port`` or ``ray://host:port``; None for an address
    Ray resolves itself (``auto``, ``local``)."""
    rest = address[len(CLIENT_SCHEME) :] if address.startswith(CLIENT_SCHEME) else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def check_reachable(address: str, timeout: float = CONNECT_SECONDS) -> None:
    """Open and close a TCP connection to ``address`` (see :func:`host_and_port`; other forms are left to Ray).

    Raises:
        RayJoinError: the host is unknown, or no connection opened within ``timeout`` seconds.
    """
    target = host_and_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except socket.timeout:
        raise RayJoinError(f"cannot reach the Ray cluster at {address}: no answer within {timeout:g} s") from None
    except (OSError, OverflowError) as exc:  # OverflowError: a port beyond 65535
        raise RayJoinError(
            f"cannot reach the Ray cluster at {address}: {getattr(exc, 'strerror', None) or exc}"
        ) from None


def join_error(address: str, exc: BaseException) -> RayJoinError:
    """The one line of ``ray.init(address=address)`` failing with ``exc``: the first line of Ray's message
    (which may hold a whole traceback), and :data:`AUTH_HINT` when ``RAY_AUTH_MODE`` is not ``token``
    here (Ray does not say that a refused token, or none, is why)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    message = f"cannot join the Ray cluster at {address}: {lines[0] if lines else type(exc).__name__}"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        message += f" ({AUTH_HINT})"
    return RayJoinError(message)
