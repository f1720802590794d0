"""Train a robot until its deterministic policy reaches a target return.

    manager = parl.Manager({"RL": settings}); ...add agents...
    result = train_until(manager, settings, make_env, target=475.0, max_steps=100_000, seed=0)

Every example trains this way: the Manager runs the agents while this loop
gathers episode statistics, prints progress, and every ``check_interval``
env steps (once the recent training return reaches ``check_from``) copies
the weights into a separate evaluator task and plays greedy episodes with
:func:`~parl.utils.evaluation.evaluate`. Training stops at the first check
that reaches ``target`` and is confirmed on five times as many fresh
episodes (:func:`~parl.utils.evaluation.confirmed_check`); the policy of that check
(or of the best check, when none passed) is then evaluated on fresh seeds.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from parl.core.agent import Agent
from parl.core.agent_helper import AgentHelper
from parl.runtime.manager import Manager, TaskSettings
from parl.seeding import seed_everything
from parl.serving.computation_task import ComputationTask
from parl.utils.evaluation import CONFIRM_FACTOR, Check, check_seed, confirmed_check, evaluate, final_seed
from parl.validation import check_int


def greedy_check(
    evaluator: ComputationTask,
    make_env: Callable[[], Any],
    episodes: int,
    target: float,
    seed: int,
    confirm_episodes: Optional[int] = None,
) -> Check:
    """:func:`~parl.utils.evaluation.confirmed_check` of ``evaluator``'s deterministic policy on
    environments from ``make_env``."""
    return confirmed_check(
        lambda n, first_seed: evaluate(evaluator, make_env, n, seed=first_seed),
        episodes=episodes,
        target=target,
        seed=seed,
        confirm_episodes=confirm_episodes,
    )


def env_steps(manager: Manager, finished_steps: int) -> int:
    """Env steps so far: live counts of agents that keep one (``total_steps``, as GymAgent does),
    otherwise the steps of finished episodes."""
    counts = [getattr(agent, "total_steps", None) for agent in manager.agents]
    if counts and all(isinstance(c, int) for c in counts):
        return int(sum(counts))
    return finished_steps


def train_until(
    manager: Manager,
    settings: TaskSettings,
    make_env: Callable[[], Any],
    *,
    target: float,
    max_steps: int,
    seed: int,
    task: str = "RL",
    eval_episodes: int = 10,
    final_episodes: Optional[int] = None,
    check_interval: int = 1_000,
    check_from: Optional[float] = None,
    verbose: bool = True,
) -> Dict[str, float]:
    """Run ``manager`` until a greedy check of task ``task`` reaches ``target`` or ``max_steps`` env steps pass.

    Args:
        manager: a Manager with its agents added, not yet started.
        settings: the task's settings, used to build the evaluator task.
        make_env: builds one evaluation environment.
        target: mean deterministic return over ``eval_episodes`` that, confirmed on
            ``final_episodes`` fresh seeds (:func:`~parl.utils.evaluation.confirmed_check`), ends
            training.
        max_steps: env step budget (all agents together), counted live for agents with a
            ``total_steps`` counter (GymAgent), else at episode ends.
        seed: the run's seed: checks and the final evaluation play episodes of its own
            (:func:`~parl.utils.evaluation.check_seed`, :func:`~parl.utils.evaluation.final_seed`).
        final_episodes: episodes that confirm a check that reached ``target``, and of the final
            evaluation on fresh seeds (None: ``CONFIRM_FACTOR`` (5) times ``eval_episodes``). A mean over 10 episodes
            of a policy that is at its target on average can still fall below it (a CartPole policy
            that falls early in 1 episode of 25 does so in about 1 evaluation of 3), so the
            confirmation and the final figure are taken over more episodes than a check.
        check_interval: env steps between greedy checks.
        check_from: checks start once the mean of the last 20 training returns reaches this (None: at once).

    Returns:
        ``train_seconds``, ``env_steps``, ``updates``, ``episodes``, ``greedy_check`` (the last check's
        mean return), ``best_greedy_check``, ``reached`` (a check passed: training stopped at the
        target) and ``greedy_mean_return`` (the policy that passed, or the best one, on fresh seeds).

    Raises:
        AgentError: the first error an agent hit.
    """
    check_int("max_steps", max_steps, 1)
    check_int("check_interval", check_interval, 1)
    final_episodes = (
        CONFIRM_FACTOR * eval_episodes if final_episodes is None else check_int("final_episodes", final_episodes, 1)
    )
    learner = manager.tasks[task]
    evaluator = settings.make_task("eval")
    start = time.perf_counter()
    manager.start()
    steps, finished_steps, episodes, recent, last_print, next_check = 0, 0, 0, [], start, 0
    check, best_check, best_weights, reached = float("nan"), float("-inf"), None, False
    try:
        while manager.running() and steps < max_steps:
            time.sleep(0.02)
            for episode in manager.new_episodes():
                finished_steps += int(episode["steps"])
                episodes += 1
                recent = (recent + [float(episode["reward"])])[-20:]
            steps = env_steps(manager, finished_steps)
            if manager.errors:
                raise manager.errors[0]
            mean_recent = float(np.mean(recent)) if recent else float("-inf")
            now = time.perf_counter()
            if verbose and now - last_print >= 2.0:
                last_print = now
                print(
                    f"[{now - start:5.1f}s] env steps {steps:7d}  updates {learner.update_steps:6d}  "
                    f"recent return {mean_recent:7.1f}  greedy check {check:7.1f}",
                    flush=True,
                )
            # After the first update every layer the algorithm learns with is built (layers are built
            # lazily), so a snapshot of the learner has all the weights the evaluator holds.
            ready = recent and learner.update_steps > 0 and (check_from is None or mean_recent >= check_from)
            if ready and steps >= next_check:
                next_check = steps + check_interval
                evaluator.set_algorithm_weights(learner.algorithm_weights())
                seeds = check_seed(seed, steps)
                result = greedy_check(evaluator, make_env, eval_episodes, target, seeds, final_episodes)
                check = result.score
                if result.passed or check > best_check:
                    best_check, best_weights = check, evaluator.algorithm_weights()
                if result.passed:
                    reached = True
                    break
    finally:
        manager.stop()
    if manager.errors:  # agents that failed as the last ones ended: the loop saw them no longer running
        raise manager.errors[0]
    train_seconds = time.perf_counter() - start
    # The policy of the best check (the last one when it reached the target): a greedy return
    # can drop again with further training, as checkpoint selection in SB3's EvalCallback admits.
    evaluator.set_algorithm_weights(best_weights if best_weights is not None else learner.algorithm_weights())
    returns: List[float] = evaluate(evaluator, make_env, final_episodes, seed=final_seed(seed))
    result = {
        "seed": seed,
        "train_seconds": train_seconds,
        "env_steps": steps,
        "updates": learner.update_steps,
        "episodes": episodes,
        "greedy_check": check,
        "best_greedy_check": best_check,
        "reached": reached,
        "greedy_mean_return": float(np.mean(returns)),
    }
    if verbose:
        print(f"trained {steps} env steps, {learner.update_steps} updates in {train_seconds:.1f} s (after imports)")
        print(f"greedy {final_episodes}-episode mean return: {result['greedy_mean_return']:.1f}")
    return result


def train_agents(
    task_settings: TaskSettings,
    make_env: Callable[[], Any],
    make_agent: Callable[[int], Agent],
    make_helper: Callable[[int], AgentHelper],
    *,
    agents: int,
    seed: int,
    target: float,
    max_steps: int,
    eval_episodes: int = 10,
    check_interval: int = 1_000,
    check_from: Optional[float] = None,
    placement: str = "threads",
    thread_placement: str = "one_core",
    verbose: bool = True,
) -> Dict[str, float]:
    """The robot of every single-task example, trained with :func:`train_until`.

    Seeds everything with ``seed``, builds a Manager with one task ``"RL"`` from
    ``task_settings`` and ``agents`` agents, agent ``i`` made by
    ``make_agent(seed * 1000 + i)`` with helper ``make_helper(seed * 1000 + i)``,
    placed by ``placement`` ("threads" or "cooperative"; see :class:`~parl.Manager`).
    The remaining arguments go to :func:`train_until`.
    """
    check_int("agents", agents, 1)
    seed_everything(seed)
    manager = Manager({"RL": task_settings}, placement=placement, thread_placement=thread_placement)
    for i in range(agents):
        agent_seed = seed * 1000 + i
        manager.add_agent(make_agent(agent_seed), {"RL": make_helper(agent_seed)})
    return train_until(
        manager,
        task_settings,
        make_env,
        target=target,
        max_steps=max_steps,
        seed=seed,
        eval_episodes=eval_episodes,
        check_interval=check_interval,
        check_from=check_from,
        verbose=verbose,
    )
