"""Shared harness of the learning tests: one self-checking agent, a step budget, a threshold.

With one agent the run is deterministic (no thread timing decides which
batches are joined), so a learning test gives the same numbers on every run.
The agent trains as the example's agent does; every ``check_every`` episodes it
plays a deterministic episode through the task (no data stored) and stops once
``streak`` in a row reach ``target``, or once the step budget is spent. The test
then evaluates the final policy on fresh seeds.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType
from typing import Any, Callable, Dict, List, Type

import numpy as np

import parl
from parl.utils import GymAgent, evaluate

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as a module (with ``examples/`` importable, as when run as a script)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"{name}_example", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


def self_checking(
    agent_class: Type[GymAgent],
    make_env: Callable[[], Any],
    *,
    budget: int,
    target: float,
    check_every: int = 5,
    streak: int = 5,
) -> Type[GymAgent]:
    """A subclass of ``agent_class`` that stops itself once its deterministic policy holds ``target``."""

    class SelfChecking(agent_class):  # type: ignore[misc, valid-type]
        checks: List[float] = []

        def run_one_episode(self) -> Dict[str, float]:
            result = super().run_one_episode()
            if self.total_steps >= budget:
                self.num_games = self.episode + 1
            elif self.episode % check_every == check_every - 1 and self._greedy(0) >= target:
                if min(self._greedy(k) for k in range(1, streak)) >= target:
                    self.num_games = self.episode + 1
            return result

        def _greedy(self, k: int) -> float:
            task = self.helpers[self.task].communicator._wrapper.task
            score = evaluate(task, make_env, 1, seed=100_000 + 10 * self.episode + k)[0]
            self.checks.append(score)
            return score

    SelfChecking.__name__ = f"SelfChecking{agent_class.__name__}"
    return SelfChecking


def run_single_agent(
    settings: parl.TaskSettings,
    agent: GymAgent,
    helper: parl.AgentHelper,
    make_env: Callable[[], Any],
    *,
    budget: int,
    episodes: int = 10,
    timeout: float = 600.0,
) -> Dict[str, Any]:
    """Train ``agent`` alone until it stops itself; returns steps, updates and the fresh-seed returns."""
    manager = parl.Manager({"RL": settings})
    manager.add_agent(agent, {"RL": helper})
    manager.start()
    manager.join(timeout=timeout)
    manager.stop()
    assert manager.errors == [], manager.errors
    assert agent.total_steps <= budget + 1_000  # the budget held (an episode ends whole)
    task = manager.tasks["RL"]
    returns = evaluate(task, make_env, episodes, seed=1_000_000)
    return {
        "steps": agent.total_steps,
        "updates": task.update_steps,
        "returns": returns,
        "mean": float(np.mean(returns)),
    }
