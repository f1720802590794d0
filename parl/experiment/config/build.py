"""From a checked :class:`~parl.experiment.config.robot_config.RobotConfig` to a robot.

    config = load_config("configs/ppo_cartpole.yaml")
    manager = build_manager(config)        # tasks, agents and helpers; not started
    manager.start()

Agent ``index`` plays in its own environment with seed ``seed * 1000 + index``;
its helpers get that seed too when they take ``seed`` and the config gives
none. Nested class specs among the options are built afresh for each object,
so no two agents share an exploration schedule or a buffer.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import parl
from parl.experiment.config.class_spec import build_checked
from parl.experiment.config.robot_config import RobotConfig
from parl.validation import check_int

#: Between the seeds of one agent's helpers (several where it plays a multi-agent environment).
HELPER_SEED_STRIDE = 7919


def agent_seed(config: RobotConfig, index: int) -> int:
    """The seed of agent ``index``: ``seed * 1000 + index``."""
    return config.seed * 1000 + check_int("index", index, 0)


def task_settings(config: RobotConfig, name: str) -> parl.TaskSettings:
    """The TaskSettings of task ``name`` (the Manager's, or a separate evaluator's).

    Raises:
        ValueError: no task is called ``name``.
    """
    if name not in config.tasks:
        raise ValueError(f"no task {name!r}; tasks are {sorted(config.tasks)}")
    task = config.tasks[name]
    batching, transforms = task.batching, task.transforms
    return parl.TaskSettings(
        task.algorithm_func(),
        batching=batching.batching(),
        normalize_inputs=transforms.normalize_inputs,
        input_clip=transforms.input_clip,
        reward_scale=transforms.reward_scale,
        reward_clip=transforms.reward_clip,
        max_skipped_updates=task.max_skipped_updates,
        learners=task.learners,
        learner_device=task.learner_device,
    )


def make_env(config: RobotConfig) -> Any:
    """A new environment, as ``env`` says."""
    return config.env.make()


def make_agent(config: RobotConfig, index: int, *, seed: Optional[int] = None, env: Any = None) -> parl.Agent:
    """Agent ``index``, in a new environment (or ``env``): ``cls(env, seed=seed * 1000 + index, **kwargs)``;
    ``seed`` replaces that seed (evaluation agents), ``env`` the environment (one that records, say).

    Raises:
        ConfigError: the agent class fails in its constructor (one line at ``agent``).
    """
    seed = agent_seed(config, index) if seed is None else seed
    return build_checked(config.agent, args=(make_env(config) if env is None else env,), extra={"seed": seed})


def make_helpers(config: RobotConfig, index: int, agent: Optional[parl.Agent] = None) -> Dict[str, parl.AgentHelper]:
    """Agent ``index``'s helpers: one per task, by task name, or those ``agent`` plays with (its
    :meth:`~parl.Agent.helper_tasks`: one per environment agent of a multi-agent environment), each
    built from its task's ``helper``. Each gets ``seed=<agent seed>`` if it takes ``seed`` and the config
    gives none; several of one agent's helpers keyed by environment agents: the k-th ``+ k * HELPER_SEED_STRIDE``."""
    by_task = {name: name for name in config.tasks}
    keys = by_task if agent is None else agent.helper_tasks(list(config.tasks))
    stride = 0 if keys == by_task else HELPER_SEED_STRIDE  # one helper per task: all on the agent's seed
    out = {}
    for k, (key, name) in enumerate(keys.items()):
        spec = config.tasks[name].helper
        out[key] = spec.build(extra=spec.defaults_for({"seed": agent_seed(config, index) + k * stride}))
    return out


def build_manager(config: RobotConfig) -> parl.Manager:
    """A Manager with every task (sharing the parts ``shared`` names), and ``agents`` agents with
    their helpers; not started, in the placement of the config's ``placement`` block. Each agent's
    environment is the placement's (:meth:`parl.Manager.environment`): a new one, or a stand-in that
    a remote client plays (placement ``rlx``'s slots, ``agents`` of them)."""
    manager = parl.Manager(
        {name: task_settings(config, name) for name in config.tasks},
        placement=config.placement.options,
        shared=config.shared,
        thread_placement=config.thread_placement,
        stall_seconds=config.stall_seconds,
        restart_agents=config.faults.restart_agents,
        self_play=[] if config.self_play is None else [config.self_play.settings(config.seed)],
    )
    for index in range(config.agents):
        env = manager.environment(lambda: make_env(config))
        agent = make_agent(config, index, env=env)
        manager.add_agent(agent, make_helpers(config, index, agent), env_factory=lambda: make_env(config))
    return manager
