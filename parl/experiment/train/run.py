"""One training run as ``parl train`` makes it: the Trainer's result, or the one line that ended it.

    outcome = train_config(load_config("examples/configs/ppo_cartpole.yaml"), progress=False)
    if outcome.problem:
        print(f"parl train: {outcome.problem}")      # e.g. all 4 agents failed; first: agent 0, ...

``parl train``, ``parl serve`` and every trial of ``parl tune`` run through :func:`run_trainer`, so
they end a run the same way and report the same problems.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from parl.core.errors import AgentsFailedError
from parl.experiment.config.robot_config import RobotConfig
from parl.experiment.train.trainer import RunFailedError, Trainer
from parl.runtime.watchdog import describe_stuck


@dataclass
class RunOutcome:
    """How a run ended.

    Attributes:
        result: :meth:`Trainer.run`'s result (also when agents failed: the run was saved before it
            ended; None only when it ended before its result was written).
        problem: one line saying what went wrong (None when nothing did).
        stuck: the problem is agents that did not stop (the run itself ended and was saved).
        failed: the problem is a failure that ended the run (its agents', a callback's, the loop's
            own); the run was stopped and saved first (``result``).
    """

    result: Optional[Dict[str, object]]
    problem: Optional[str] = None
    stuck: bool = False
    failed: bool = False


def train_config(config: RobotConfig, *, resume: bool = False, progress: bool = True) -> RunOutcome:
    """Train the robot of ``config`` with a :class:`Trainer` (progress bar on stderr when ``progress``);
    see :func:`run_trainer`."""
    return run_trainer(Trainer(config, resume=resume, progress=progress))


def run_trainer(trainer: Trainer) -> RunOutcome:
    """Run ``trainer`` (``parl train``'s, ``parl serve``'s, a trial's).

    Agents that fail, a final checkpoint that is not written, and agents that did not stop are
    problems of the outcome; other errors (a refused checkpoint, a log dir that cannot be
    written...) are raised as :meth:`Trainer.run` raises them.
    """
    try:
        result = trainer.run()
    except (AgentsFailedError, RunFailedError) as exc:
        if exc.result is not None and exc.result["checkpoint"] is not None:
            return RunOutcome(exc.result, f"{exc}; final checkpoint {exc.result['checkpoint']}", failed=True)
        return RunOutcome(exc.result, str(exc), failed=True)
    if result["checkpoint"] is None:
        return RunOutcome(result, f"final checkpoint not written: {result['checkpoint_error']}")
    if trainer.manager is not None and trainer.manager.not_stopped:
        problem = (
            f"{_stopped_by(str(result['stop_reason']))}; final checkpoint {result['checkpoint']}; "
            f"{describe_stuck(trainer.manager.not_stopped)}"
        )
        return RunOutcome(result, problem, stuck=True)
    return RunOutcome(result)


def _stopped_by(stop_reason: str) -> str:
    """``stopped by SIGINT`` for a signal's stop reason (``signal SIGINT``), else ``stopped (<reason>)``."""
    if stop_reason.startswith("signal "):
        return f"stopped by {stop_reason[len('signal ') :]}"
    return f"stopped ({stop_reason})"
