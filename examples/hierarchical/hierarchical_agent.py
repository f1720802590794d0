"""The two-task robot: a goal policy picks subgoals, a goal-following policy walks to them.

    manager = parl.Manager({"goal": goal_settings, "follow": follow_settings})
    manager.add_agent(
        HierarchicalAgent(make_env(), seed=0),
        {"goal": parl.ExpReplayHelper(updates_per_step=1.0), "follow": parl.OnPolicyHelper(sample_interval=8)},
    )

Two ComputationTasks at two time resolutions drive one agent:

- ``goal`` (off-policy, e.g. DQN): one decision per subgoal. It sees the
  observation and picks one of the environment's ``landmarks``. When the
  subgoal is reached, or abandoned after ``subgoal_steps`` env steps, or the
  episode ends, the agent stores one transition (the observation at the
  choice, the subgoal, the env reward summed over the attempt, the observation
  at its end, terminated / truncated as the env said) and asks the helper to
  learn: the goal task learns each time a subgoal is achieved or aborted.
- ``follow`` (on-policy, e.g. A2C): one decision per env step. It sees the
  observation and the offset to the subgoal, and earns ``subgoal_reward`` on
  reaching it (plus ``shaping`` times the cells it came closer). Each attempt
  is one of its episodes, terminated on success and truncated on abort; its
  helper sends its steps every ``sample_interval`` (TRAINING_INTERVAL) steps,
  and at the end of each attempt.

The env's own reward reaches only the goal task; the follower learns from the
intrinsic reward alone (h-DQN, Kulkarni et al., 2016). With ``training``
False (evaluation) the goal policy is greedy and nothing is stored.
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

import parl
from parl.core.counters import read_counter
from parl.utils import LinearSchedule

ArrayDict = Dict[str, np.ndarray]


def follow_inputs(obs: np.ndarray, subgoal: np.ndarray) -> ArrayDict:
    """The follower's input: the observation and the offset from its first ``len(subgoal)`` entries
    (the position) to the subgoal."""
    return {"obs": np.concatenate([obs, subgoal - obs[: len(subgoal)]]).astype(np.float32)}


class HierarchicalAgent(parl.Agent):
    """Plays episodes with the tasks ``goal`` (subgoal choice) and ``follow`` (moves); see the module docstring.

    Args:
        env: a gymnasium environment with ``landmarks`` (a list of observations; the subgoals),
            e.g. :class:`four_rooms.FourRooms`.
        seed: seeds the first reset and the exploration.
        goal_dims: the leading entries of an observation that locate the robot (the goal space):
            a subgoal is the first ``goal_dims`` entries of a landmark, reached when the
            observation's first ``goal_dims`` entries equal them.
        epsilon: the goal policy's exploration rate over this agent's subgoal decisions.
        subgoal_steps: env steps before an unreached subgoal is abandoned.
        subgoal_reward: the follower's reward for reaching its subgoal.
        shaping: the follower's reward per unit of distance to the subgoal it makes up (the L1
            distance in the goal space times ``distance_scale``); 0 disables it.
        distance_scale: goal-space units to cells (``size - 1`` of the four-rooms grid).
        num_games: episodes to play (None: until stopped).
        subgoals: the subgoal observations (default: ``env.unwrapped.landmarks``).
    """

    GOAL = "goal"
    FOLLOW = "follow"
    #: What :meth:`counters` saves besides ``episode``.
    COUNTERS = ("total_steps", "decisions", "subgoals_reached")

    def __init__(
        self,
        env: Any,
        *,
        seed: int = 0,
        goal_dims: int = 2,
        epsilon: Optional[LinearSchedule] = None,
        subgoal_steps: int = 24,
        subgoal_reward: float = 1.0,
        shaping: float = 0.0,
        distance_scale: float = 1.0,
        num_games: Optional[int] = None,
        subgoals: Optional[Sequence[Sequence[float]]] = None,
    ) -> None:
        super().__init__(env, seed=seed, num_games=num_games)
        self.epsilon = epsilon if epsilon is not None else LinearSchedule(1.0, 0.05, 300)
        if not isinstance(goal_dims, int) or goal_dims < 1:
            raise ValueError(f"goal_dims must be an integer >= 1, got {goal_dims!r}")
        if not isinstance(subgoal_steps, int) or subgoal_steps < 1:
            raise ValueError(f"subgoal_steps must be an integer >= 1, got {subgoal_steps!r}")
        self.subgoal_steps = subgoal_steps
        self.subgoal_reward = float(subgoal_reward)
        self.shaping = float(shaping)
        self.distance_scale = float(distance_scale)
        landmarks = subgoals if subgoals is not None else getattr(env.unwrapped, "landmarks", None)
        if not landmarks:
            raise ValueError("HierarchicalAgent needs subgoals: pass subgoals= or an env with a `landmarks` list")
        self.goal_dims = goal_dims
        self.subgoals: List[np.ndarray] = [np.asarray(s, dtype=np.float32)[:goal_dims] for s in landmarks]
        self.rng = random.Random(seed)
        self.total_steps = 0  # env steps of this agent (training and evaluation alike)
        self.decisions = 0  # subgoals chosen while training (the epsilon schedule's clock)
        self.subgoals_reached = 0

    def counters(self) -> Dict[str, int]:
        """``episode`` and :attr:`COUNTERS`: env steps, subgoal decisions (the exploration
        schedule's clock) and subgoals reached."""
        return {**super().counters(), **{name: getattr(self, name) for name in self.COUNTERS}}

    def restore_counters(self, counters: Mapping[str, int]) -> None:
        """Take up the :meth:`counters` of an earlier run (see :meth:`parl.Agent.restore_counters`).

        Raises:
            ValueError: a counter is missing or is not an integer >= 0 (nothing is changed then).
        """
        values = {name: read_counter(counters, name, type(self).__name__) for name in self.COUNTERS}
        super().restore_counters(counters)
        for name, value in values.items():
            setattr(self, name, value)

    # -- the goal policy: one decision per subgoal ---------------------------------
    def choose_subgoal(self, obs: np.ndarray) -> int:
        """The index of the next subgoal: epsilon-greedy while training, greedy otherwise."""
        if self.training:
            explore = self.rng.random() < self.epsilon(self.decisions)
            self.decisions += 1
            if explore:
                return self.rng.randrange(len(self.subgoals))
        actions, _ = self.helpers[self.GOAL].predict({"obs": obs})
        return int(actions["action"][0])

    # -- the goal-following policy: one decision per env step ------------------------
    def intrinsic_reward(self, obs: np.ndarray, next_obs: np.ndarray, subgoal: np.ndarray, reached: bool) -> float:
        """The follower's reward for the step ``obs -> next_obs`` towards ``subgoal``."""
        reward = self.subgoal_reward if reached else 0.0
        if self.shaping:
            before = float(np.abs(subgoal - obs[: self.goal_dims]).sum()) * self.distance_scale
            after = float(np.abs(subgoal - next_obs[: self.goal_dims]).sum()) * self.distance_scale
            reward += self.shaping * (before - after)
        return reward

    def follow(self, obs: np.ndarray, subgoal: np.ndarray) -> Tuple[np.ndarray, float, bool, bool, bool]:
        """Walk towards ``subgoal`` until it is reached, abandoned or the episode ends.

        Returns the last observation, the env reward summed on the way, whether
        the subgoal was reached, and the env's terminated and truncated.
        """
        helper = self.helpers[self.FOLLOW]
        env_reward, terminated, truncated, reached = 0.0, False, False, False
        for step in range(1, self.subgoal_steps + 1):
            inputs = follow_inputs(obs, subgoal)
            actions, _ = helper.predict(inputs)
            next_obs, reward, terminated, truncated, _ = self.env.step(int(actions["action"][0]))
            self.total_steps += 1
            env_reward += float(reward)
            reached = bool(np.array_equal(next_obs[: self.goal_dims], subgoal))
            if self.training:
                # The follower's episode is this attempt: terminated on success, truncated when it is
                # abandoned or the env episode ends first (its value there is still worth bootstrapping).
                attempt_over = step == self.subgoal_steps or terminated or truncated
                helper.store_data(
                    inputs,
                    actions,
                    self.intrinsic_reward(obs, next_obs, subgoal, reached),
                    follow_inputs(next_obs, subgoal),
                    reached,
                    attempt_over and not reached,
                )
                helper.learn()
            obs = next_obs
            if reached or terminated or truncated:
                break
        return obs, env_reward, reached, terminated, truncated

    # -- the episode -------------------------------------------------------------------
    def run_one_episode(self) -> Dict[str, float]:
        goal_helper = self.helpers[self.GOAL]
        obs, _ = self.reset_env()
        total, steps_before, subgoals, reached_count = 0.0, self.total_steps, 0, 0
        terminated = truncated = False
        while not (terminated or truncated):
            choice = self.choose_subgoal(obs)
            start_obs = obs
            obs, env_reward, reached, terminated, truncated = self.follow(obs, self.subgoals[choice])
            if self.training:
                goal_helper.store_data(
                    {"obs": start_obs},
                    {"action": np.array([choice], dtype=np.int64)},
                    env_reward,
                    {"obs": obs},
                    terminated,
                    truncated,
                )
                goal_helper.learn()
            total += env_reward
            subgoals += 1
            reached_count += int(reached)
        self.subgoals_reached += reached_count
        return {
            "reward": total,
            "steps": self.total_steps - steps_before,
            "subgoals": subgoals,
            "subgoals_reached": reached_count,
        }
