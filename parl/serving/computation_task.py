"""ComputationTask: one Algorithm behind a numpy-in, numpy-out interface.

    task = ComputationTask("RL", algorithm, normalize_inputs=True)
    actions, next_states = task.predict({"obs": obs_batch}, {})
    costs = task.learn(batch)          # {"loss": 0.12, ...} as floats
    task.save("ckpt/RL.pdckpt"); task.load("ckpt/RL.pdckpt")

It owns the optimizer, the update counter, the data transforms (input
normalization, reward scaling and clipping) and checkpoints. An update whose
loss or gradient is not finite is skipped (no optimizer step, weights and
optimizer state unchanged), counted in ``skipped_updates`` and in its costs,
and ``max_skipped_updates`` of them in a row raise
:class:`~parl.serving.skipped_updates.NonFiniteUpdatesError`, which stops the
run (:mod:`parl.serving.skipped_updates`). The task is safe to
call from the wrapper's prediction and training threads at once: the
optimizer step (the only write to weights) and each prediction run under one
lock, so a prediction never sees half-updated weights, while the training
forward and backward passes overlap predictions.

Tasks whose algorithms share parameters (an RL task and an auxiliary task on
one trunk; see :class:`~parl.Manager`'s ``shared``) share these locks too
(:meth:`ComputationTask.share_locks_with`): an update of either then excludes
the predictions and updates of both.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Tuple, Union, cast

import numpy as np
import paddle

from parl.core.algorithm import Algorithm, Predictor, StepCosts
from parl.core.batch import Transition, check_transition
from parl.core.behaviour import POLICY_VERSION
from parl.core.costs import Costs
from parl.core.model import Model, named_models
from parl.core.row_share import RowShare
from parl.core.specs import zeros
from parl.core.task_specs import TaskSpecs
from parl.layers.compiled import reads_mode
from parl.layers.layer_func import LayersNotBuilt, training_mode
from parl.layers.optimizer import Optimizer, grad_norm_value, grads_finite
from parl.layers.tensors import ReusedTensors, has_grad, set_has_grad, tensor
from parl.serving.checkpoint_format import (
    CheckpointError,
    CheckpointTarget,
    TaskCheckpoint,
    check_model_names,
    check_task_checkpoint,
    from_structural,
    read_task_checkpoint,
    task_contents,
    to_structural,
    write_task_checkpoint,
)
from parl.serving.learner_collective import LearnerCollective, batch_share, sum_step
from parl.serving.skipped_updates import DEFAULT_MAX_SKIPPED_UPDATES, SkippedUpdates
from parl.serving.training_state import TaskLearners, TrainingState
from parl.serving.transforms import InputNormalizer, RewardTransform

ArrayDict = Dict[str, np.ndarray]
#: :meth:`ComputationTask.algorithm_weights`: each model's weights (``{key: array}``) by attribute name and,
#: under :data:`NORMALIZER_KEY`, the input statistics (``{input: {statistic: array}}``).
AlgorithmWeights = Dict[str, Dict[str, Any]]

#: Key of the input normalizer's statistics in :meth:`ComputationTask.algorithm_weights`.
NORMALIZER_KEY = "_input_normalizer"


def _specs_of(group: str, doc: str) -> property:
    """A read-only property giving the task's ``specs.<group>``."""
    return property(lambda task: getattr(task.specs, group), doc=doc)


