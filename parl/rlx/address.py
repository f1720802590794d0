"""Server addresses: ``host:port`` text, and whether a host is this machine only.

host, port = split_address("127.0.0.1:7070")     # ("127.0.0.1", 7070)
is_loopback("0.0.0.0")                           # False: every interface
"""

from __future__ import annotations

import ipaddress
from typing import Tuple

#: The address a server binds unless told otherwise: this machine only.
DEFAULT_ADDRESS = "127.0.0.1:7070"


def split_address(address: object) -> Tuple[str, int]:
    """``"host:port"`` (``"[::1]:7070"`` for IPv6) as ``(host, port)``.

    Raises:
        ValueError: naming the address, when it has no host or no port in [0, 65535].
    """
    host, colon, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not (colon and host and port.isdigit() and int(port) <= 65535):
        raise ValueError(f"expected an address host:port, got {address!r}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.0/8``, ``::1``) or ``localhost``; any other
    name or address may be reached from other machines."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
