"""PettingZooAgent: one agent that plays a multi-agent environment, one helper per environment agent.

    mapping = PolicyMapping("RL")                           # every environment agent on task RL
    agent = PettingZooAgent(simple_spread_v3.parallel_env(), policy_mapping=mapping, seed=0)
    helpers = {key: parl.OnPolicyHelper() for key in agent.helper_tasks(["RL"])}
    manager.add_agent(agent, helpers)                       # keys "agent_0", ... bound to task RL

Each environment agent has its own helper, keyed by its id and bound to the task the policy
mapping gives it, so a shared policy is several helpers feeding one task's wrapper, as several
agents' helpers do; their predictions batch with every other request of that task. Rewards,
terminations and truncations stay each agent's own: a helper stores only its agent's transitions,
and an agent that leaves mid-episode (terminated or truncated) closes its trajectory and is not
asked again; one that enters mid-episode starts with fresh recurrent states.

A Parallel env steps all live agents at once; an AEC env one agent a turn, where an agent's
transition runs from one of its turns to its next (its reward: all it got in between, as
``env.last()`` gives it), and its final turn, after the game ended, closes it.

``global_state`` names an input filled with ``env.state()`` at every step for every agent (the
environment's global state, where it has one), for a centralized critic (the MAPPO idea): the
actor reads the agent's own observation, the critic the global state.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from parl.multiagent.envs import action_space_of, env_agent_ids, is_multiagent, is_turn_based, observation_space_of
from parl.multiagent.mapping import MappingSource, PolicyMapping
from parl.utils.env_steps import EnvStepsAgent
from parl.utils.gym_agent import env_action_converter
from parl.utils.observations import ObservationMapper, chosen_mapper

ArrayDict = Dict[str, np.ndarray]


class PettingZooAgent(EnvStepsAgent):
    """Plays a PettingZoo environment (Parallel or AEC API) through one helper per environment agent.

    ``total_steps`` counts environment steps (a Parallel step of all agents, or one agent's turn in an
    AEC env) over the whole run, restored on resume. An episode's statistics: ``reward``, the mean
    return of the agents that played; ``steps``; and per task, ``reward_<task>``, the mean return of
    its agents (logged as ``episode/reward_<task>``).

    Args:
        env: a PettingZoo environment.
        policy_mapping: the task of each environment agent (see :class:`PolicyMapping`).
        seed: seeds the first reset and the action spaces.
        num_games: episodes to play (None: until stopped).
        global_state: the input name that carries ``env.state()`` to every agent's helper (None: none).
        observation_inputs: maps an observation to the input dict, as a function or its dotted path (None: by
            each agent's observation space, :func:`~parl.utils.observations.observation_mapper`: ``{"obs": ...}``
            for a Box, one input per key of a Dict); a subclass may override :meth:`observation_inputs` instead.

    Raises:
        ValueError: ``env`` is not a PettingZoo environment, ``policy_mapping`` is malformed, or
            ``global_state`` is set for an env without ``state()``.
    """

    def __init__(
        self,
        env: Any,
        *,
        policy_mapping: MappingSource = "RL",
        seed: int = 0,
        num_games: Optional[int] = None,
        global_state: Optional[str] = None,
        observation_inputs: Union[str, ObservationMapper, None] = None,
    ) -> None:
        super().__init__(env, seed=seed, num_games=num_games)
        if not is_multiagent(env):
            raise ValueError(
                f"PettingZooAgent plays PettingZoo environments (with possible_agents), got {type(env).__name__}"
            )
        self.policy_mapping = PolicyMapping(policy_mapping)
        self.agent_ids: List[str] = env_agent_ids(env)
        if global_state is not None and not callable(getattr(env, "state", None)):
            raise ValueError(f"global_state={global_state!r}: {type(env).__name__} has no state()")
        self.global_state = global_state
        self.turn_based = is_turn_based(env)
        self.to_env_action: Dict[str, Callable[[ArrayDict], Any]] = {}
        self._to_inputs: Dict[str, ObservationMapper] = {}
        for index, agent_id in enumerate(self.agent_ids):
            observations = observation_space_of(env, agent_id)
            self._to_inputs[agent_id] = chosen_mapper(observations, observation_inputs, "PettingZooAgent")
            space = action_space_of(env, agent_id)
            self.to_env_action[agent_id] = env_action_converter(space)
            space.seed(seed + index)

    # -- what the Manager and the config read --------------------------------------------------
    def helper_tasks(self, tasks: Sequence[str]) -> Dict[str, str]:
        """Helper key (an environment agent id) -> task name, by the policy mapping.

        Raises:
            ValueError: an agent no pattern matches, or one mapped to a task not in ``tasks``.
        """
        return self.policy_mapping.tasks_of(self.agent_ids, tasks)

    # -- hooks -----------------------------------------------------------------------------------
    def observation_inputs(self, agent_id: str, obs: Any) -> ArrayDict:
        """The model inputs of ``agent_id``'s observation; override to feed derived inputs.

        Raises:
            ValueError: by default, an observation that does not fit a Dict or Tuple space, naming the key.
        """
        return self._to_inputs[agent_id](obs)

    def act(self, agent_id: str, inputs: ArrayDict, states: ArrayDict) -> Tuple[ArrayDict, ArrayDict]:
        """Actions and next states of ``agent_id`` for one step; override to explore."""
        return self.helpers[agent_id].predict(inputs, states)

    # -- episodes --------------------------------------------------------------------------------
    def run_one_episode(self) -> Dict[str, Any]:
        returns: Dict[str, float] = {}
        steps = self._play_turns(returns) if self.turn_based else self._play_parallel(returns)
        return self._statistics(returns, steps)

    def _inputs(self, agent_id: str, obs: Any) -> ArrayDict:
        inputs = self.observation_inputs(agent_id, obs)
        if self.global_state is not None:
            inputs[self.global_state] = np.asarray(self.env.state(), dtype=np.float32)
        return inputs

    def _play_parallel(self, returns: Dict[str, float]) -> int:
        # The hooks a subclass did not override are called straight (this loop runs every agent's every step).
        helpers, to_env_action = self.helpers, self.to_env_action
        mapped = type(self).observation_inputs is PettingZooAgent.observation_inputs and self.global_state is None
        to_inputs = self._to_inputs if mapped else None
        own_act = type(self).act is not PettingZooAgent.act
        observations, _ = self.reset_env()
        inputs: Dict[str, ArrayDict] = {}
        states: Dict[str, ArrayDict] = {}
        steps = 0
        while self.env.agents:
            acting = list(self.env.agents)
            actions, next_states = {}, {}
            for agent_id in acting:
                if agent_id not in inputs:  # at the start, or entered mid-episode
                    inputs[agent_id] = self._inputs(agent_id, observations[agent_id])
                    states[agent_id] = helpers[agent_id].initial_states()
                if own_act:
                    actions[agent_id], next_states[agent_id] = self.act(agent_id, inputs[agent_id], states[agent_id])
                else:
                    actions[agent_id], next_states[agent_id] = helpers[agent_id].predict(
                        inputs[agent_id], states[agent_id]
                    )
            env_actions = {agent_id: to_env_action[agent_id](actions[agent_id]) for agent_id in acting}
            observations, rewards, terminations, truncations, _ = self.env.step(env_actions)
            steps += 1
            self.total_steps += 1
            for agent_id in acting:
                terminated = bool(terminations.get(agent_id, False))
                truncated = bool(truncations.get(agent_id, False))
                present = agent_id in observations
                # An agent gone without either flag left at a limit of the environment's: truncated.
                truncated = truncated or (not present and not terminated)
                if not present:
                    next_inputs = inputs[agent_id]
                elif to_inputs is not None:
                    next_inputs = to_inputs[agent_id](observations[agent_id])
                else:
                    next_inputs = self._inputs(agent_id, observations[agent_id])
                reward = float(rewards.get(agent_id, 0.0))
                returns[agent_id] = returns.get(agent_id, 0.0) + reward
                helpers[agent_id].store_data(
                    inputs[agent_id],
                    actions[agent_id],
                    reward,
                    next_inputs,
                    terminated,
                    truncated,
                    states[agent_id],
                    next_states[agent_id],
                )
                if terminated or truncated:
                    del inputs[agent_id], states[agent_id]
                else:
                    inputs[agent_id], states[agent_id] = next_inputs, next_states[agent_id]
            # Every agent's segment of this step is sent before any is waited for, so they join one update
            # (acted with the same weights) and the next step acts with the weights that learned them.
            for agent_id in acting:
                helpers[agent_id].hand_over()
            for agent_id in acting:
                helpers[agent_id].wait_for_updates()
        return steps

    def _play_turns(self, returns: Dict[str, float]) -> int:
        self.reset_env()
        states: Dict[str, ArrayDict] = {}
        pending: Dict[str, Tuple[ArrayDict, ArrayDict, ArrayDict, ArrayDict]] = {}
        steps = 0
        for agent_id in self.env.agent_iter():
            obs, reward, terminated, truncated, _ = self.env.last()
            inputs = self._inputs(agent_id, obs)
            reward = float(reward)
            returns[agent_id] = returns.get(agent_id, 0.0) + reward
            if agent_id in pending:  # the transition from its last turn to this one
                before, actions, old_states, next_states = pending.pop(agent_id)
                self.helpers[agent_id].store_data(
                    before, actions, reward, inputs, bool(terminated), bool(truncated), old_states, next_states
                )
                self.helpers[agent_id].learn()  # a turn ends one agent's transition: its helper learns alone
            if terminated or truncated:
                self.env.step(None)
                continue
            if agent_id not in states:
                states[agent_id] = self.helpers[agent_id].initial_states()
            actions, next_states = self.act(agent_id, inputs, states[agent_id])
            pending[agent_id] = (inputs, actions, states[agent_id], next_states)
            states[agent_id] = next_states
            self.env.step(self.to_env_action[agent_id](actions))
            steps += 1
            self.total_steps += 1
        return steps

    def _statistics(self, returns: Mapping[str, float], steps: int) -> Dict[str, Any]:
        by_task: Dict[str, List[float]] = defaultdict(list)
        for agent_id, total in returns.items():
            by_task[self.helpers[agent_id].task_name or agent_id].append(total)
        result: Dict[str, Any] = {
            "reward": float(np.mean(list(returns.values()))) if returns else 0.0,
            "steps": steps,
        }
        for task, totals in sorted(by_task.items()):
            result[f"reward_{task}"] = float(np.mean(totals))
        return result
