"""Agent: runs episodes in one environment copy.

    class CartPoleAgent(parl.Agent):
        def run_one_episode(self):
            obs, _ = self.reset_env()
            total, steps, done = 0.0, 0, False
            while not done:
                actions, _ = self.helpers["RL"].predict({"obs": obs})
                next_obs, reward, terminated, truncated, _ = self.env.step(int(actions["action"][0]))
                self.helpers["RL"].store_data({"obs": obs}, actions, reward, {"obs": next_obs},
                                              terminated, truncated)
                self.helpers["RL"].learn()
                obs, total, steps, done = next_obs, total + reward, steps + 1, terminated or truncated
            return {"reward": total, "steps": steps}

The agent knows nothing of batching or threads: :class:`~parl.Manager` runs
``run_one_episode`` ``num_games`` times in the agent's own thread and
records what it returns.

A resumed run gives each agent the :meth:`Agent.counters` of its checkpoint
through :meth:`Agent.restore_counters` before it starts, so schedules that
read them (exploration, learning-rate warm-up) go on where they stopped.
"""

from __future__ import annotations

import abc
import math
import numbers
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from parl.core.agent_helper import AgentHelper
from parl.core.counters import read_counter
from parl.core.errors import EpisodeResultError
from parl.validation import check_int


class Agent(abc.ABC):
    """Base class of agents (abstract): subclasses implement :meth:`run_one_episode`; one that does not
    fails at construction with a TypeError naming it.

    Attributes:
        env: the environment copy this agent plays.
        helpers: task name -> the agent's helper of that task (set by ``Manager.add_agent``).
        id: the agent's index in its Manager (-1 until added).
        episode: episodes finished so far (counted by the Manager's loop; restored on resume).
        training: False for agents that only evaluate a policy: exploration code (epsilon-greedy
            choices, action noise, random warm-up actions) must then act greedily, and such agents
            are not meant to learn. True by default.
    """

    def __init__(self, env: Any, *, num_games: Optional[int] = None, seed: Optional[int] = None) -> None:
        self.env = env
        self.num_games = None if num_games is None else check_int("num_games", num_games, 0)
        self.seed = seed
        self.helpers: Dict[str, AgentHelper] = {}
        self.id = -1
        self.episode = 0
        self.training = True

    @abc.abstractmethod
    def run_one_episode(self) -> Dict[str, Any]:
        """Play one episode; return its statistics: a mapping with at least ``reward`` (a number)
        and ``steps`` (a whole number >= 0), checked by :func:`check_episode_result`; other numbers
        are logged as ``episode/<key>``, other values kept in the episode's record."""
        raise NotImplementedError(f"{type(self).__name__} must implement run_one_episode()")

    def helper_tasks(self, tasks: Sequence[str]) -> Dict[str, str]:
        """The helpers this agent plays with: helper key -> task name, given the robot's ``tasks``. By
        default one helper per task, keyed by its name; an agent of a multi-agent environment holds one
        per environment agent (:class:`~parl.multiagent.PettingZooAgent`). ``Manager.add_agent`` binds
        each helper to its task by this, and configs build the helpers it names."""
        return {name: name for name in tasks}

    def counters(self) -> Dict[str, int]:
        """The integers a resumed run needs to go on where this agent stopped: ``episode``.

        Subclasses that keep more (env steps for a schedule, say) add them here and read them
        back in :meth:`restore_counters`.
        """
        return {"episode": self.episode}

    def restore_counters(self, counters: Mapping[str, int]) -> None:
        """Take up the :meth:`counters` of an earlier run; call before the agent plays.

        ``num_games`` then counts the episodes of the whole run, the restored ones included.
        Only episode 0 of a run is seeded (see :meth:`reset_env`), so an agent resumed after
        finished episodes never replays the start of its first one.

        Raises:
            ValueError: a counter is missing or is not an integer >= 0 (nothing is changed then).
        """
        self.episode = read_counter(counters, "episode", type(self).__name__)

    def reset_env(self) -> Tuple[Any, Dict[str, Any]]:
        """``env.reset()``, seeded with ``self.seed`` on the agent's first episode (episode 0 of
        the whole run, so resets after :meth:`restore_counters` of finished episodes are unseeded)."""
        if self.episode == 0 and self.seed is not None:
            return self.env.reset(seed=self.seed)
        return self.env.reset()


def check_episode_result(result: object) -> Mapping[str, Any]:
    """``result``, what :meth:`Agent.run_one_episode` returned, when it keeps the contract: a mapping
    with a finite number ``reward`` and a whole number ``steps`` >= 0.

    Raises:
        EpisodeResultError: ``run_one_episode returned None; expected a mapping with 'reward' and 'steps'``,
            and the like, naming the value.
    """
    if not isinstance(result, Mapping):
        raise EpisodeResultError(
            f"run_one_episode returned {_shown(result)}; expected a mapping with 'reward' and 'steps'"
        )
    missing = [key for key in ("reward", "steps") if key not in result]
    if missing:
        raise EpisodeResultError(
            f"run_one_episode returned a mapping without {' and '.join(map(repr, missing))} "
            f"(keys: {sorted(map(str, result))})"
        )
    reward, steps = result["reward"], result["steps"]
    if not _is_number(reward) or not math.isfinite(reward):
        raise EpisodeResultError(f"run_one_episode returned reward {_shown(reward)}; expected a finite number")
    if not (_is_number(steps) and float(steps).is_integer() and steps >= 0):
        raise EpisodeResultError(f"run_one_episode returned steps {_shown(steps)}; expected a whole number >= 0")
    return result


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _shown(value: object) -> str:
    """``value`` for a one-line message: its repr (cut short) and, unless plain, its type."""
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    plain = value is None or type(value) in (int, float, str, bool, list, tuple, dict)
    return text if plain else f"{text} (a {type(value).__name__})"
