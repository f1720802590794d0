"""Plays any gymnasium environment through an RLX :class:`~parl.rlx.client.Client`.

    env = gymnasium.make("CartPole-v1")
    with parl.rlx.Client("127.0.0.1:7070") as client:
        episodes = parl.rlx.drive(env, client, episodes=100, seed=0)   # until 100 or the server stops

Each episode starts with ``init`` and ends with ``reset`` (``truncated`` when gymnasium says so
and not terminated, with the last observation to bootstrap from). After each episode the client
logs ``act_latency_ms``, the mean round trip of its requests as it saw them (network and
server), as the server's metric ``client/act_latency_ms``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, List, Optional

from parl.rlx.client import Client
from parl.rlx.errors import SHUTDOWN, ServerError

#: The metric each episode's mean round trip is logged as (in milliseconds).
LATENCY_METRIC = "act_latency_ms"


@dataclass(frozen=True)
class EpisodeResult:
    """One episode played by :func:`drive`.

    Attributes:
        episode_return: the sum of its rewards, as the server counted them.
        length: its actions.
        seconds: wall-clock time from ``reset`` of the environment to the server's ``done``.
        act_latency_ms: mean round trip of its requests, in milliseconds.
    """

    episode_return: float
    length: int
    seconds: float
    act_latency_ms: float


def drive(
    env: Any,
    client: Client,
    *,
    episodes: Optional[int] = None,
    seed: Optional[int] = None,
    log_latency: bool = True,
) -> List[EpisodeResult]:
    """Play ``env`` through ``client`` for ``episodes`` episodes (None: until the server stops);
    returns them. ``seed`` seeds the first reset. The server stopping (an ``error shutdown``) ends the
    loop quietly, after the last whole episode.

    Raises:
        ServerError: any other error from the server (the connection is closed then).
    """
    played: List[EpisodeResult] = []
    try:
        while episodes is None or len(played) < episodes:
            played.append(_episode(env, client, seed if not played else None, log_latency))
    except ServerError as exc:
        if exc.code != SHUTDOWN:
            raise
    return played


def _episode(env: Any, client: Client, seed: Optional[int], log_latency: bool) -> EpisodeResult:
    start = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    action = client.init(obs)
    waited = client.latency
    while True:
        obs, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            episode_return = client.reset(reward, truncated=bool(truncated and not terminated), obs=obs)
            break
        action = client.send(reward, obs)
        waited += client.latency
    length = client.episode_length
    waited += client.latency
    latency_ms = 1000.0 * waited / (length + 1)  # the init, the steps and the reset
    if log_latency:
        client.metrics(LATENCY_METRIC, latency_ms)
    return EpisodeResult(episode_return, length, time.perf_counter() - start, latency_ms)
