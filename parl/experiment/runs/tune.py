"""``parl tune``: a sweep's trials on Ray Tune, each one ``parl train`` run.

    plan = plan_sweep(config, ["tasks.RL.algorithm.epochs=5,10"])   # parl.experiment.runs.sweep
    rows = run_sweep(plan, max_concurrent=2)                        # a TrialRow per trial, in order

The Tuner grid-searches every axis of the plan (its config keys, with the values as typed) and an
axis ``sample`` (0 .. samples - 1); each trial loads the config with its overrides and trains it
with :func:`~parl.experiment.train.run.train_config`, as ``parl train`` does, in its own log dir. It
reports the run's figures, or the one line that ended it: a trial that fails is a row with its
error, and the others go on. Each trial asks Tune for the bundles of its plan
(:func:`~parl.experiment.runs.sweep.resource_bundles`), so trials never hold more CPUs than the cluster
has, and ``max_concurrent`` bounds how many run at once.

Ray: the one this process has joined, else the cluster at ``address``, else a local Ray bound to
127.0.0.1 with this machine's CPUs, shut down at the end (:class:`~parl.runtime.ray_cluster.session.RaySession`);
a trial that asks for more CPUs than this machine has is refused before a local Ray starts.
Tune keeps its own state under ``<sweep folder>/ray`` and runs each trial in the working directory
of the command (not in its trial folder), so relative paths mean what they mean to ``parl train``.
While the trials run, what Ray and Tune log and print goes to ``<sweep folder>/tune.log``
(:mod:`parl.experiment.runs.tune_log`): a trial that fails is its row's one line, its traceback there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from parl.experiment.config.callbacks import Callback
from parl.experiment.config.class_spec import one_line
from parl.experiment.runs.sweep import SweepPlan, Trial, TrialRow
from parl.experiment.runs.tune_log import tune_log
from parl.experiment.train.stop_signals import CatchSignals
from parl.runtime.ray_cluster.session import INSTALL_HINT, RaySession, import_ray

#: Tune's own folder (experiment state, its trial folders) under the sweep folder.
TUNE_FOLDER = "ray"
#: The grid axis of the samples.
SAMPLE_AXIS = "sample"
#: Environment set before Ray is first imported, unless the user set it: a local Ray leaves the
#: trials' output in its log files (their errors are rows of the table).
IMPORT_ENVIRONMENT = {"RAY_LOG_TO_DRIVER": "0"}
#: Environment while the sweep runs, unless the user set it: Tune prints no status of its own at
#: verbosity 0 (its older reporter), and hands each trial the setting to stay in the working directory.
# TUNE_DISABLE_SIGINT_HANDLER: a signal to the sweep asks its trials to stop and save (STOP_FILE),
# where Tune's own handler would end their processes with whatever they had not saved.
RUN_ENVIRONMENT = {"RAY_AIR_NEW_OUTPUT": "0", "RAY_CHDIR_TO_TRIAL_DIR": "0", "TUNE_DISABLE_SIGINT_HANDLER": "1"}
#: The file in the sweep's folder whose presence tells every trial to stop (written on SIGINT or
#: SIGTERM); each trial stops at its next episode's end and is saved as any stopped run.
STOP_FILE = "STOP"


class ClusterTooSmallError(ValueError):
    """A trial asks for more CPUs than the Ray cluster has (Tune would wait for them forever)."""


def import_tune() -> None:
    """Import ``ray.tune`` (after :func:`~parl.runtime.ray_cluster.session.import_ray`'s environment).

    Raises:
        ImportError: Ray or Ray Tune's dependencies are not installed; one line saying what to install.
    """
    if "ray" not in sys.modules:
        for key, value in IMPORT_ENVIRONMENT.items():
            os.environ.setdefault(key, value)
    try:
        import_ray()
        import ray.tune  # noqa: F401 - needs pandas, pyarrow, fsspec besides Ray
    except ImportError:
        raise ImportError(f"parl tune needs Ray Tune, which is not installed: {INSTALL_HINT}") from None


def run_sweep(
    plan: SweepPlan, *, max_concurrent: Optional[int] = None, address: Optional[str] = None
) -> List[TrialRow]:
    """Run every trial of ``plan`` on Ray Tune (see the module docstring); a row per trial, in order.

    Raises:
        ImportError: Ray Tune is not installed.
        ClusterTooSmallError: a trial asks for more CPUs than the cluster has, or, for a local Ray (no
            ``address``, no Ray joined), than this machine has: checked before Ray starts.
        RayJoinError: the cluster at ``address`` cannot be joined; one line.
    """
    import_tune()
    if address is None and not import_ray().is_initialized():  # a local Ray: this machine's CPUs, no more
        _check_cluster(float(os.cpu_count() or 1), plan, "this machine has", "; or --address of a larger cluster")
    wanted = max(_cpus(trial.bundles) for trial in plan.trials)
    session = RaySession.join(address, cpus_wanted=wanted)
    try:
        _check_cluster(session.ray.cluster_resources().get("CPU", 0.0), plan)
        with tune_log(plan.folder):  # Tune's tracebacks and Ray's reports there; a failed trial is a row
            rows = _fit(plan, max_concurrent)
            session.leave()  # a local Ray's last reports (a trial's process that died) go there too
    finally:
        session.leave()  # nothing more once left
    return [rows.get(t.index, TrialRow(t, None, "not run")) for t in plan.trials]


def _fit(plan: SweepPlan, max_concurrent: Optional[int]) -> Dict[int, TrialRow]:
    """Run the trials of ``plan`` on Ray Tune, on the Ray joined; trial index -> its row."""
    from ray import tune

    trainable = tune.with_resources(
        tune.with_parameters(run_trial, plan=plan),
        resources=lambda config: tune.PlacementGroupFactory([dict(b) for b in trial_of(plan, config).bundles]),
    )
    space = {axis.key: tune.grid_search(list(axis.values)) for axis in plan.axes}
    space[SAMPLE_AXIS] = tune.grid_search(list(range(plan.samples)))
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            max_concurrent_trials=max_concurrent,
            trial_name_creator=lambda t: trial_of(plan, t.config).name,
            trial_dirname_creator=lambda t: trial_of(plan, t.config).name,
        ),
        run_config=tune.RunConfig(
            name=TUNE_FOLDER,
            storage_path=plan.folder,
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=0),
        ),
    )
    stop_file = os.path.join(plan.folder, STOP_FILE)
    if os.path.exists(stop_file):
        os.remove(stop_file)  # an earlier sweep's

    def stop_trials(signum: int) -> None:
        with open(stop_file, "w", encoding="utf-8") as f:
            f.write(signal.Signals(signum).name)
        print(f"parl tune: {signal.Signals(signum).name}: the trials stop and are saved", file=sys.stderr, flush=True)

    with _environment(RUN_ENVIRONMENT), CatchSignals(stop_trials):  # a second signal ends the sweep at once
        results = tuner.fit()
    rows = {}
    for index in range(len(results)):  # a ResultGrid is indexed (it declares no __iter__)
        result = results[index]
        trial = trial_of(plan, result.config or {})
        rows[trial.index] = _row(trial, result.metrics or {}, result.error)
    return rows


def run_trial(config: Dict[str, object], plan: SweepPlan) -> None:
    """Tune's trainable: run the trial ``config`` names and report its figures (see :func:`trial_report`)."""
    import paddle
    from ray import tune

    # Tune ends a finished trial's process with SIGTERM; Paddle's handler would print a C++ "fatal
    # error" page for it. The trial's process is its own, so the default handler is put back.
    paddle.disable_signal_handler()
    tune.report(trial_report(plan, trial_of(plan, config)))


class StopWhenFileAppears(Callback):
    """Stops a trial's run at the first episode's end after ``path`` exists (the sweep got a signal);
    the stop reason names the signal the file holds."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_episode_end(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        if not os.path.exists(self.path):
            return None
        try:
            with open(self.path, encoding="utf-8") as f:
                name = f.read(16).strip() or "a signal"
        except OSError:
            name = "a signal"
        return f"the sweep got {name}"


def trial_of(plan: SweepPlan, config: Mapping[str, Any]) -> Trial:
    """The trial of ``plan`` whose values a Tune trial's ``config`` holds."""
    return plan.find([config[axis.key] for axis in plan.axes], int(config[SAMPLE_AXIS]))


def trial_report(plan: SweepPlan, trial: Trial) -> Dict[str, object]:
    """Train ``trial`` as ``parl train`` does, on as many cores of its own as its first bundle has
    whole CPUs (:func:`~parl.core_claims.claim_cores`); the run's result figures
    (numbers, flags, texts) and ``error``: the one line that ended it, empty when nothing did."""
    from parl.core_claims import claim_cores
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.train.run import run_trainer
    from parl.experiment.train.trainer import Trainer

    try:
        with claim_cores(int(trial.bundles[0].get("CPU", 0.0))):
            config = load_config(plan.path, trial.overrides)
            stop = StopWhenFileAppears(os.path.join(plan.folder, STOP_FILE))
            outcome = run_trainer(Trainer(config, progress=False, callbacks=[stop]))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a trial's failure is its row, not the sweep's
        return {"error": one_line(exc)}
    figures = {k: v for k, v in (outcome.result or {}).items() if isinstance(v, (bool, int, float, str))}
    return {**figures, "error": outcome.problem or ""}


def _row(trial: Trial, metrics: Mapping[str, object], error: Optional[BaseException]) -> TrialRow:
    if error is not None:
        return TrialRow(trial, None, _last_line(error))
    if "error" not in metrics:
        return TrialRow(trial, None, "the trial reported nothing")
    return TrialRow(trial, dict(metrics), str(metrics["error"]) or None)


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    """Within the block, the environment variables ``values`` that are not set are."""
    added = [key for key in values if key not in os.environ]
    os.environ.update({key: values[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _cpus(bundles: Tuple[Dict[str, float], ...]) -> float:
    return sum(bundle.get("CPU", 0.0) for bundle in bundles)


def _check_cluster(cpus: float, plan: SweepPlan, where: str = "the Ray cluster has", more: str = "") -> None:
    """Raise :class:`ClusterTooSmallError` for the first trial that asks for more than ``cpus`` CPUs."""
    for trial in plan.trials:
        if _cpus(trial.bundles) > cpus:
            raise ClusterTooSmallError(
                f"trial {trial.index} ({trial.name}) asks for {_cpus(trial.bundles):g} CPUs; {where} "
                f"{cpus:g} (fewer placement.workers, placement.worker_cpus or --trial-cpus{more})"
            )


def _last_line(exc: BaseException) -> str:
    """The error that ended a trial's process, as the first sentence of its last line of text (Ray wraps
    it in pages: ``The actor is dead because its worker process has died.``, then a paragraph)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    sentence, stop, _ = lines[-1].partition(". ")
    return sentence + stop.strip()
