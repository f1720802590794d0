"""LearnerProcesses: one task's updates split between several learner processes.

    learners = LearnerProcesses(make_task, count=2, seed=0)   # make_task: a picklable () -> ComputationTask
    costs = learners.learn(batch)            # every learner learns its share; the whole batch's costs
    weights = learners.algorithm_weights()   # the same in every learner
    learners.close()

Each process builds the task with ``make_task`` after seeding its generators
with ``seed`` (the same initial weights, and PPO's minibatch order, in every
learner), joins the learner group (:func:`~parl.serving.learner_collective.join_learner_group`:
gloo on the CPU, NCCL with one GPU per learner) and then learns every batch it
is sent (:meth:`ComputationTask.join_learners <parl.ComputationTask.join_learners>`).

A task that serves predictions elsewhere and learns through the learners
(:mod:`parl.runtime.task_learners`) also puts them in its state
(:meth:`set_training_state`, :meth:`set_generator`) and takes learner 0's back
after each :meth:`update`.
"""

from __future__ import annotations

import multiprocessing
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from parl.core.batch import Transition
from parl.core.costs import Costs
from parl.seeding import seed_everything
from parl.serving.computation_task import AlgorithmWeights, ComputationTask
from parl.serving.learner_collective import LearnerAddress, free_endpoints, join_learner_group, learner_device
from parl.serving.skipped_updates import NonFiniteUpdatesError
from parl.serving.training_state import TrainingState
from parl.validation import check_int

#: Seconds a learner process is given to build its task and join the group.
START_TIMEOUT = 120.0


class LearnerFailed(RuntimeError):
    """A learner process raised; the message holds its traceback."""


class LearnerProcesses:
    """``count`` processes that learn one task together (see the module docstring).

    Args:
        make_task: a picklable zero-argument callable building the task (a module-level function).
        count: learners, >= 1.
        seed: the seed of every learner's generators.
        device: "cpu", "gpu" (one GPU per learner) or "auto".

    Raises:
        ValueError: a bad ``count`` or ``device`` (checked before any process starts).
        LearnerFailed: a learner could not build its task or join the group.
    """

    def __init__(
        self, make_task: Callable[[], ComputationTask], *, count: int, seed: int = 0, device: str = "cpu"
    ) -> None:
        self.count = check_int("learners", count, 1)
        self.device = learner_device(device, self.count)
        endpoints = free_endpoints(self.count + 1)
        context = multiprocessing.get_context("spawn")
        self._pipes: List[Connection] = []
        self._processes: List[Any] = []
        for rank in range(self.count):
            ours, theirs = context.Pipe()
            address = LearnerAddress(rank, self.count, endpoints)
            process = context.Process(
                target=_serve, args=(theirs, make_task, address, seed, self.device), daemon=True, name=f"learner-{rank}"
            )
            process.start()
            theirs.close()
            self._pipes.append(ours)
            self._processes.append(process)
        try:
            self._gather(START_TIMEOUT)
        except BaseException:
            self.close()
            raise

    def learn(self, batch: Transition[np.ndarray]) -> Costs:
        """Every learner learns ``batch`` (each its share); the costs of the whole batch."""
        return self._ask(("learn", batch))[0]

    def update(self, batch: Transition[np.ndarray]) -> Tuple[Costs, TrainingState]:
        """Every learner learns ``batch``; the whole batch's costs and learner 0's state after it (without
        the optimizer's)."""
        costs, state = self._ask(("update", batch))[0]
        return costs, state

    def training_state(self) -> TrainingState:
        """Learner 0's state, the optimizer's included (every learner holds the same)."""
        return self._ask(("state", None), ranks=1)[0]

    def set_training_state(self, state: TrainingState) -> None:
        """Put every learner in ``state`` (:meth:`ComputationTask.set_training_state
        <parl.ComputationTask.set_training_state>`)."""
        self._ask(("set_state", state))

    def set_generator(self, state: List[Any]) -> None:
        """Put every learner's CPU random generator in ``state`` (``paddle.get_rng_state("cpu")``)."""
        self._ask(("generator", state))

    def algorithm_weights(self) -> AlgorithmWeights:
        """The task's weights (learner 0's; every learner holds the same)."""
        return self._ask(("weights", None), ranks=1)[0]

    def all_weights(self) -> List[AlgorithmWeights]:
        """Every learner's weights, by rank (equal, up to float rounding)."""
        return self._ask(("weights", None))

    def close(self) -> None:
        """Stop the learners (idempotent)."""
        for pipe in self._pipes:
            try:
                pipe.send(("stop", None))
            except (OSError, ValueError):
                pass
        for process in self._processes:
            process.join(10)
            if process.is_alive():
                process.kill()
        for pipe in self._pipes:
            pipe.close()
        self._pipes, self._processes = [], []

    def __enter__(self) -> "LearnerProcesses":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ask(self, request: Tuple[str, Any], ranks: int = 0) -> List[Any]:
        pipes = self._pipes[:ranks] if ranks else self._pipes
        if not pipes:
            raise RuntimeError("the learner processes are closed")
        for pipe in pipes:
            pipe.send(request)
        return self._gather(None, pipes)

    def _gather(self, timeout: Any, pipes: Any = None) -> List[Any]:
        answers = []
        for rank, pipe in enumerate(self._pipes if pipes is None else pipes):
            if timeout is not None and not pipe.poll(timeout):
                raise LearnerFailed(f"learner {rank} did not start within {timeout:g} s")
            ok, value = pipe.recv()
            if not ok:
                error, text = value
                if isinstance(error, NonFiniteUpdatesError):  # stops the run as the task's own would
                    raise error
                raise LearnerFailed(f"learner {rank} failed:\n{text}")
            answers.append(value)
        return answers


def _serve(
    pipe: Connection,
    make_task: Callable[[], ComputationTask],
    address: LearnerAddress,
    seed: int,
    device: str,
) -> None:
    """A learner process: build and join, then answer requests until "stop"."""
    try:
        collective = join_learner_group(address, device=device)
        seed_everything(seed)
        task = make_task()
        task.track_grad_norm = True  # the norms go back to the robot's task with each state
        task.join_learners(collective)
    except BaseException as error:
        pipe.send((False, _failure(error)))
        return
    pipe.send((True, None))
    while True:
        kind, value = pipe.recv()
        if kind == "stop":
            return
        try:
            answer = _answer(task, address.rank, kind, value)
        except BaseException as error:
            pipe.send((False, _failure(error)))
            continue
        pipe.send((True, answer))


def _answer(task: ComputationTask, rank: int, kind: str, value: Any) -> Any:
    """A learner's answer to one request."""
    if kind == "learn":
        return task.learn(value)
    if kind == "update":
        costs = task.learn(value)
        state: Optional[TrainingState] = task.training_state(optimizer=False) if rank == 0 else None
        return costs, state
    if kind == "state":
        return task.training_state()
    if kind == "set_state":
        return task.set_training_state(value)
    if kind == "generator":
        import paddle

        return paddle.set_rng_state(value, "cpu")
    if kind == "weights":
        return task.algorithm_weights()
    raise ValueError(f"unknown learner request {kind!r}")


def _failure(error: BaseException) -> Tuple[Optional[BaseException], str]:
    """What a learner sends back for ``error``: the exception where it pickles, and its traceback."""
    import pickle

    text = traceback.format_exc()
    try:
        pickle.dumps(error)
    except Exception:
        return None, text
    return error, text
