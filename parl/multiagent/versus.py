"""Play a turn-based game's policy against a uniform random legal player, and count the results.

    policy = greedy_player(task)                 # a ComputationTask's deterministic action
    tally = play_against_random(tictactoe_v3.env, policy, games=500, seat=0, seed=1)
    print(tally.wins, tally.draws, tally.losses, tally.score)    # score = (wins + draws / 2) / games

The environment is a PettingZoo AEC game of two players whose observations are Dict observations with
an ``action_mask`` (PettingZoo's classic games); the policy plays seat ``seat`` (0: it moves first) and
the random player picks uniformly among the legal moves. The result of a game is the sign of the
policy's return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from parl.serving.computation_task import ComputationTask
from parl.utils.observations import as_input
from parl.validation import check_int

#: An observation (a Dict observation of the game) -> the action to play.
Player = Callable[[Mapping[str, Any]], int]


@dataclass(frozen=True)
class Tally:
    """Games won, drawn and lost by the policy."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        """Games played."""
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """``(wins + draws / 2) / games`` (0 for no game)."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.0


def greedy_player(task: ComputationTask) -> Player:
    """The deterministic action of ``task`` (a model over the Dict observation's inputs, such as
    :class:`~parl.models.MaskedMLPActorCritic`) for one observation."""

    def act(observation: Mapping[str, Any]) -> int:
        inputs = {key: as_input(value)[None] for key, value in observation.items()}  # as PettingZooAgent feeds
        actions, _ = task.predict(inputs, {}, deterministic=True)
        return int(next(iter(actions.values())).reshape(-1)[0])

    return act


def play_against_random(make_env: Callable[[], Any], policy: Player, *, games: int, seat: int, seed: int) -> Tally:
    """``games`` games of ``policy`` in seat ``seat`` against a uniform random legal player.

    Raises:
        ValueError: ``games`` below 1, or ``seat`` not 0 or 1.
    """
    check_int("games", games, 1)
    check_int("seat", seat, 0, 1)
    rng = np.random.default_rng(seed)
    env = make_env()
    results = []
    try:
        for game in range(games):
            env.reset(seed=seed + game)
            me = env.possible_agents[seat]
            total = 0.0
            for agent_id in env.agent_iter():
                obs, reward, terminated, truncated, _ = env.last()
                if agent_id == me:
                    total += float(reward)
                if terminated or truncated:
                    env.step(None)
                    continue
                if agent_id == me:
                    env.step(policy(obs))
                else:
                    env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            results.append(np.sign(total))
    finally:
        env.close()
    results_array = np.asarray(results)
    return Tally(int((results_array > 0).sum()), int((results_array == 0).sum()), int((results_array < 0).sum()))
