"""The training loop behind ``parl train``: one robot from its config, observed, checkpointed, resumable.

    config = load_config("examples/configs/ppo_cartpole.yaml")
    result = Trainer(config, resume=False).run()

The Manager runs the agents while this loop, in the main thread:

- logs every finished episode and, every ``log_seconds``, each task's costs,
  batch sizes and latencies (:mod:`parl.experiment.train.metrics`), and draws the
  progress bar;
- every ``evaluation.every_steps`` env steps (from the start, or once the
  training returns reach ``evaluation.start_return`` or ``start_fraction`` of
  the way to the target: :mod:`parl.experiment.config.evaluation_start`) copies the weights
  into evaluator tasks and plays deterministic episodes with evaluation agents
  (:mod:`parl.experiment.evaluation.agents`); training stops at the first evaluation
  whose mean reaches ``train.target_return`` and is confirmed by five times
  as many episodes on fresh seeds (:func:`parl.experiment.evaluation.greedy.confirmed_check`),
  and keeps the weights of the best evaluation (the one that passed, when one
  did), in memory and, with each checkpoint, as ``<log_dir>/checkpoints/best``;
- saves a checkpoint every ``checkpoint.every_steps`` env steps or
  ``checkpoint.every_minutes``, at the end, and when SIGINT or SIGTERM
  arrives (the run then stops cleanly);
- shows every episode, task-metrics, evaluation and checkpoint to the
  config's ``callbacks`` (:mod:`parl.experiment.config.callbacks`), any of which may
  stop the run.

Training ends at the step budget, the target, a signal, a callback's request, or when
every agent has played its games; an agent's error ends it (stop reason ``agents failed``) with an
:class:`~parl.core.errors.AgentsFailedError` holding every agent error of the run.
Otherwise the policy of the evaluation that passed (else of the best one; the
learners' when none ran) plays ``evaluation.final_episodes`` episodes on seeds no
evaluation used (:func:`parl.experiment.evaluation.greedy.final_seed`): the run's final figure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, TextIO, Type

import numpy as np
import yaml

from parl.core.errors import AgentsFailedError, brief, failure_summary
from parl.core.specs import zeros
from parl.experiment.config.build import build_manager, make_agent, task_settings
from parl.experiment.config.callbacks import CALLBACK_STOP, Callback, Callbacks
from parl.experiment.config.evaluation_start import EvaluationStart
from parl.experiment.config.robot_config import RobotConfig
from parl.experiment.evaluation.agents import copy_weights, evaluate_agents
from parl.experiment.evaluation.greedy import CONFIRM_FACTOR, check_seed, confirmed_check, final_seed
from parl.experiment.evaluation.remote import remote_evaluation
from parl.experiment.train.checkpoints import (
    CheckpointManager,
    CheckpointWriteError,
    NotWritableError,
    best_checkpoints,
    check_writable,
)
from parl.experiment.train.metrics import MetricsWriter, RobotMetrics
from parl.experiment.train.progress import ProgressBar
from parl.experiment.train.run_counters import check_best_counters, check_run_counters
from parl.experiment.train.snapshot import write_snapshot
from parl.experiment.train.stop_signals import CatchSignals
from parl.runtime.manager import Manager, StopTimeoutError
from parl.runtime.remote_evaluation import RemoteEvaluation
from parl.seeding import seed_everything
from parl.serving.checkpoint_format import CheckpointError
from parl.serving.computation_task import ComputationTask

logger = logging.getLogger("parl")

RECENT_EPISODES = 20  # training returns averaged for the progress bar and the evaluations' start rule
#: The stop reason of a run that an agent's error ended (the run then raises AgentsFailedError).
AGENTS_FAILED = "agents failed"
TARGET_REACHED = "target return"  # the stop reason of a run whose evaluation reached its target, confirmed
STEP_BUDGET = "step budget"  # the stop reason of a run that trained train.max_env_steps
GAMES_FINISHED = "agents finished their games"  # the stop reason of a run whose agents all returned
#: Seconds a run that stops at its step budget (or by a callback, or with its agents' games over)
#: gives the wrappers to learn the segments agents have already sent (the last segments of an
#: on-policy run wait in a queue for each other), so that the final checkpoint holds them.
DRAIN_SECONDS = 60.0


class Trainer:
    """Trains the robot of ``config`` (see the module docstring).

    Args:
        config: a validated robot config.
        resume: continue from the latest checkpoint under ``<log_dir>/checkpoints``.
        progress: draw the progress bar on ``stream``.
        stream: where the progress bar and the summary go (None: ``sys.stderr`` as it is now).
        log_seconds: seconds between task metric rows.
        callbacks: called besides those the config names (after them); see
            :mod:`parl.experiment.config.callbacks`.
        evaluate: evaluate at all (False: no evaluation, no target, no final evaluation; for a
            robot whose environments exist only elsewhere, as an RLX server's may).
        on_start: called with the Manager once it has started (``parl serve`` tells its address).
    """

    def __init__(
        self,
        config: RobotConfig,
        *,
        resume: bool = False,
        progress: bool = True,
        stream: Optional[TextIO] = None,
        log_seconds: float = 2.0,
        callbacks: Sequence[Callback] = (),
        evaluate: bool = True,
        on_start: Optional[Callable[[Manager], None]] = None,
    ) -> None:
        self.config = config
        self.resume = resume
        self.progress = progress
        # Read at each call, not bound when this module was imported: a redirected stderr then (a test's
        # capture, a notebook's) may be closed by the time a later run writes.
        self.stream = sys.stderr if stream is None else stream
        self.log_seconds = log_seconds
        self._remote: Optional[RemoteEvaluation] = None  # where the placement evaluates apart (a Ray actor)
        #: Whether the evaluation actor of a run on Ray was lost for good (evaluations then run here).
        self.evaluation_actor_lost = False
        self.extra_callbacks = list(callbacks)
        #: The callbacks of the current or last :meth:`run` (the config's, built afresh, then ``callbacks``).
        self.callbacks = Callbacks()
        self.evaluate = evaluate
        self.on_start = on_start
        self.checkpoints = CheckpointManager(os.path.join(config.log_dir, "checkpoints"), keep=config.checkpoint.keep)
        #: The checkpoint of the best evaluation: ``<log_dir>/checkpoints/best``.
        self.best_checkpoint = best_checkpoints(self.checkpoints.directory)
        #: The robot of the current or last :meth:`run` (None before it).
        self.manager: Optional[Manager] = None
        self._signal: Optional[int] = None

    # -- the run -------------------------------------------------------------
    def run(self) -> Dict[str, object]:
        """Train; returns ``seed``, ``env_steps``, ``episodes``, ``train_seconds``, ``updates`` (per
        task), ``stop_reason``, ``reached`` (training stopped at a confirmed target), ``last_eval``
        (mean return of the last evaluation, NaN if none), ``best_eval`` (the best evaluation's, NaN
        if none), ``evaluations`` (how many ran), ``no_evaluation`` (why none ran, in a few words;
        None when one did), ``final_eval`` (mean return of the final evaluation on fresh seeds, NaN when
        nothing trained), ``checkpoint`` (the final checkpoint's directory), ``resumed_from``,
        ``error`` (one line on what failed the run, else None) and ``agent_restarts`` (agents
        restarted after a failure, ``faults.restart_agents``); result.json in the log dir holds the same.

        A periodic checkpoint that cannot be written (a full disk, a read-only directory) is
        reported in one line on ``stream`` and training goes on; when the final one cannot be
        written, ``checkpoint`` is None and ``checkpoint_error`` says why (else it is None). Metrics
        that cannot be written are reported in one line on ``stream`` and switched off for the rest
        of the run (:class:`~parl.experiment.train.metrics.MetricsWriter`); training goes on. Agents
        stuck in their environment when the run stops do not keep the final checkpoint from being
        written (no update is under way once the Manager has stopped); they are listed in
        ``self.manager.not_stopped``.

        Raises:
            AgentsFailedError: an agent failed; it holds every agent error of the run, the first
                first, and its message is one line. The run was stopped and saved as any other
                end first (a final checkpoint, no final evaluation, result.json with stop reason
                ``agents failed``); the result is the error's ``result``.
            FileNotFoundError: ``resume`` with no checkpoint to resume from.
            CheckpointError: ``resume`` and no checkpoint is intact (damaged ones are skipped,
                each reported in one line on ``stream``).
            NotWritableError: the log or checkpoint directory, or ``config.yaml`` in the log
                directory, cannot be written (checked and written first).
            ResultWriteError: ``result.json`` cannot be written at the end.
        """
        config = self.config
        check_writable(config.log_dir)
        check_writable(self.checkpoints.directory)
        _write_text(
            os.path.join(config.log_dir, "config.yaml"),
            yaml.safe_dump(config.to_dict(), sort_keys=False),
            NotWritableError,
        )
        with CatchSignals(self.interrupt):  # from here on a signal stops the run, which is then saved
            return self._run(config)

    def _run(self, config: RobotConfig) -> Dict[str, object]:
        seed_everything(config.seed)
        self.callbacks = Callbacks([spec.build() for spec in config.callbacks] + self.extra_callbacks)
        manager = build_manager(config)
        self.manager = manager
        state = _RunState(config.evaluation_start())
        self._warn_late_start()
        evaluators = {name: task_settings(config, name).make_task(f"{name}-eval") for name in config.tasks}
        _build_prediction_layers(evaluators.values())
        resumed_from = self._restore(manager, evaluators, state) if self.resume else None
        self._snapshot(state.steps if self.resume else None)
        bar = ProgressBar(config.train.max_env_steps, stream=self.stream) if self.progress else None
        with MetricsWriter(config.log_dir, report=self._report) as writer:
            metrics = RobotMetrics(manager, start_env_steps=state.steps)
            start = time.perf_counter() - state.elapsed_before
            failure: Optional[Exception] = None  # what ended the loop, if it failed
            try:
                if self._signal is not None:  # came before the run began, or while the robot was built
                    stop_reason = f"signal {signal.Signals(self._signal).name}"
                else:
                    manager.start()  # in the try: a placement that cannot start (an address taken) stops the rest
                    if self.on_start is not None:
                        self.on_start(manager)
                    self._remote = remote_evaluation(config)
                    try:
                        stop_reason = self._loop(manager, evaluators, writer, metrics, bar, state, start)
                    except Exception as exc:  # noqa: BLE001 - the run is stopped and saved, then this is raised
                        failure, stop_reason = exc, f"error: {brief(exc)}"
                        logger.error("the training loop failed", exc_info=exc)
                logger.info("training stops: %s", stop_reason)
                if stop_reason in (STEP_BUDGET, GAMES_FINISHED) or stop_reason.startswith(CALLBACK_STOP):
                    late = manager.drain(DRAIN_SECONDS)
                    if late:
                        self._report(
                            f"parl train: tasks {late} did not learn their last segments within {DRAIN_SECONDS:g} s"
                        )
            finally:
                if self._remote is not None:
                    self._remote.close()
                    self._remote = None
                unsafe = self._stop_manager(manager)
                if bar is not None:
                    bar.update(env_steps(manager, state.finished_steps), state.recent_mean(), extra=_eval_text(state))
                    bar.close()
            # A failed run is saved as any other end (no evaluation), then raised.
            failed = failure is not None or stop_reason == AGENTS_FAILED or self.callbacks.error is not None
            state.elapsed = time.perf_counter() - start
            state.steps = env_steps(manager, state.finished_steps)
            trained = all(task.update_steps > 0 for task in learning_tasks(manager).values())
            if trained and self.evaluate and not failed and self._evaluates_at_end(state, stop_reason):
                try:
                    self._evaluate(manager, evaluators, writer, state)
                except Exception as exc:  # noqa: BLE001 - an evaluation episode's agent failed: saved, raised
                    failure, stop_reason, failed = exc, f"error: {brief(exc)}", True
                    logger.error("the evaluation at the end of training failed", exc_info=exc)
            self._log_tasks(manager, writer, metrics, state.steps)
            if unsafe is None:
                final = self._save(manager, evaluators, state, kind="final")
                checkpoint_error = None if final is not None else state.checkpoint_error
            else:  # an update may still change the weights: a checkpoint could hold half of it
                final, checkpoint_error = None, unsafe
                self._report(f"parl train: no final checkpoint: {unsafe}; older checkpoints kept")
        no_evaluation = self._no_evaluation_reason(manager, state) if state.evaluations == 0 else None
        final_eval = float("nan")
        if trained and self.evaluate and not failed:
            try:
                with CatchSignals(self._interrupt_evaluation):
                    final_eval = self._final_evaluation(manager, evaluators, state)
            except _EvaluationInterrupted as exc:
                self._report(f"parl train: final evaluation interrupted by {exc}; the run is saved without it")
        result: Dict[str, object] = {
            "seed": config.seed,
            "env_steps": state.steps,
            "episodes": state.episodes,
            "train_seconds": state.elapsed,
            "updates": {name: task.update_steps for name, task in manager.tasks.items()},
            "stop_reason": stop_reason,
            "reached": stop_reason == TARGET_REACHED,
            "last_eval": state.last_eval,
            "best_eval": state.best_eval,
            "evaluations": state.evaluations,
            "no_evaluation": no_evaluation,
            "final_eval": final_eval,
            "checkpoint": final,
            "checkpoint_error": checkpoint_error,
            "resumed_from": resumed_from,
            "error": self._error_line(manager, failure),
            "agent_restarts": manager.restarts,
        }
        _write_text(os.path.join(config.log_dir, "result.json"), json.dumps(result, indent=1), ResultWriteError)
        if stop_reason == AGENTS_FAILED:
            raise AgentsFailedError(manager.errors, len(manager.agents), result)
        if result["error"] is not None:
            raise RunFailedError(str(result["error"]), result) from failure
        return result

    def _stop_manager(self, manager: Manager) -> Optional[str]:
        """Stop ``manager``; why its tasks cannot be saved (a wrapper thread still inside the task), or
        None. Agent threads that did not stop (stuck elsewhere than in their environment) are
        reported in one line; the tasks are saved all the same, as no update is under way."""
        try:
            manager.stop()
        except StopTimeoutError as exc:
            logger.error("%s", exc)
            if exc.wrappers:
                return f"the threads of tasks {exc.wrappers} did not stop"
            self._report(f"parl train: {exc}; the run is saved all the same (no update is under way)")
        return None

    def _error_line(self, manager: Manager, failure: Optional[Exception]) -> Optional[str]:
        """One line on what failed the run (its agents, the loop, a callback), or None."""
        if manager.errors:
            return failure_summary(manager.errors, len(manager.agents))
        if failure is not None:
            return f"the training loop failed: {brief(failure)}"
        return self.callbacks.error

    def _loop(
        self,
        manager: Manager,
        evaluators: Dict[str, ComputationTask],
        writer: MetricsWriter,
        metrics: RobotMetrics,
        bar: Optional[ProgressBar],
        state: "_RunState",
        start: float,
    ) -> str:
        config = self.config
        every_eval = config.evaluation.every_steps if self.evaluate else None
        every_ckpt = config.checkpoint.every_steps
        every_seconds = None if config.checkpoint.every_minutes is None else 60.0 * config.checkpoint.every_minutes
        next_eval = state.steps if every_eval is not None else None
        next_ckpt = state.steps + every_ckpt if every_ckpt is not None else None
        last_log = last_ckpt_time = time.perf_counter()
        while True:
            time.sleep(0.02)
            for episode in manager.new_episodes():
                state.finished_steps += int(episode.get("steps", 0))
                state.episodes += 1
                state.recent = (state.recent + [float(episode["reward"])])[-RECENT_EPISODES:]
                state.start.observe(float(episode["reward"]))
                # At the env steps of all finished episodes: episodes that ended during an evaluation
                # (when this loop is busy) keep their order and spacing on the curve.
                values = metrics.episode_values(episode)
                writer.scalars(state.finished_steps, values)
                self.callbacks.episode_end(state.finished_steps, values)
            state.steps = env_steps(manager, state.finished_steps)
            running = manager.running()  # read first: an agent that has ended has reported its error
            if manager.errors:
                return AGENTS_FAILED
            if self._signal is not None:
                return f"signal {signal.Signals(self._signal).name}"
            if not running:
                return GAMES_FINISHED
            if state.steps >= config.train.max_env_steps:
                return STEP_BUDGET
            if self.callbacks.stop_reason is not None:
                return self.callbacks.stop_reason
            now = time.perf_counter()
            if now - last_log >= self.log_seconds:
                last_log = now
                self._log_tasks(manager, writer, metrics, state.steps)
            if bar is not None:
                bar.update(state.steps, state.recent_mean(), extra=_eval_text(state))
            if (
                every_eval is not None
                and next_eval is not None
                and state.steps >= next_eval
                and self._eval_ready(manager, state)
            ):
                next_eval = state.steps + every_eval
                if self._evaluate(manager, evaluators, writer, state):
                    return TARGET_REACHED
            if (next_ckpt is not None and state.steps >= next_ckpt) or (
                every_seconds is not None and now - last_ckpt_time >= every_seconds
            ):
                state.elapsed = now - start
                self._save(manager, evaluators, state, kind="periodic")
                last_ckpt_time = time.perf_counter()
                if next_ckpt is not None and every_ckpt is not None:
                    next_ckpt = state.steps + every_ckpt

    def _evaluates_at_end(self, state: "_RunState", stop_reason: str) -> bool:
        """Whether the policy training ended with is evaluated once more, so that the final evaluation
        can choose it: the run's one evaluation without ``evaluation.every_steps``; with it, when the
        run ended by itself (its step budget, or its agents' games over; not a target reached, a
        callback's stop or a signal), evaluations have begun and training went on after the last (a
        run shorter than ``every_steps``, or one whose budget falls between two evaluations)."""
        if self.config.evaluation.every_steps is None:
            return True
        ended_by_itself = stop_reason in (STEP_BUDGET, GAMES_FINISHED)
        return ended_by_itself and state.evaluations > 0 and state.steps > state.evaluated_steps

    def _eval_ready(self, manager: Manager, state: "_RunState") -> bool:
        # After every task's first update its layers are all built (layers are built lazily),
        # so a snapshot of the learners has every weight the evaluators hold.
        if not state.recent or any(task.update_steps == 0 for task in learning_tasks(manager).values()):
            return False
        return state.start.ready(state.recent_mean())

    def _evaluate(
        self, manager: Manager, evaluators: Dict[str, ComputationTask], writer: MetricsWriter, state: "_RunState"
    ) -> bool:
        """One evaluation; True when it reaches the target return and its confirmation does too.

        With ``evaluation.pause_training`` the agents and updates wait meanwhile (the weights
        evaluated are the learners' of this env step), and an evaluation that reaches the target
        leaves them paused: training ends there, so the final checkpoint holds the policy that
        passed. A new best evaluation's weights are kept, and written as the best checkpoint with
        the next checkpoint (:meth:`_save`).
        """
        config = self.config
        target = config.train.target_return
        pause = config.evaluation.pause_training and manager.running()
        if pause:
            manager.pause()
        passed = best = False
        try:
            # One snapshot of the learners: played here (set into the evaluators) or by the evaluation
            # actor, and kept as the best weights when this evaluation is the best.
            weights = {name: manager.tasks[name].algorithm_weights() for name in evaluators}
            if self._remote is None:
                for name, task in evaluators.items():
                    task.set_algorithm_weights(weights[name])
            check = confirmed_check(
                lambda episodes, seed: self._play_weights(evaluators, weights, episodes, seed),
                episodes=config.evaluation.episodes,
                target=target,
                seed=check_seed(config.seed, state.steps),
                confirm_episodes=CONFIRM_FACTOR * config.evaluation.episodes,
            )
            returns, passed = check.returns, check.passed
            state.last_eval = check.score
            state.evaluations += 1
            state.evaluated_steps = state.steps
            best = passed or np.isnan(state.best_eval) or check.score > state.best_eval
            if best:
                state.best_eval, state.passed = check.score, passed
                state.best_weights = weights
                state.best_counters = {
                    "env_steps": state.steps,
                    "eval_mean_return": check.score,
                    "eval_episodes": len(returns),
                    "passed": passed,
                }
        finally:
            if pause and not passed:
                manager.resume()
        values = {
            "eval/mean_return": state.last_eval,
            "eval/min_return": float(np.min(returns)),
            "eval/max_return": float(np.max(returns)),
            "eval/episodes": float(len(returns)),
        }
        writer.scalars(state.steps, values)
        self.callbacks.evaluation(state.steps, values)
        return passed

    def _play(self, evaluators: Dict[str, ComputationTask], episodes: int, seed: int) -> List[float]:
        """Returns of ``episodes`` evaluation episodes of the config's agent class on ``evaluators``, seeded
        ``seed`` on, at most ``evaluation.concurrency`` at once."""
        config = self.config
        return evaluate_agents(
            lambda agent_seed: make_agent(config, 0, seed=agent_seed),
            evaluators,
            episodes=episodes,
            seed=seed,
            concurrency=config.evaluation.concurrency,
        )

    def _play_weights(
        self, evaluators: Dict[str, ComputationTask], weights: Dict[str, Any], episodes: int, seed: int
    ) -> List[float]:
        """Returns of ``episodes`` evaluation episodes with ``weights``: by the evaluation actor of a run
        on Ray, else here. An actor lost for good (Ray restarts it a few times first) is reported in
        one line and the evaluations go on here."""
        if self._remote is not None:
            try:
                return self._remote.play(weights, episodes, seed)
            except Exception as exc:  # noqa: BLE001 - Ray's errors for a lost actor differ by version
                self._report(
                    f"parl train: the evaluation actor was lost ({brief(exc)}); evaluations run here from now on"
                )
                logger.error("the evaluation actor was lost", exc_info=exc)
                self._remote.close()
                self._remote = None
                self.evaluation_actor_lost = True
        for name, task in evaluators.items():
            task.set_algorithm_weights(weights[name])
        return self._play(evaluators, episodes, seed)

    def _final_evaluation(self, manager: Manager, evaluators: Dict[str, ComputationTask], state: "_RunState") -> float:
        """Mean return of the policy of the evaluation that passed (else the best one; the learners'
        when none ran) over ``evaluation.final_episodes`` episodes on the run's fresh seeds."""
        config = self.config
        if state.best_weights is not None:
            for name, task in evaluators.items():
                task.set_algorithm_weights(state.best_weights[name])
            which = "passing" if state.passed else "best evaluated"
        else:
            copy_weights(manager.tasks, evaluators)
            which = "last"
        episodes = config.evaluation.final_episodes
        if episodes is None:
            episodes = CONFIRM_FACTOR * config.evaluation.episodes
        returns = self._play(evaluators, episodes, final_seed(config.seed))
        mean = float(np.mean(returns))
        if self.progress:
            print(
                f"final evaluation of the {which} policy: mean return {mean:.1f} over {episodes} fresh episodes",
                file=self.stream,
                flush=True,
            )
        return mean

    def _log_tasks(self, manager: Manager, writer: MetricsWriter, metrics: RobotMetrics, steps: int) -> None:
        """Write the task metrics of the interval since the last call, and show them to the callbacks;
        then the placement's own rows (an RLX server's), at env step ``steps`` unless they carry theirs."""
        values = metrics.collect(steps)
        writer.scalars(steps, values)
        self.callbacks.update(steps, values)
        for step, row in manager.placement_metrics():
            writer.scalars(steps if step is None else step, row)

    # -- checkpoints ----------------------------------------------------------
    def _save(
        self, manager: Manager, evaluators: Dict[str, ComputationTask], state: "_RunState", kind: str
    ) -> Optional[str]:
        """Write a checkpoint of ``kind`` (``periodic`` or ``final``), and the best checkpoint when a better
        evaluation came since the last one; None (reported in one line on ``stream``) when the checkpoint
        cannot be written.

        The best checkpoint goes with the others rather than at each evaluation: its files are synced
        to disk, which can take long on a busy disk while the agents play on, and a run loses no more
        of it to a crash than of its latest checkpoint."""
        counters = {
            "step": state.steps,
            "env_steps": state.steps,
            "episodes": state.episodes,
            "finished_steps": state.finished_steps,
            "elapsed_seconds": state.elapsed,
            **state.start.counters(),
            "agents": [agent.counters() for agent in manager.agents],
            "helpers": [{name: h.counters() for name, h in agent.helpers.items()} for agent in manager.agents],
        }
        if state.best_counters is not None:
            self._save_best(evaluators, state)
        try:
            path = self.checkpoints.save(manager.tasks, counters, step=state.steps, extras=manager.self_play_pools())
        except CheckpointWriteError as exc:
            state.checkpoint_error = str(exc)
            self._report(f"parl train: {exc}; older checkpoints kept")
            return None
        self.callbacks.checkpoint(state.steps, path, kind)
        return path

    def _save_best(self, evaluators: Dict[str, ComputationTask], state: "_RunState") -> None:
        """Write the best evaluation's weights as the best checkpoint, through the evaluators (every
        evaluation copies the learners' weights in first); a failure is reported in one line on
        ``stream`` and tried again with the next checkpoint."""
        counters, weights = state.best_counters, state.best_weights
        assert counters is not None and weights is not None  # kept by the best evaluation, not yet saved
        for name, task in evaluators.items():
            task.set_algorithm_weights(weights[name])
        try:
            path = self.best_checkpoint.save(evaluators, counters, step=int(counters["env_steps"]))
        except CheckpointWriteError as exc:
            self._report(f"parl train: best {exc}")
            return
        state.best_counters = None
        self.callbacks.checkpoint(int(counters["env_steps"]), path, "best")

    def _restore_best(self, evaluators: Dict[str, ComputationTask], state: "_RunState") -> None:
        """Take up the best evaluation of the run resumed (its score, and its weights for the final
        evaluation) from its best checkpoint, when there is an intact one."""
        try:
            found = self.best_checkpoint.load_latest(
                evaluators, report=self._report, check_counters=check_best_counters
            )
        except CheckpointError as exc:
            self._report(f"parl train: best checkpoint not resumed: {exc}")
            return
        if found is not None:
            counters = found[1]
            state.best_eval, state.passed = float(counters["eval_mean_return"]), bool(counters["passed"])
            state.best_weights = {name: task.algorithm_weights() for name, task in evaluators.items()}

    def _restore(self, manager: Manager, evaluators: Dict[str, ComputationTask], state: "_RunState") -> str:
        """Take up the newest intact checkpoint whose counters fit the robot (damaged ones, their
        counters included, are skipped in one line each); return its directory."""
        found = self.checkpoints.load_latest(
            manager.tasks,
            report=self._report,
            check_counters=lambda c: check_run_counters(c, manager.agents),
            extras=manager.self_play_pools(),
        )
        if found is None:
            raise FileNotFoundError(f"--resume: no checkpoint under {self.checkpoints.directory}")
        path, counters = found
        for agent, agent_counters, helper_counters in zip(manager.agents, counters["agents"], counters["helpers"]):
            agent.restore_counters(agent_counters)
            for name, helper in agent.helpers.items():
                helper.restore_counters(helper_counters.get(name, {}))
        state.episodes = int(counters["episodes"])
        state.finished_steps = int(counters["finished_steps"])
        state.elapsed_before = float(counters["elapsed_seconds"])
        state.start.restore(counters)
        state.steps = env_steps(manager, state.finished_steps)
        self._restore_best(evaluators, state)
        return path

    def _snapshot(self, resumed_at: Optional[int]) -> None:
        """Write the run's snapshot (:mod:`parl.experiment.train.snapshot`); a failure is reported in one line."""
        try:
            written = write_snapshot(self.config.log_dir, config_file=self.config.source, resumed_at=resumed_at)
        except OSError as exc:
            self._report(f"parl train: snapshot not written: {exc.strerror or exc} ({exc.filename}); training goes on")
            return
        if written is not None and resumed_at is not None:
            self._report(f"parl train: resumed with other parl sources than the run's snapshot; see {written}")

    def _warn_late_start(self) -> None:
        """One line when ``evaluation.start_return`` is above the target: no evaluation could run before
        training passes the target (a config moved to another task, say)."""
        evaluation, target = self.config.evaluation, self.config.train.target_return
        if evaluation.start_return is not None and target is not None and evaluation.start_return > target:
            self._report(
                f"parl train: evaluation.start_return ({evaluation.start_return:g}) is above train.target_return "
                f"({target:g}): evaluations wait for training returns beyond the target; "
                "evaluation.start_fraction follows the target"
            )

    def _no_evaluation_reason(self, manager: Manager, state: "_RunState") -> str:
        """Why a run ended without an evaluation, in a few words."""
        if not self.evaluate:
            return "evaluations are switched off"
        idle = sorted(name for name, task in learning_tasks(manager).items() if task.update_steps == 0)
        if idle:
            return f"task{'s' if len(idle) > 1 else ''} {', '.join(idle)} never updated"
        if not state.recent:
            return "no training episode ended"
        return state.start.why_not(state.recent_mean())

    def _report(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def interrupt(self, signum: int) -> None:
        """Stop the run as SIGINT or SIGTERM (``signum``) does, at any point before or during :meth:`run`:
        the training loop ends at its next look (at once when it starts after this), with stop reason
        ``signal SIGTERM``, and the run is saved as at any stop. Only the first call counts."""
        if self._signal is None:
            self._signal = signum

    def _interrupt_evaluation(self, signum: int) -> None:
        if self._signal is None:
            self._signal = signum
        raise _EvaluationInterrupted(signal.Signals(signum).name)


class _EvaluationInterrupted(BaseException):
    """Raised by a signal's handler to end the final evaluation (a BaseException, as KeyboardInterrupt
    is, so that nothing on the way takes it for an agent's error)."""


def summary_lines(result: Mapping[str, object], log_dir: str) -> List[str]:
    """:meth:`Trainer.run`'s ``result`` in a few lines, as ``parl train`` and the example scripts print it."""
    lines = [f"resumed from {result['resumed_from']}"] if result.get("resumed_from") else []
    evaluations = (
        f"warning: no evaluation ran: {result['no_evaluation']}"
        if result.get("no_evaluation")
        else f"evaluation mean return: last {result['last_eval']:.1f}, best {result['best_eval']:.1f}; "
        f"target reached: {'yes' if result['reached'] else 'no'}"
    )
    lines += [
        f"stopped ({result['stop_reason']}) after {result['env_steps']} env steps, {result['episodes']} episodes, "
        f"{result['train_seconds']:.1f} s; updates {result['updates']}",
        evaluations,
        f"final evaluation on fresh seeds, mean return: {result['final_eval']:.1f}",
        f"log dir: {log_dir}",
    ]
    if result.get("checkpoint") is not None:
        lines.append(f"checkpoint: {result['checkpoint']}")
    return lines


class _RunState:
    """Counters of one run (restored on resume); ``start`` is its evaluations' start rule."""

    def __init__(self, start: EvaluationStart) -> None:
        self.start = start
        self.evaluations = 0  # evaluations of this run (a resumed run counts its own)
        self.evaluated_steps = 0  # env steps at the last of them
        self.steps = 0
        self.finished_steps = 0
        self.episodes = 0
        self.recent: List[float] = []
        self.last_eval = float("nan")
        self.best_eval = float("nan")
        #: Task name -> weights of the evaluation of ``best_eval`` (None before one).
        self.best_weights: Optional[Dict[str, Dict[str, Dict[str, np.ndarray]]]] = None
        self.passed = False  # the evaluation of best_weights passed
        #: The counters of the best checkpoint while its weights are not written yet (else None).
        self.best_counters: Optional[Dict[str, Any]] = None
        self.elapsed = 0.0
        self.elapsed_before = 0.0
        self.checkpoint_error: Optional[str] = None

    def recent_mean(self) -> float:
        return float(np.mean(self.recent)) if self.recent else float("nan")


def env_steps(manager: Manager, finished_steps: int) -> int:
    """Env steps so far: live counts of agents that keep one (``total_steps``, as GymAgent does),
    otherwise the steps of finished episodes."""
    counts = [getattr(agent, "total_steps", None) for agent in manager.agents]
    kept = [c for c in counts if isinstance(c, int)]
    if counts and len(kept) == len(counts):
        return int(sum(kept))
    return finished_steps


def _eval_text(state: _RunState) -> str:
    return f"eval {state.last_eval:.1f}"


class RunFailedError(RuntimeError):
    """A run ended by a failure other than its agents' (a callback's, the training loop's own); the
    run was stopped and saved first. The message is one line.

    Attributes:
        result: the run's result as written to ``result.json`` (stop reason and ``error`` included).
    """

    def __init__(self, message: str, result: Dict[str, object]) -> None:
        super().__init__(message)
        self.result = result


class ResultWriteError(OSError):
    """``result.json`` could not be written at the end of a run (the final checkpoint was written
    before it, or reported); the message is one line naming the file and why."""


def _write_text(path: str, text: str, error: Type[OSError]) -> None:
    """Replace ``path`` with ``text`` in one rename, so a reader never sees half a file.

    Raises:
        error: one line naming ``path`` and why, when it cannot be written (a full disk, a
            read-only directory); the temporary file is removed and ``path`` left as it was.
    """
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise error(f"{path} not written: {exc.strerror or exc}") from None


def learning_tasks(manager: Manager) -> Dict[str, ComputationTask]:
    """The Manager's tasks that learn: all but the self-play opponents (``Manager.frozen_tasks``)."""
    return {name: task for name, task in manager.tasks.items() if name not in manager.frozen_tasks}


def _build_prediction_layers(tasks: Iterable[ComputationTask]) -> None:
    """One deterministic prediction on zeros per task, so the layers it uses are built now.

    Layers create their parameters on first call, drawing from the global random
    generator; built later, in the evaluating thread, they would draw at moments that
    depend on thread timing and change the agents' random streams.
    """
    for task in tasks:
        task.predict(zeros(task.input_specs, 1), zeros(task.state_specs, 1), deterministic=True)
