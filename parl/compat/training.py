"""``parl.utils.train_agents``, ``train_until`` and ``greedy_check`` as they were before 0.2.0: a
Python-built robot trained until a greedy check reaches its target. Deprecated: a robot config run
by :class:`parl.experiment.train.trainer.Trainer` (``parl train``) does this with metrics, checkpoints and
resume.

    result = train_agents(settings, make_env, make_agent, make_helper, agents=4, seed=0,
                          target=475.0, max_steps=100_000)
    result["greedy_mean_return"]

The loop runs on today's pieces, the Trainer's own: the Manager runs the agents, the env step
count is the Trainer's (:func:`parl.experiment.train.trainer.env_steps`), and the checks are
:func:`parl.experiment.evaluation.confirmed_check` over :func:`parl.experiment.evaluation.evaluate`, seeded
by ``check_seed`` and ``final_seed``. Training stops at the first check that reaches ``target``
and is confirmed on fresh seeds; the policy of that check (else of the best one) is then evaluated
on ``final_episodes`` fresh episodes.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from parl.core.agent import Agent
from parl.core.agent_helper import AgentHelper
from parl.experiment.evaluation.greedy import CONFIRM_FACTOR, Check, check_seed, confirmed_check, evaluate, final_seed
from parl.experiment.train.trainer import RECENT_EPISODES, env_steps
from parl.runtime.manager import Manager, TaskSettings
from parl.seeding import seed_everything
from parl.serving.computation_task import ComputationTask
from parl.validation import check_int

Result = Dict[str, Union[int, float, bool]]
PRINT_SECONDS = 2.0  # between progress lines


def greedy_check(
    evaluator: ComputationTask,
    make_env: Callable[[], Any],
    episodes: int,
    target: float,
    seed: int,
    confirm_episodes: Optional[int] = None,
) -> Check:
    """:func:`~parl.experiment.evaluation.greedy.confirmed_check` of ``evaluator``'s deterministic policy on
    environments from ``make_env``."""
    return confirmed_check(
        lambda n, first_seed: evaluate(evaluator, make_env, n, seed=first_seed),
        episodes=episodes,
        target=target,
        seed=seed,
        confirm_episodes=confirm_episodes,
    )


def train_until(
    manager: Manager,
    settings: TaskSettings,
    make_env: Callable[[], Any],
    *,
    task: str = "RL",
    max_steps: int,
    target: float,
    seed: int,
    check_from: Optional[float] = None,
    check_interval: int = 1_000,
    eval_episodes: int = 10,
    final_episodes: Optional[int] = None,
    verbose: bool = True,
) -> Result:
    """Run ``manager`` (agents added, not started) until a greedy check of task ``task`` reaches
    ``target`` or ``max_steps`` env steps pass.

    Checks run every ``check_interval`` env steps once the mean of the last 20 training returns
    reaches ``check_from`` (None: at once), on an evaluator task built from ``settings``; a check of
    ``eval_episodes`` episodes passes when ``final_episodes`` more on fresh seeds confirm it (None:
    ``CONFIRM_FACTOR`` times ``eval_episodes``), which also is the size of the final evaluation.

    Returns:
        ``seed``, ``train_seconds``, ``env_steps``, ``updates``, ``episodes``, ``greedy_check`` (the
        last check's mean return), ``best_greedy_check``, ``reached`` (a check passed) and
        ``greedy_mean_return`` (the policy that passed, or the best one, on fresh seeds).

    Raises:
        AgentError: the first error an agent hit.
    """
    check_int("max_steps", max_steps, 1)
    check_int("check_interval", check_interval, 1)
    if final_episodes is None:
        final_episodes = CONFIRM_FACTOR * eval_episodes
    check_int("final_episodes", final_episodes, 1)
    learner = manager.tasks[task]
    evaluator = settings.make_task("eval")
    start = last_print = time.perf_counter()
    steps = finished_steps = episodes = next_check = 0
    recent: List[float] = []
    check, best_check, best_weights, reached = float("nan"), float("-inf"), None, False
    manager.start()
    try:
        while manager.running() and steps < max_steps:
            time.sleep(0.02)
            for episode in manager.new_episodes():
                finished_steps += int(episode["steps"])
                episodes += 1
                recent = (recent + [float(episode["reward"])])[-RECENT_EPISODES:]
            steps = env_steps(manager, finished_steps)
            if manager.errors:
                raise manager.errors[0]
            mean_recent = float(np.mean(recent)) if recent else float("-inf")
            if verbose and time.perf_counter() - last_print >= PRINT_SECONDS:
                last_print = time.perf_counter()
                print(
                    f"[{last_print - start:5.1f}s] env steps {steps:7d}  updates {learner.update_steps:6d}  "
                    f"recent return {mean_recent:7.1f}  greedy check {check:7.1f}",
                    flush=True,
                )
            # After the first update every layer is built, so the learner's weights fill the evaluator.
            ready = recent and learner.update_steps > 0 and (check_from is None or mean_recent >= check_from)
            if ready and steps >= next_check:
                next_check = steps + check_interval
                evaluator.set_algorithm_weights(learner.algorithm_weights())
                result = greedy_check(
                    evaluator, make_env, eval_episodes, target, check_seed(seed, steps), final_episodes
                )
                check = result.score
                if result.passed or check > best_check:
                    best_check, best_weights = check, evaluator.algorithm_weights()
                if result.passed:
                    reached = True
                    break
    finally:
        manager.stop()
    train_seconds = time.perf_counter() - start
    evaluator.set_algorithm_weights(best_weights if best_weights is not None else learner.algorithm_weights())
    returns = evaluate(evaluator, make_env, final_episodes, seed=final_seed(seed))
    outcome: Result = {
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
        print(f"greedy {final_episodes}-episode mean return: {outcome['greedy_mean_return']:.1f}")
    return outcome


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
) -> Result:
    """Seed everything with ``seed``, build a Manager with one task ``"RL"`` from ``task_settings``
    and ``agents`` agents (agent ``i`` is ``make_agent(seed * 1000 + i)`` with helper
    ``make_helper(seed * 1000 + i)``) placed by ``placement``, and train it with
    :func:`train_until`."""
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