class ComputationTask:
    """Wraps one Algorithm; numpy in, numpy out.

    Args:
        name: the task's name in errors and checkpoints.
        algorithm: the Algorithm to serve.
        normalize_inputs: float inputs to normalize by running mean and std
            (True: every float input; False or empty: none). The statistics are
            updated from prediction batches (not deterministic ones), used for
            prediction and learning alike, and saved in checkpoints.
        input_clip: normalized inputs are clipped to [-input_clip, input_clip].
        reward_scale: rewards are multiplied by this before learning.
        reward_clip: then clipped to [-reward_clip, reward_clip] (None: no clipping).
        max_skipped_updates: optimizer steps in a row skipped for a non-finite loss or gradient
            that raise ``NonFiniteUpdatesError`` (default 100: a diverged network skips every
            step, while one overflow now and then is survived).
    """

    def __init__(
        self,
        name: str,
        algorithm: Algorithm,
        *,
        normalize_inputs: Union[bool, Sequence[str]] = False,
        input_clip: float = 10.0,
        reward_scale: float = 1.0,
        reward_clip: Optional[float] = None,
        max_skipped_updates: int = DEFAULT_MAX_SKIPPED_UPDATES,
    ) -> None:
        if not isinstance(algorithm, Algorithm):
            raise ValueError(f"task {name!r}: expected a parl.Algorithm, got {type(algorithm).__name__}")
        self.name = name
        self.algorithm = algorithm
        model = algorithm.model
        #: The model's specs, checked and normalized.
        self.specs = TaskSpecs.of_model(model, f"{type(model).__name__} (task {name!r})")
        if algorithm.records_behaviour:
            self.specs = self.specs.with_behaviour(f"{type(model).__name__} (task {name!r})")
            self.predict = self._predict_recording  # type: ignore[method-assign]
        self.normalizer = self._make_normalizer(normalize_inputs, input_clip)
        self.reward_transform = RewardTransform(scale=reward_scale, clip=reward_clip)
        self.update_steps = 0
        #: The weights version a copy acting apart from its learner was given (set by its placement);
        #: None: this task learns, and its version is :attr:`update_steps`.
        self.given_weights_version: Optional[int] = None
        #: Times :meth:`set_algorithm_weights` replaced the weights (a self-play opponent's refreshes): a
        #: change that copies of the task acting elsewhere must be sent, as they are sent updates.
        self.weights_replaced = 0
        #: Optimizer steps skipped for a non-finite loss or gradient (:attr:`skipped_updates`).
        self._skips = SkippedUpdates(name, max_skipped_updates)
        #: Measure each optimizer step's global gradient norm (set by metrics; a few ops per step
        #: unless the optimizer clips by norm and has it already).
        self.track_grad_norm = False
        #: (sum of the finite gradient norms measured, steps measured, steps whose norm was not
        #: finite), replaced as one value so a reader in another thread sees the three in step.
        self.grad_norm_total: Tuple[float, int, int] = (0.0, 0, 0)
        self._optimizer: Optional[Optimizer] = None
        self._parameters: List[paddle.Tensor] = []  # the optimizer's, once it is made
        self._pending_optimizer_state: Optional[dict] = None
        self._weights_lock = threading.Lock()
        self._learn_lock = threading.Lock()
        #: Act through the algorithm's compiled predictor (:meth:`Algorithm.compile_predict`) where it
        #: has one (the same results as ``predict``, bit for bit); False: always through ``predict``.
        self.fast_predict = True
        #: None: not made yet; False: none for this algorithm.
        self._predictor: Union[Predictor, None, Literal[False]] = None
        self._input_tensors = ReusedTensors()  # the fast path's, refilled per call
        self._state_tensors = ReusedTensors()
        #: The other learners of this task (:meth:`join_learners`); None: it learns alone.
        self._learners: Optional[LearnerCollective] = None
        #: While a batch split by the task is learned: (its first row in the whole batch, the whole's
        #: rows, this share's fraction of them).
        self._batch_share: Optional[Tuple[int, int, float]] = None
        #: Where this task's updates run (:meth:`learn_through`); None: here.
        self._remote: Optional[TaskLearners] = None
        self._learners_lr: Optional[float] = None  # the learners' learning rate, from their last state

    def _make_normalizer(
        self, normalize_inputs: Union[bool, Sequence[str]], input_clip: float
    ) -> Optional[InputNormalizer]:
        floats = {s.name: s.shape for s in self.input_specs if s.dtype.kind == "f"}
        if normalize_inputs is True:
            names = list(floats)
        elif normalize_inputs is False or normalize_inputs is None:
            names = []
        elif isinstance(normalize_inputs, (list, tuple)):
            names = list(normalize_inputs)
        else:
            raise ValueError(f"normalize_inputs must be a bool or a list of input names, got {normalize_inputs!r}")
        bad = [n for n in names if n not in floats]
        if bad:
            raise ValueError(f"task {self.name!r}: normalize_inputs names {bad}, float inputs are {sorted(floats)}")
        return InputNormalizer({n: floats[n] for n in names}, clip=input_clip) if names else None

    input_specs = _specs_of("inputs", "The observations an agent sends with each prediction (``specs.inputs``).")
    state_specs = _specs_of("states", "The recurrent states sent and answered with them (``specs.states``).")
    action_specs = _specs_of("actions", "The actions a prediction answers (``specs.actions``).")
    reward_specs = _specs_of("rewards", "The rewards a training batch carries (``specs.rewards``).")

    def share_locks_with(self, other: "ComputationTask") -> None:
        """Use ``other``'s weights and learn locks from now on.

        For tasks whose algorithms share parameters: the optimizer step of
        either task (the only write to weights) then never overlaps a
        prediction of the other, and their training passes never overlap, so
        gradients of one task's loss never reach the other's optimizer step
        on the shared parameters. Call it before either task serves requests
        (:class:`~parl.Manager` does, for the tasks its ``shared`` links).
        """
        if not isinstance(other, ComputationTask):
            raise ValueError(f"task {self.name!r}: expected a ComputationTask to share locks with, got {other!r}")
        self._weights_lock = other._weights_lock
        self._learn_lock = other._learn_lock

    def shares_locks_with(self, other: "ComputationTask") -> bool:
        """Whether this task and ``other`` exclude each other's updates and predictions."""
        return self._weights_lock is other._weights_lock and self._learn_lock is other._learn_lock

    # -- prediction ---------------------------------------------------------
    def predict(
        self, inputs: Mapping[str, np.ndarray], states: Mapping[str, np.ndarray], *, deterministic: bool = False
    ) -> Tuple[ArrayDict, ArrayDict]:
        """Batched actions and next states as numpy, keyed by spec name.

        ``deterministic`` asks the algorithm for greedy or mean actions
        (evaluation); such batches leave the input statistics unchanged.
        """
        predictor = self._predictor
        if self.fast_predict and predictor is not False:
            return self._predict_fast(predictor, inputs, states, deterministic)
        return self._predict_plain(inputs, states, deterministic)

    @property
    def weights_version(self) -> int:
        """The version of the weights predictions act with: :attr:`given_weights_version` where set,
        else the optimizer steps so far."""
        given = self.given_weights_version
        return self.update_steps if given is None else given

    def _predict_recording(
        self, inputs: Mapping[str, np.ndarray], states: Mapping[str, np.ndarray], *, deterministic: bool = False
    ) -> Tuple[ArrayDict, ArrayDict]:
        """:meth:`predict` of a task whose algorithm records its behaviour: the actions also hold
        :data:`~parl.core.behaviour.POLICY_VERSION`, the weights version read as the prediction
        starts (an update landing meanwhile makes it one step older than the weights used)."""
        version = self.weights_version
        actions, next_states = ComputationTask.predict(self, inputs, states, deterministic=deterministic)
        rows = len(next(iter(actions.values())))
        actions[POLICY_VERSION] = np.full((rows, 1), version, dtype=np.int64)
        return actions, next_states

    def _predict_plain(
        self, inputs: Mapping[str, np.ndarray], states: Mapping[str, np.ndarray], deterministic: bool
    ) -> Tuple[ArrayDict, ArrayDict]:
        st_t = {k: tensor(v) for k, v in states.items()}
        with self._weights_lock, paddle.no_grad(), training_mode(False):
            if self.normalizer is not None:
                if not deterministic:
                    self.normalizer.update(inputs)
                inputs = self.normalizer(inputs)
            in_t = {k: tensor(v) for k, v in inputs.items()}
            if deterministic:
                actions, next_states = self.algorithm.predict(in_t, st_t, deterministic=True)
            else:
                actions, next_states = self.algorithm.predict(in_t, st_t)
            return _to_numpy(actions), _to_numpy(next_states)

    def _predict_fast(
        self,
        predictor: Optional[Predictor],
        inputs: Mapping[str, np.ndarray],
        states: Mapping[str, np.ndarray],
        deterministic: bool,
    ) -> Tuple[ArrayDict, ArrayDict]:
        if predictor is None:
            # The first predictions go the plain way, which builds the layers the predictor reads.
            result = self._predict_plain(inputs, states, deterministic)
            self._compile()
            return result
        with self._weights_lock:
            if self.normalizer is not None:
                if not deterministic:
                    self.normalizer.update(inputs)
                inputs = self.normalizer(inputs)
            # The task's own tensors, refilled: only used under the lock, and read out (copied) before
            # it is released.
            in_t = self._input_tensors.fill(inputs)
            st_t = self._state_tensors.fill(states)
            grad_enabled = has_grad()
            set_has_grad(False)  # paddle.no_grad without its Python: the flag is per thread
            try:
                actions, next_states = predictor(in_t, st_t, deterministic)
            finally:
                set_has_grad(grad_enabled)
            return {k: v.numpy() for k, v in actions.items()}, {k: v.numpy() for k, v in next_states.items()}

    def _compile(self) -> None:
        """Ask the algorithm for its compiled predictor: False where it has none; None (ask again after the
        next prediction) while a layer it reads is not built."""
        try:
            predictor = self.algorithm.compile_predict()
        except LayersNotBuilt:
            return
        if predictor is None:
            self._predictor = False
        elif reads_mode(layer for _, model in self._models() for _, layer in model.named_layers()):
            self._predictor = _in_eval_mode(predictor)  # as the plain path runs (batch_norm reads it)
        else:
            self._predictor = predictor

    def initial_states(self, batch_size: int = 1) -> ArrayDict:
        """Zero recurrent states, shaped by the model's state specs."""
        return zeros(self.state_specs, batch_size)

    def build_layers(self, every_model: bool = False) -> None:
        """Build the layers a prediction uses, when some layer of the algorithm's models is not built
        yet, by one deterministic prediction on zeros (no gradient, evaluation mode, no normalizer
        update); with ``every_model``, those of every model, by :meth:`Algorithm.build_layers` (DQN's
        target network as well, a copy of the online one, as its first update would make it). Paddle's
        global random generator is put back as it was, so this draws no random numbers; the new
        layers' initial values are those of a prediction made now.

        :meth:`read_checkpoint` calls it, so a checkpoint's weights are checked against the shapes
        the model builds from its specs rather than only against each other.
        """
        if all(layer.built for _, model in self._models() for _, layer in model.named_layers()):
            return
        generator_state = paddle.get_rng_state()
        try:
            with self._weights_lock, paddle.no_grad(), training_mode(False):
                inputs = {k: tensor(v) for k, v in zeros(self.input_specs, 1).items()}
                states = {k: tensor(v) for k, v in zeros(self.state_specs, 1).items()}
                if every_model:
                    self.algorithm.build_layers(inputs, states)
                else:
                    self.algorithm.predict(inputs, states, deterministic=True)
        finally:
            paddle.set_rng_state(generator_state)

    # -- training -----------------------------------------------------------
    def join_learners(self, collective: LearnerCollective) -> None:
        """Learn as one of several learners of this task from now on, each a copy of it with the same
        weights, called with the same batches: each computes the gradient of its
        :class:`~parl.core.row_share.RowShare` of every step's rows, ``collective`` sums the parts,
        and each takes the same optimizer step, so the copies stay equal. The costs :meth:`learn`
        returns are then the whole batch's.

        The task splits each batch (rows, or whole segments where it has them) and ``Algorithm.learn``
        sees its share, unless the algorithm splits its own steps
        (:attr:`~parl.Algorithm.shares_rows_itself`, PPO's minibatches): it is then given the share
        and the whole batch.

        Raises:
            ValueError: ``collective`` has no ``share`` and ``sum_``.
        """
        if not (hasattr(collective, "share") and callable(getattr(collective, "sum_", None))):
            raise ValueError(f"task {self.name!r}: expected a LearnerCollective, got {collective!r}")
        self._learners = collective
        if self.algorithm.shares_rows_itself:
            self.algorithm.row_share = collective.share

    def learn_through(self, learners: TaskLearners) -> None:
        """Learn through ``learners`` from now on (see :mod:`parl.serving.training_state`): each batch
        is normalized and reward-transformed here, learned there, and the weights, algorithm state and
        update count after it are taken back under the weights lock, as an update here writes them.
        The learners start at the first update from this task's weights, algorithm and optimizer
        state (a checkpoint loaded before included) and this process's CPU random generator, so
        they draw what this task would have drawn; :meth:`stop_learners` stops them.

        Raises:
            ValueError: ``learners`` is not a TaskLearners, or this task is itself one of several learners.
        """
        needed = ("start", "update", "training_state", "set_training_state", "close")
        if not all(callable(getattr(learners, name, None)) for name in needed):
            raise ValueError(f"task {self.name!r}: expected TaskLearners, got {learners!r}")
        if self._learners is not None:
            raise ValueError(f"task {self.name!r} is one of several learners; it cannot learn through others")
        self._remote = learners

    def stop_learners(self, timeout: float = 10.0) -> None:
        """Stop the learners of :meth:`learn_through`, keeping their last state (optimizer included) for
        :meth:`save` and a later start; nothing without them. Their last state is lost when an update
        still holds the task ``timeout`` seconds on, or a learner failed."""
        remote = self._remote
        if remote is None or not remote.running:
            return
        try:
            if self._learn_lock.acquire(timeout=timeout):
                try:
                    state = remote.training_state()
                    with self._weights_lock:
                        self._adopt(state)
                finally:
                    self._learn_lock.release()
        finally:
            remote.close()

    def training_state(self, *, optimizer: bool = True) -> TrainingState:
        """What this task's updates change (:class:`~parl.serving.training_state.TrainingState`);
        ``optimizer``: with the optimizer's state (a restored one not yet applied included)."""
        self.build_layers()
        with self._weights_lock:
            return self._training_state(optimizer)

    def _training_state(self, optimizer: bool) -> TrainingState:
        """:meth:`training_state`, under the weights lock."""
        optimizer_state = self._optimizer_state() if optimizer else None
        return TrainingState(
            self._algorithm_weights(),
            self.algorithm.state(),
            self.update_steps,
            self._skips.total,
            optimizer_state,
            self.grad_norm_total,
            self.learning_rate(),
        )

    def set_training_state(self, state: TrainingState) -> None:
        """Take ``state`` from :meth:`training_state` (of a task built alike); its optimizer state,
        when it has one, replaces this task's.

        Raises:
            ValueError: weights of other models, or an algorithm state the algorithm refuses.
        """
        self.build_layers()
        with self._weights_lock:
            self._adopt(state)

    def _adopt(self, state: TrainingState) -> None:
        self._set_algorithm_weights(state.weights)
        self.algorithm.set_state(state.algorithm_state)
        self.update_steps = state.update_steps
        self._skips.total = state.skipped_updates
        self.grad_norm_total = state.grad_norm_total
        self._learners_lr = state.learning_rate
        if state.optimizer is not None:
            self._restore_optimizer(state.optimizer)

    def _learn_remotely(self, remote: TaskLearners, batch: Transition[np.ndarray]) -> Costs:
        with self._learn_lock:
            if not remote.running:
                remote.start(self.training_state(), paddle.get_rng_state("cpu"))
            costs, state = remote.update(batch)
            with self._weights_lock:
                self._adopt(state)
            return costs

    def learn(self, batch: Transition[np.ndarray]) -> Costs:
        """Optimizer steps on ``batch``, a :class:`~parl.core.batch.Transition` of numpy arrays; returns
        the named costs.

        The inputs are normalized and the rewards transformed as the task's settings say, and the
        batch reaches ``Algorithm.learn`` as tensors (:meth:`Transition.to_tensors`). Scalar costs
        come back as floats (averaged over the steps of an algorithm that takes several); a per-row
        ``td_error`` as an array.

        A step whose loss or gradient is not finite is skipped: no optimizer step, no
        ``after_update``; its costs are kept as they came (NaN shows in the metrics), the
        costs also hold ``skipped_updates`` (the steps of this call skipped), and a skipped step's
        ``td_error`` is left out (so no priority becomes NaN).

        Raises:
            ValueError: ``batch`` is not a Transition, or its row structure does not fit its rows.
            NonFiniteUpdatesError: ``max_skipped_updates`` steps in a row were skipped.
        """
        return self.learn_checked(check_transition(batch, f"task {self.name!r}: learn"))

    def learn_checked(self, batch: Transition[np.ndarray]) -> Costs:
        """:meth:`learn` for a batch its caller has already checked to be a Transition: the
        :class:`~parl.ComputationWrapper`, which checks each agent's batch where it enters (so a bad
        one fails its sender alone) and joins them.

        Raises:
            ValueError: the batch's row structure does not fit its rows.
            NonFiniteUpdatesError: ``max_skipped_updates`` steps in a row were skipped.
        """
        if self.normalizer is not None:
            with self._weights_lock:  # statistics change under prediction batches
                batch = batch._replace(
                    inputs=self.normalizer(batch.inputs), next_inputs=self.normalizer(batch.next_inputs)
                )
        if not self.reward_transform.identity:
            batch = batch._replace(rewards=self.reward_transform(batch.rewards))
        if self._remote is not None:
            return self._learn_remotely(self._remote, batch)
        if self._learners is not None and not self.algorithm.shares_rows_itself:
            total = batch.batch_size
            batch, first, end = batch_share(batch, self._learners.share)
            self._batch_share = (first, total, RowShare.fraction(end - first, total))
        tensors = batch.to_tensors(tensor)
        with self._learn_lock, training_mode(True):
            skipped_before = self._skips.total
            result = self.algorithm.learn(tensors)
            if isinstance(result, Mapping):
                costs = self._step(result)
            elif isinstance(result, Iterator):
                costs = _mean_costs([self._step(step_costs) for step_costs in result])
            else:
                raise ValueError(
                    f"{type(self.algorithm).__name__}.learn must return a dict of costs or an iterator of them, "
                    f"got {type(result).__name__}"
                )
            skipped = self._skips.total - skipped_before
            if skipped:
                costs["skipped_updates"] = float(skipped)
            return costs

    @property
    def skipped_updates(self) -> int:
        """Optimizer steps skipped so far for a non-finite loss or gradient."""
        return self._skips.total

    @property
    def max_skipped_updates(self) -> int:
        """Skipped optimizer steps in a row that raise ``NonFiniteUpdatesError``."""
        return self._skips.max_in_a_row

    def _step(self, costs: StepCosts) -> Costs:
        if not isinstance(costs, Mapping) or "loss" not in costs:
            got = sorted(costs) if isinstance(costs, Mapping) else type(costs).__name__
            raise ValueError(f"{type(self.algorithm).__name__}.learn must give dicts with a 'loss' entry, got {got}")
        for name, value in costs.items():  # checked before the step, so a refused batch changes nothing
            if np.size(value) != 1 and name != "td_error":
                raise ValueError(
                    f"cost {name!r} must be a scalar (only 'td_error' may have one value per row), "
                    f"got shape {list(np.shape(value))}"
                )
        optimizer = self._get_optimizer()
        values = {k: _cost_value(k, v) for k, v in costs.items()}
        try:
            if self._learners is None:
                loss = values["loss"]
                if not math.isfinite(loss):
                    self._skip(values, f"loss ({loss})")
                    return values
                cast(paddle.Tensor, costs["loss"]).backward()  # the loss is a tensor (Algorithm.learn)
            else:
                values = self._summed_step(self._learners, cast(paddle.Tensor, costs["loss"]), values)
                loss = values["loss"]
                if not math.isfinite(loss):  # the whole step's: every learner skips it alike
                    self._skip(values, f"loss ({loss})")
                    return values
            if not grads_finite([p.grad for p in self._parameters]):
                self._skip(values, "gradient")
                return values
            with self._weights_lock:
                optimizer.step()
                self.update_steps += 1
                self.algorithm.after_update(self.update_steps)
            self._skips.passed()
            if self.track_grad_norm:
                self._record_grad_norm(optimizer)
        finally:
            # Also after a failure or a skip, so a bad batch leaves no gradient behind for the next one.
            optimizer.clear_grad(set_to_zero=False)
        return values

    def _summed_step(self, learners: LearnerCollective, loss: paddle.Tensor, values: Costs) -> Costs:
        """Backward on this learner's part of the loss, then the gradients and costs summed across the
        learners (each learner's part, even of a non-finite loss, so all sum the same steps)."""
        share = self._batch_share
        if share is None:  # the algorithm's costs are its share's parts already
            loss.backward()
            return sum_step(learners, self._parameters, values, None)
        first, total, fraction = share
        (loss * fraction).backward()
        parts = {k: v if k == "td_error" else v * fraction for k, v in values.items()}
        return sum_step(learners, self._parameters, parts, (first, total))

    def _skip(self, values: Costs, what: str) -> None:
        """Count a step not taken for a non-finite ``what``; its ``td_error`` is dropped from ``values``.

        Raises:
            NonFiniteUpdatesError: ``max_skipped_updates`` steps in a row were skipped.
        """
        values.pop("td_error", None)
        self._skips.skipped(what)

    def _get_optimizer(self) -> Optimizer:
        # Layers create their parameters on first call, so the optimizer is made
        # after the first training forward pass has built everything it updates.
        if self._optimizer is None:
            params = self.algorithm.parameters()
            if not params:
                raise ValueError(f"task {self.name!r}: the algorithm has no trainable parameters")
            self._optimizer = self.algorithm.make_optimizer(params)
            self._parameters = list(params)
            if self._pending_optimizer_state is not None:
                self._optimizer.set_state_dict(from_structural(self._pending_optimizer_state, self.algorithm))
                self._pending_optimizer_state = None
        return self._optimizer

    def learning_rate(self) -> Optional[float]:
        """The optimizer's current learning rate (the learners' when the task learns through them);
        None before the first update (the optimizer is made then) or when the optimizer has no ``get_lr``."""
        if self._optimizer is None:
            return self._learners_lr
        get_lr = getattr(self._optimizer, "get_lr", None)
        return None if get_lr is None else float(get_lr())

    def _record_grad_norm(self, optimizer: Optimizer) -> None:
        norm = getattr(optimizer, "last_grad_norm", None)  # parl's optimizers have it when they clip
        if norm is None:
            norm = grad_norm_value([p.grad for p in self._parameters])
            if norm is None:
                return
        total, steps, nonfinite = self.grad_norm_total
        if math.isfinite(norm):
            self.grad_norm_total = (total + norm, steps + 1, nonfinite)
        else:
            self.grad_norm_total = (total, steps + 1, nonfinite + 1)

    # -- checkpoints --------------------------------------------------------
    def save(self, path: str) -> None:
        """Write weights, optimizer state, normalizer statistics, ``update_steps`` and the
        algorithm's :meth:`~parl.Algorithm.state` as a task checkpoint: JSON metadata at ``path``
        and the arrays beside it in ``<path without extension>.safetensors``
        (:mod:`parl.serving.checkpoint_format`), each file replaced atomically, the metadata last.

        An optimizer state restored by :meth:`load` and not yet applied (the optimizer is made at
        the first update) is saved as it was loaded.

        Raises:
            ValueError: the algorithm's state is not JSON scalars and numpy arrays.
            OSError: a file could not be written.
        """
        with self._learn_lock:
            if self._remote is not None and self._remote.running:  # the learners own the optimizer state
                state = self._remote.training_state()
                with self._weights_lock:
                    self._adopt(state)
            with self._weights_lock:
                metadata, sections = task_contents(
                    self._checkpoint_target(), self.update_steps, self._optimizer_state()
                )
        write_task_checkpoint(path, metadata, sections)

    def load(self, path: str) -> None:
        """Restore a task checkpoint written by :meth:`save` (in this or another process).

        Nothing in the files is executed (no pickle). Everything is verified before anything
        changes: that each file is a regular file within its bound, the checksums, the manifest
        and every array's shape and dtype against it, that every float array is finite and no
        weight absurdly large, and that the algorithm class, specs, models, weight shapes, the
        weights of every trained parameter (once the task has trained), the optimizer state and
        the normalizer settings and statistics are this task's.

        Raises:
            CheckpointError: (a ValueError) one line naming the file and what is wrong.
        """
        self.apply_checkpoint(self.read_checkpoint(path))

    def read_checkpoint(
        self, path: str, expected_sha256: Optional[Mapping[str, str]] = None, recorded_in: str = "the record"
    ) -> "TaskCheckpoint":
        """Read and verify the task checkpoint at ``path`` against this task without changing it;
        :meth:`apply_checkpoint` then restores it.

        Args:
            expected_sha256: the SHA-256 of the checkpoint's files by file name, checked as they
                are read (:func:`~parl.serving.checkpoint_format.read_task_checkpoint`).
            recorded_in: where ``expected_sha256`` comes from, for messages.

        Raises:
            CheckpointError: as :meth:`load`.
        """
        metadata, sections = read_task_checkpoint(path, expected_sha256, recorded_in)
        checkpoint = TaskCheckpoint(path, metadata, sections)
        self.build_layers()
        with self._learn_lock, self._weights_lock:
            check_task_checkpoint(checkpoint, self._checkpoint_target())
        return checkpoint

    def apply_checkpoint(self, checkpoint: "TaskCheckpoint") -> None:
        """Restore ``checkpoint`` from :meth:`read_checkpoint` (of this task).

        Raises:
            CheckpointError: the checkpoint does not fit the task (checked again, before any change).
        """
        with self._learn_lock, self._weights_lock:
            check_task_checkpoint(checkpoint, self._checkpoint_target())
            state = dict(checkpoint.metadata["algorithm_state"])
            state.update(checkpoint.sections["algorithm"])
            try:
                self.algorithm.set_state(state)
            except ValueError as exc:
                raise CheckpointError(f"{checkpoint.path}: algorithm state refused: {exc}") from None
            # A layer with no arrays in the file was not built when it was saved: it keeps its values here.
            saved = checkpoint.sections["weights"]
            self._set_algorithm_weights(
                {attr: {**model.get_weights(), **saved[attr]} for attr, model in self._models()}
            )
            self.update_steps = int(checkpoint.metadata["update_steps"])
            if self.normalizer is not None:
                self.normalizer.set_state_dict(checkpoint.sections["normalizer"])
            if checkpoint.metadata["has_optimizer"]:
                self._restore_optimizer(checkpoint.sections["optimizer"])
            if self._remote is not None and self._remote.running:
                self._remote.set_training_state(self._training_state(optimizer=True))

    def _optimizer_state(self) -> Optional[Dict[str, Any]]:
        """The optimizer's state keyed by structure; a restored one not yet applied; None before either."""
        if self._optimizer is not None:
            return to_structural(self._optimizer.state_dict(), self.algorithm)
        return self._pending_optimizer_state

    def _restore_optimizer(self, state: Dict[str, Any]) -> None:
        """Take ``state`` (keyed by structure) now, or when the optimizer is made at the first update."""
        if self._optimizer is None:
            self._pending_optimizer_state = state
        else:
            self._optimizer.set_state_dict(from_structural(state, self.algorithm))
            self._pending_optimizer_state = None

    def _checkpoint_target(self) -> CheckpointTarget:
        """This task as the checkpoint format writes and checks it (read under the task's locks)."""
        return CheckpointTarget(self.name, self.algorithm, self.specs, self.normalizer, self._optimizer)

    def _check_normalizer_state(self, state: Optional[Mapping[str, Any]], source: str) -> None:
        if (state is None) != (self.normalizer is None):
            has = "has" if state is not None else "has no"
            raise ValueError(
                f"{source} {has} input normalizer statistics, but task {self.name!r} "
                f"{'does not normalize' if self.normalizer is None else 'normalizes'} inputs"
            )

    def _set_normalizer_state(self, state: Optional[Mapping[str, Any]], source: str) -> None:
        self._check_normalizer_state(state, source)
        if state is not None and self.normalizer is not None:  # both or neither, as just checked
            self.normalizer.set_state_dict(state)

    def algorithm_weights(self) -> AlgorithmWeights:
        """Weights of every Model the algorithm holds, by attribute name, plus the input
        normalizer's statistics under :data:`NORMALIZER_KEY` when the task normalizes;
        a consistent snapshot even while the task trains."""
        with self._weights_lock:
            weights = self._algorithm_weights()
            if self.normalizer is not None:
                weights[NORMALIZER_KEY] = self.normalizer.state_dict()
            return weights

    def set_algorithm_weights(self, weights: Mapping[str, Mapping[str, Any]]) -> None:
        """Inverse of :meth:`algorithm_weights`; never interleaves with an update or a prediction."""
        weights = dict(weights)
        stats = weights.pop(NORMALIZER_KEY, None)
        with self._weights_lock:
            self._check_normalizer_state(stats, "the weights")
            check_model_names(weights, self.algorithm, self.name, "the weights")
            self._set_algorithm_weights(weights)
            self._set_normalizer_state(stats, "the weights")
            self.weights_replaced += 1

    def take_input_changes(self) -> Dict[str, ArrayDict]:
        """Statistics of the inputs this task normalized since the last call (empty when it does not
        normalize; the first call starts counting): what a copy acting apart sends its learner."""
        if self.normalizer is None:
            return {}
        with self._weights_lock:
            return self.normalizer.take_changes()

    def merge_input_changes(self, changes: Mapping[str, ArrayDict]) -> None:
        """Fold another copy's :meth:`take_input_changes` into this task's input statistics.

        Raises:
            ValueError: ``changes`` do not fit the normalized inputs, or this task normalizes none.
        """
        if not changes:
            return
        if self.normalizer is None:
            raise ValueError(f"task {self.name!r} normalizes no inputs, got statistics of {sorted(changes)}")
        with self._weights_lock:
            self.normalizer.merge(changes)

    def _algorithm_weights(self) -> AlgorithmWeights:
        return {attr: model.get_weights() for attr, model in self._models()}

    def _set_algorithm_weights(self, weights: Mapping[str, Mapping[str, Any]]) -> None:
        check_model_names(weights, self.algorithm, self.name, f"task {self.name!r}")
        for attr, model in self._models():
            model.set_weights(weights[attr])

    def _models(self) -> List[Tuple[str, Model]]:
        return named_models(self.algorithm)


