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

``random_moves`` makes agents explore: ``{"opponent": 0.3}`` has every agent mapped to task
``opponent`` play, on each of its turns with probability 0.3, a uniformly random legal action instead
of its policy's (legal: the ones the input ``action_mask`` marks, PettingZoo's classic games; every
action of the space when there is no such input). The probability may be a schedule of the agent's
``total_steps`` (:class:`parl.utils.LinearSchedule`). For a task that never learns (a self-play
opponent): random moves lead the learner into positions the opponent's own policy never reaches, and
its next moves still punish a missed answer there. For a task that learns off-policy (replay): the
learner's epsilon-greedy exploration. Refused for an on-policy learner, whose algorithm would take the
random actions as its policy's own.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from parl.multiagent.envs import action_space_of, env_agent_ids, is_multiagent, is_turn_based, observation_space_of
from parl.multiagent.mapping import MappingSource, PolicyMapping
from parl.utils.env_steps import EnvStepsAgent
from parl.utils.gym_agent import env_action_converter, model_action_converter
from parl.utils.observations import ObservationMapper, chosen_mapper
from parl.validation import check_range

ArrayDict = Dict[str, np.ndarray]

#: The input that marks an agent's legal actions (1: legal), read by ``random_moves``.
ACTION_MASK = "action_mask"


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
        random_moves: task name -> the probability (a number, or a schedule called with ``total_steps`` at
            the start of each episode),
            on each turn of an agent mapped to it, of a uniformly random legal action instead of the
            policy's (see the module docstring), in training episodes (an evaluation agent plays the
            policies). Only tasks whose helpers never learn (:class:`~parl.PredictOnlyHelper`) or learn
            off-policy (:class:`~parl.ExpReplayHelper`), so that no on-policy learner takes a random
            action for its policy's. None: none.

    Raises:
        ValueError: ``env`` is not a PettingZoo environment, ``policy_mapping`` is malformed,
            ``global_state`` is set for an env without ``state()``, or a ``random_moves`` probability is
            outside [0, 1] (a schedule: at a step) or names a task no agent is mapped to; at a training
            episode, a ``random_moves`` task whose helper learns on-policy.
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
        random_moves: Optional[Mapping[str, Union[float, Callable[[int], float]]]] = None,
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
        self._action_spaces: Dict[str, Any] = {}
        self._to_model_action: Dict[str, Callable[[Any], ArrayDict]] = {}
        for index, agent_id in enumerate(self.agent_ids):
            observations = observation_space_of(env, agent_id)
            self._to_inputs[agent_id] = chosen_mapper(observations, observation_inputs, "PettingZooAgent")
            space = action_space_of(env, agent_id)
            self.to_env_action[agent_id] = env_action_converter(space)
            space.seed(seed + index)
            self._action_spaces[agent_id] = space
            self._to_model_action[agent_id] = model_action_converter(space)
        self.random_moves: Dict[str, Union[float, Callable[[int], float]]] = self._checked_random_moves(random_moves)
        self._random_of: Dict[str, float] = {}  # agent id -> its chance of a random move, set each training episode
        self._rng = np.random.default_rng([seed, 0x52])

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
        """Actions and next states of ``agent_id`` for one step (a random legal action instead of the
        policy's with ``random_moves``' probability for its task); override to explore otherwise."""
        actions, next_states = self.helpers[agent_id].predict(inputs, states)
        chance = self._random_of.get(agent_id)
        if chance and self._rng.random() < chance:  # the action replaced, what else the task records kept
            actions = {**actions, **self._random_action(agent_id, inputs)}
        return actions, next_states

    # -- episodes --------------------------------------------------------------------------------
    def run_one_episode(self) -> Dict[str, Any]:
        # Evaluation agents (training False) play the policies as they are.
        self._random_of = self._random_agents() if self.random_moves and self.training else {}
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
        own_act = type(self).act is not PettingZooAgent.act or bool(self._random_of)
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
            try:
                for agent_id in acting:
                    helpers[agent_id].hand_over()
            finally:
                # Counted once the step's segments are handed over: a step budget reached by this count
                # finds them queued, and the drain before the stop learns them.
                self.total_steps += 1
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

    # -- random moves ------------------------------------------------------------------------------
    def _checked_random_moves(
        self, random_moves: Optional[Mapping[str, Union[float, Callable[[int], float]]]]
    ) -> Dict[str, Union[float, Callable[[int], float]]]:
        if random_moves is None:
            return {}
        if not isinstance(random_moves, Mapping):
            raise ValueError(f"random_moves: expected a mapping of task name to probability, got {random_moves!r}")
        mapped = {self.policy_mapping.task_of(agent_id) for agent_id in self.agent_ids}
        out: Dict[str, Union[float, Callable[[int], float]]] = {}
        for task, chance in random_moves.items():
            if task not in mapped:
                raise ValueError(
                    f"random_moves: no agent is mapped to task {task!r}; the mapped tasks are {sorted(mapped)}"
                )
            out[task] = chance if callable(chance) else check_range(f"random_moves[{task!r}]", chance, 0.0, 1.0)
        return out

    def _random_agents(self) -> Dict[str, float]:
        """Agent id -> the chance of a random move now, for the agents of the ``random_moves`` tasks."""
        out = {}
        for agent_id, helper in self.helpers.items():
            task = helper.task_name or ""
            chance = self.random_moves.get(task)
            if chance is None:
                continue
            if helper.learns and not helper.learns_off_policy:
                raise ValueError(
                    f"random_moves[{task!r}]: agent {agent_id!r}'s helper {type(helper).__name__} learns on-policy, "
                    "and its task would take random actions for its policy's; give random moves to tasks that "
                    "never learn (parl.PredictOnlyHelper) or learn off-policy (parl.ExpReplayHelper)"
                )
            out[agent_id] = (
                check_range(f"random_moves[{task!r}] at step {self.total_steps}", chance(self.total_steps), 0.0, 1.0)
                if callable(chance)
                else chance
            )
        return out

    def _random_action(self, agent_id: str, inputs: ArrayDict) -> ArrayDict:
        """A uniformly random legal action of ``agent_id``, as the model's action dict."""
        space = self._action_spaces[agent_id]
        mask = inputs.get(ACTION_MASK)
        if mask is not None and type(space).__name__ == "Discrete" and np.any(np.asarray(mask) > 0.5):
            action: Any = int(space.start) + int(self._rng.choice(np.flatnonzero(np.asarray(mask).reshape(-1) > 0.5)))
        else:
            action = space.sample()
        return self._to_model_action[agent_id](action)

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
