"""``parl serve`` in a child process, for scripts that run a server beside its clients (examples,
benchmarks, tests).

    server, address = start_serve(["examples/configs/ppo_cartpole.yaml", "--bind", "127.0.0.1:0", "--quiet"])
    ...                                       # clients connect to address ("127.0.0.1:40123")
    server.send_signal(signal.SIGINT)         # the final checkpoint, then exit status 0
    server.wait()

The server's first line on stdout says where it listens (:func:`listening_line`); the caller owns
the process and stops it by its pid.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Mapping, Optional, Sequence, Tuple

#: How the first line of ``parl serve`` starts; the address follows.
LISTENING = "parl serve: listening on "


def listening_line(host: str, port: int, clients: int, token: bool) -> str:
    """The line ``parl serve`` prints once it listens."""
    return f"{LISTENING}{host}:{port} for {clients} clients at most, {'a token' if token else 'no token'}"


def start_serve(
    args: Sequence[str],
    *,
    cwd: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    stderr: Optional[int] = subprocess.PIPE,
) -> Tuple["subprocess.Popen[str]", str]:
    """Start ``parl serve ARGS`` (this Python, ``-m parl``) and wait until it listens; the process (its
    stdout and stderr piped, as text, unless ``stderr`` says otherwise) and its ``host:port``.

    Raises:
        RuntimeError: the server exited or said something else first (it is killed; the message holds
            what it wrote on stderr when that was piped).
    """
    environment = dict(os.environ if env is None else env, PYTHONUNBUFFERED="1")
    server = subprocess.Popen(
        [sys.executable, "-m", "parl", "serve", *args],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    assert server.stdout is not None  # stdout=PIPE
    line = server.stdout.readline()
    if not line.startswith(LISTENING):
        server.kill()
        _, err = server.communicate()
        raise RuntimeError(f"parl serve did not start: {line.strip()!r} {(err or '').strip()[-2000:]}")
    return server, line[len(LISTENING) :].split()[0]