def _cost_value(name: str, value: Union[paddle.Tensor, float, np.ndarray]) -> Union[float, np.ndarray]:
    """A cost as numpy: a per-row ``td_error`` as a flat array, any other (a tensor or a number) as a float."""
    array = value.numpy() if isinstance(value, paddle.Tensor) else np.asarray(value)
    if name == "td_error":
        return array.reshape(-1)
    return float(array.reshape(()))


def _mean_costs(steps: List[Costs]) -> Costs:
    if not steps:
        raise ValueError("Algorithm.learn yielded no optimizer steps")
    if any("td_error" in step for step in steps):
        # Rows would get one value per step; priorities need one per row.
        raise ValueError("a per-row 'td_error' is only supported from a learn that takes one optimizer step")
    return {k: float(np.mean([s[k] for s in steps])) for k in steps[0] if not isinstance(steps[0][k], np.ndarray)}


def _in_eval_mode(predictor: Predictor) -> Predictor:
    """``predictor`` run in evaluation mode."""

    def in_eval_mode(
        inputs: Dict[str, paddle.Tensor], states: Dict[str, paddle.Tensor], deterministic: bool
    ) -> Tuple[Dict[str, paddle.Tensor], Dict[str, paddle.Tensor]]:
        with training_mode(False):
            return predictor(inputs, states, deterministic)

    return in_eval_mode


def _to_numpy(tensors: Mapping[str, paddle.Tensor]) -> ArrayDict:
    return {k: v.numpy() for k, v in tensors.items()}
