"""Algorithm: the RL math over one or more Models.

    algorithm = DQN(model_func, gamma=0.99)
    actions, next_states = algorithm.predict(inputs, states)            # tensors in, tensors out
    costs = algorithm.learn(batch)       # a Transition of tensors in, {"loss": ..., ...} out

An Algorithm holds only math: it never touches queues, threads, environments
or files. :class:`~parl.serving.computation_task.ComputationTask` converts
numpy to tensors, minimizes ``costs["loss"]`` with the optimizer from
:meth:`Algorithm.make_optimizer`, and calls :meth:`Algorithm.after_update`.

``learn`` returns the costs of one optimizer step, or an iterator of them for
algorithms that take several steps on one batch (PPO's epochs and
minibatches): the task runs one optimizer step per item it yields.

An algorithm may also offer a faster way to act (:meth:`Algorithm.compile_predict`),
which the task uses in place of ``predict`` once the layers are built.

Hyperparameters are keyword arguments; an unknown one raises ValueError
naming it, like a bad value does.
"""

from __future__ import annotations

import abc
import inspect
from typing import Any, Callable, ClassVar, Dict, Iterator, List, Mapping, Optional, Tuple, Type, Union

import paddle

from parl.core.batch import Transition
from parl.core.model import Model
from parl.core.row_share import WHOLE_BATCH, RowShare
from parl.layers.optimizer import Adam, Optimizer
from parl.validation import check_positive

TensorDict = Dict[str, paddle.Tensor]
#: One optimizer step's named costs: ``"loss"`` (a tensor) and the others, tensors or plain numbers.
StepCosts = Mapping[str, Union[paddle.Tensor, float]]
#: What :meth:`Algorithm.learn` returns: one step's costs, or one item per optimizer step.
LearnResult = Union[StepCosts, Iterator[StepCosts]]
#: What :meth:`Algorithm.compile_predict` returns: ``(inputs, states, deterministic) -> (actions, next_states)``.
Predictor = Callable[[TensorDict, TensorDict, bool], Tuple[TensorDict, TensorDict]]


class Algorithm(abc.ABC):
    """Base class of algorithms (abstract), built from ``model_func``: a zero-argument callable returning a
    fresh Model. Subclasses implement :meth:`predict` (one that does not fails at construction with a
    TypeError naming it) and, to be trained, :meth:`learn`: an algorithm that only acts (a scripted or
    exported policy under evaluation) may leave it out.

    Keeping the callable lets an algorithm clone models (target networks,
    behaviour policies) whose layers line up with ``self.model``.
    """

    #: False (the default): with several learners (:meth:`ComputationTask.join_learners
    #: <parl.ComputationTask.join_learners>`), the task gives :meth:`learn` only this learner's share
    #: of the batch, and each step's loss must be a mean over the rows it is given. True: :meth:`learn`
    #: gets the whole batch and :attr:`row_share`, takes its share of each step's rows itself, and
    #: yields costs that are its share's parts of the whole step's (PPO: its share of each minibatch,
    #: so the minibatches and their advantage normalization are one learner's).
    shares_rows_itself: ClassVar[bool] = False
    #: This learner's share of the rows, for an algorithm that :attr:`shares_rows_itself`.
    row_share: RowShare = WHOLE_BATCH
    #: True for an algorithm that learns off-policy from what acted (V-trace): its :meth:`predict`
    #: answers :data:`~parl.core.behaviour.BEHAVIOUR_LOG_PROB` beside the model's actions, and its task
    #: declares :data:`~parl.core.behaviour.BEHAVIOUR_SPECS` and adds the weights version to each
    #: prediction (:mod:`parl.core.behaviour`).
    records_behaviour: bool = False

    def __new__(cls, *args: Any, **kwargs: Any) -> "Algorithm":
        # Python reports an unknown keyword as a TypeError from deep inside the
        # call; name the option and the known ones instead.
        known = _keyword_names(cls)
        unknown = [] if known is _ANY else sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(
                f"{cls.__name__}: unknown option {unknown[0]}={kwargs[unknown[0]]!r}; options are {sorted(known)}"
            )
        return super().__new__(cls)

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "learn" in cls.__dict__:  # its learn also takes the eight arguments of parl before 0.2.0
            from parl.core.legacy_learn import accept_both_forms

            accept_both_forms(cls)

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        learning_rate: float = 1e-3,
        grad_clip: Optional[float] = None,
    ) -> None:
        if not callable(model_func):
            raise ValueError(f"model_func must be a zero-argument callable returning a Model, got {model_func!r}")
        model = model_func()
        if not isinstance(model, Model):
            raise ValueError(f"model_func must return a parl.Model, got {type(model).__name__}")
        self.model_func = model_func
        self.model = model
        self.learning_rate = check_positive("learning_rate", learning_rate)
        self.grad_clip = None if grad_clip is None else check_positive("grad_clip", grad_clip)

    def parameters(self) -> List[paddle.Tensor]:
        """Parameters the optimizer updates (the main model's by default; never target networks)."""
        return self.model.parameters()

    def make_optimizer(self, parameters: List[paddle.Tensor]) -> Optimizer:
        """The optimizer for ``parameters``: :class:`parl.layers.optimizer.Adam` with optional
        global-norm clipping by default. Any object with ``step``, ``clear_grad``, ``state_dict``
        and ``set_state_dict`` (a paddle optimizer included) may be returned instead."""
        return Adam(parameters, learning_rate=self.learning_rate, grad_clip=self.grad_clip)

    @abc.abstractmethod
    def predict(
        self, inputs: TensorDict, states: TensorDict, *, deterministic: bool = False
    ) -> Tuple[TensorDict, TensorDict]:
        """Batched actions (by action spec name) and next recurrent states (by state spec name).

        ``deterministic`` asks for the greedy or mean action instead of a sample
        (evaluation); algorithms whose policy is deterministic ignore it.
        """
        raise NotImplementedError

    def build_layers(self, inputs: TensorDict, states: TensorDict) -> None:
        """Build the layers of every model from one batch of (zero) inputs, without learning: by default one
        deterministic :meth:`predict`. An algorithm whose other models a prediction does not read (a
        target network) builds those too, so that its weights have every key from the start (a self-play
        opponent takes snapshots of them)."""
        self.predict(inputs, states, deterministic=True)

    def compile_predict(self) -> Optional[Predictor]:
        """A faster predictor giving what :meth:`predict` gives, bit for bit, or None (the default):
        act through :meth:`predict`.

        :class:`~parl.serving.computation_task.ComputationTask` asks for it after its first
        prediction (which builds the layers) and then calls it, without gradient and under its
        weights lock, in place of ``predict``::

            predictor = algorithm.compile_predict()    # once
            actions, next_states = predictor(inputs, states, deterministic)

        An algorithm writes its action math once, as a function of the model's pieces, and gives
        it the plain pieces in ``predict`` and the compiled ones here (the models' ``compile_*``
        methods, built on :mod:`parl.layers.compiled`). DQN's, in short (parl/algorithms/dqn.py)::

            def _greedy(value):                        # value: inputs -> Q
                def act(inputs, states, deterministic):
                    return {"action": paddle.argmax(value(inputs), axis=-1, keepdim=True)}, {}
                return act

            def predict(self, inputs, states, *, deterministic=False):
                return _greedy(self.model.value)(inputs, states, deterministic)

            @stands_in_for(["predict"])                # a subclass replacing predict gets None
            def compile_predict(self):
                value = self.model.compile_value()      # None: the model's value is not compiled
                return None if value is None else _greedy(value)

        Random draws must use the same calls in the same order as ``predict``, so that a seeded
        run draws the same actions whichever way it acts.

        Raises:
            ~parl.layers.layer_func.LayersNotBuilt: a layer the predictor reads has no parameters yet;
                the task asks again after its next prediction.
        """
        return None

    def learn(self, batch: Transition[paddle.Tensor]) -> LearnResult:
        """Named costs of one batch; ``costs["loss"]`` is what the optimizer minimizes.

        ``batch`` (:class:`~parl.core.batch.Transition`, of tensors) holds the
        rows by field: ``batch.inputs``, ``batch.actions``, ``batch.rewards``,
        ``batch.next_inputs``, ``batch.states`` and ``batch.next_states`` by spec
        name, and ``batch.next_episode_end``, 1.0 where the next input is
        terminal (the task ended: no bootstrap) and 0.0 otherwise, including on
        truncation by a time limit, where the next input must be bootstrapped
        from.

        The batch also says how its rows relate: ``batch.sequence_lengths``
        (time-ordered segments), ``batch.discount(gamma)`` (``gamma`` to the
        power of the env steps each transition spans, for n-step replay) and
        ``batch.weighted_mean(per_row)`` (the rows' importance weights, for
        prioritized replay).

        Costs are scalars, except a per-row ``"td_error"`` of shape ``[B]`` or
        ``[B, 1]``, which prioritized replay uses as new priorities. The loss is
        a tensor; the others may be tensors or plain numbers (a schedule's
        value, a count), and each scalar is logged as ``task/<name>/<cost>``
        (docs/metrics.md). A
        generator may be returned instead, yielding one costs dict per
        optimizer step.
        """
        raise NotImplementedError(f"{type(self).__name__} only acts: it implements no learn()")

    def after_update(self, update_step: int) -> None:
        """Called after optimizer step number ``update_step`` (1-based); target syncs go here."""

    def state(self) -> Dict[str, object]:
        """State the algorithm keeps besides its models' weights (counters, schedules), saved in
        checkpoints: a dict of JSON scalars (int, float, bool, str, None) and numpy arrays.

        The default is empty. An algorithm that counts something itself (TD3's policy delay
        counter) returns it here and takes it back in :meth:`set_state`, so a resumed run continues
        where the saved one stopped.
        """
        return {}

    def set_state(self, state: Mapping[str, object]) -> None:
        """Restore :meth:`state` output (of this class); the default takes only an empty dict.

        Raises:
            ValueError: ``state`` holds entries this algorithm does not keep, or bad values.
        """
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, got entries {sorted(state)}")


def _keyword_names(cls: Type[Algorithm]) -> set:
    names = _KEYWORDS.get(cls)
    if names is None:
        params = inspect.signature(cls.__init__).parameters.values()
        if any(p.kind == p.VAR_KEYWORD for p in params):
            names = _ANY
        else:
            names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"self"}
        _KEYWORDS[cls] = names
    return names


_KEYWORDS: Dict[Type[Algorithm], set] = {}
_ANY: set = set()  # marker: the constructor takes **kwargs, so any keyword is accepted


def create_algorithm_func(
    model_class: Type[Model],
    model_args: Mapping[str, Any],
    algorithm_class: Type[Algorithm],
    algorithm_args: Mapping[str, Any],
) -> Callable[[], Algorithm]:
    """A zero-argument callable that builds ``algorithm_class(model_func, **algorithm_args)``
    where ``model_func`` builds ``model_class(**model_args)``."""
    model_args = dict(model_args)
    algorithm_args = dict(algorithm_args)

    def model_func() -> Model:
        return model_class(**model_args)

    def algorithm_func() -> Algorithm:
        return algorithm_class(model_func, **algorithm_args)

    return algorithm_func
