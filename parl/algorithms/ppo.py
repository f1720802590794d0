"""PPO (Schulman et al., 2017): clipped surrogate objective over several epochs of minibatches.

One batch (the time-ordered segments of one or more agents) gives
``epochs * num_minibatches`` optimizer steps. Before the first, under no
gradient, the behaviour policy's log-probabilities, the values and the
GAE(lambda) advantages are computed once for every row; each step then takes

    ratio       = exp(log pi(a|s) - log pi_old(a|s))
    policy_loss = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
    value_loss  = mean((V(s) - R)^2)          # or the max with the clipped value's error
    loss        = policy_loss + value_coef * value_loss - entropy_coef * entropy

over one minibatch, where ``R = A + V_old`` and ``A`` is normalized per
minibatch by default. With ``value_normalization`` the critic's outputs stand
for standardized returns: ``A`` and ``R`` are computed from them de-standardized,
and the value loss compares them with ``R`` standardized by the running
statistics of every target so far. ``learn`` is a generator: the task runs one
optimizer step per costs dict it yields.

Rows are shuffled with ``paddle.randperm``, so ``parl.seed_everything`` makes a
single-agent run reproducible. A recurrent model (one with state specs) is
unrolled over whole segments, so its minibatches are groups of whole segments.

Minibatches are given by count (``num_minibatches``) or by size
(``minibatch_size``, SB3's ``batch_size``). The learning rate and the clip range
may anneal linearly to 0 (rl-zoo's ``lin_`` schedules): each batch is learned with
``start * (1 - learned_rows / schedule_steps)``, where ``learned_rows`` counts the
rows of the batches learned before it (with on-policy helpers, the env steps of
every agent) and is saved in checkpoints through :meth:`PPO.state`.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import paddle

from parl.algorithms.actor_critic_base import ActorCriticBase
from parl.algorithms.value_norm import STATE_KEYS as VALUE_STATE_KEYS
from parl.algorithms.value_norm import ValueNormalizer
from parl.core.batch import Transition
from parl.core.counters import read_counter
from parl.core.model import Model
from parl.core.row_share import RowShare
from parl.layers.optimizer import Adam, Optimizer, ScheduledOptimizer
from parl.validation import check_choice, check_int, check_positive, check_range

#: Where advantages are normalized to zero mean and unit standard deviation.
ADVANTAGE_NORMALIZATION = ("minibatch", "batch", "none")
#: How the learning rate and the clip range change over the run: kept, or linearly to 0 over ``schedule_steps``.
SCHEDULES = ("constant", "linear")
#: Minibatches per pass when neither ``num_minibatches`` nor ``minibatch_size`` is given.
DEFAULT_MINIBATCHES = 32


class PPO(ActorCriticBase):
    """Proximal Policy Optimization with the clipped surrogate objective.

    Defaults are the paper's MuJoCo settings (table 3) where it gives them, and
    Stable-Baselines3's otherwise (value clipping off, gradient norm 0.5).

    Args:
        gamma: discount, in [0, 1].
        gae_lambda: GAE's lambda, in [0, 1] (1: discounted returns to the segment's end).
        learning_rate: Adam step size.
        clip_range: the surrogate's epsilon: ratios outside [1 - eps, 1 + eps] give no gradient.
        value_clip: clip the new value to ``old value +- value_clip`` and take the larger of
            the two squared errors (as OpenAI baselines); None: plain squared error.
        value_coef: weight of the value loss.
        entropy_coef: weight of the entropy bonus.
        epochs: passes over each batch.
        num_minibatches: minibatches per pass; each row (for recurrent models, each
            segment) lands in exactly one. A batch with fewer rows (segments) than this
            is split into that many minibatches instead. Default 32 when ``minibatch_size``
            is not given either.
        minibatch_size: instead of ``num_minibatches``, rows per minibatch (SB3's and
            rl-zoo's ``batch_size``): each pass splits a batch of n rows into
            ceil(n / minibatch_size) nearly equal minibatches (for recurrent models, at most
            one per segment).
        advantage_normalization: "minibatch" (as SB3 and CleanRL), "batch", or "none".
        grad_clip: global gradient-norm bound, or None.
        learning_rate_schedule: "constant", or "linear": from ``learning_rate`` to 0 over
            ``schedule_steps`` learned rows (rl-zoo's ``lin_<value>``).
        clip_range_schedule: "constant", or "linear": from ``clip_range`` to 0 likewise.
        schedule_steps: rows learned (env steps, with on-policy helpers) over which the linear
            schedules reach 0; set it to the run's ``train.max_env_steps`` to anneal over the
            run, as rl-zoo does over ``n_timesteps``. Needed by a linear schedule.
        value_normalization: the critic learns value targets standardized by their running mean
            and standard deviation, and its outputs are de-standardized wherever advantages and
            targets are computed (Yu et al.'s ValueNorm in MAPPO): the value loss's scale then
            stays near 1 whatever the reward's units. The statistics are saved in checkpoints.
    """

    #: Each learner takes its share of every minibatch (:meth:`ComputationTask.join_learners`).
    shares_rows_itself = True

    def __init__(
        self,
        model_func: Callable[[], Model],
        *,
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        learning_rate: float = 3e-4,
        clip_range: float = 0.2,
        value_clip: Optional[float] = None,
        value_coef: float = 0.5,
        entropy_coef: float = 0.0,
        epochs: int = 10,
        num_minibatches: Optional[int] = None,
        minibatch_size: Optional[int] = None,
        advantage_normalization: str = "minibatch",
        grad_clip: Optional[float] = 0.5,
        learning_rate_schedule: str = "constant",
        clip_range_schedule: str = "constant",
        schedule_steps: Optional[int] = None,
        value_normalization: bool = False,
    ) -> None:
        super().__init__(model_func, gamma=gamma, learning_rate=learning_rate, grad_clip=grad_clip)
        self.gae_lambda = check_range("gae_lambda", gae_lambda, 0.0, 1.0)
        self.clip_range = check_positive("clip_range", clip_range)
        self.value_clip = None if value_clip is None else check_positive("value_clip", value_clip)
        self.value_coef = check_range("value_coef", value_coef, 0.0, float("inf"))
        self.entropy_coef = check_range("entropy_coef", entropy_coef, 0.0, float("inf"))
        self.epochs = check_int("epochs", epochs, 1)
        if num_minibatches is not None and minibatch_size is not None:
            raise ValueError(
                f"PPO: give num_minibatches or minibatch_size, not both; got num_minibatches={num_minibatches!r} "
                f"and minibatch_size={minibatch_size!r}"
            )
        self.minibatch_size = None if minibatch_size is None else check_int("minibatch_size", minibatch_size, 1)
        if minibatch_size is None and num_minibatches is None:
            num_minibatches = DEFAULT_MINIBATCHES
        self.num_minibatches = None if num_minibatches is None else check_int("num_minibatches", num_minibatches, 1)
        self.advantage_normalization = check_choice(
            "advantage_normalization", advantage_normalization, ADVANTAGE_NORMALIZATION
        )
        self.learning_rate_schedule = check_choice("learning_rate_schedule", learning_rate_schedule, SCHEDULES)
        self.clip_range_schedule = check_choice("clip_range_schedule", clip_range_schedule, SCHEDULES)
        scheduled = "linear" in (self.learning_rate_schedule, self.clip_range_schedule)
        if scheduled and schedule_steps is None:
            raise ValueError("schedule_steps: a linear schedule needs the rows (env steps) to anneal over, got None")
        self.schedule_steps = None if schedule_steps is None else check_int("schedule_steps", schedule_steps, 1)
        #: Rows of the batches learned so far: where the schedules stand (saved by :meth:`state`).
        self.learned_rows = 0
        #: The learning rate of the current batch's optimizer steps.
        self.step_learning_rate = self.learning_rate
        self.recurrent = bool(self.model.get_state_specs())
        if not isinstance(value_normalization, bool):
            raise ValueError(f"value_normalization must be true or false, got {value_normalization!r}")
        self.value_normalizer = ValueNormalizer() if value_normalization else None

    def remaining(self) -> float:
        """The share of ``schedule_steps`` not yet learned, in [0, 1] (1 without ``schedule_steps``)."""
        if self.schedule_steps is None:
            return 1.0
        return max(0.0, 1.0 - self.learned_rows / self.schedule_steps)

    def current_learning_rate(self) -> float:
        """The learning rate of the next batch's optimizer steps."""
        return self.learning_rate * (self.remaining() if self.learning_rate_schedule == "linear" else 1.0)

    def current_clip_range(self) -> float:
        """The clip range of the next batch's optimizer steps."""
        return self.clip_range * (self.remaining() if self.clip_range_schedule == "linear" else 1.0)

    def make_optimizer(self, parameters: List[paddle.Tensor]) -> Optimizer:
        """Adam, as the base class makes it; when the learning rate anneals, one that steps at
        :attr:`step_learning_rate`."""
        optimizer = Adam(parameters, learning_rate=self.learning_rate, grad_clip=self.grad_clip)
        if self.learning_rate_schedule == "constant":
            return optimizer
        return ScheduledOptimizer(optimizer, lambda: self.step_learning_rate)

    def state(self) -> Dict[str, object]:
        """``learned_rows``: where the learning-rate and clip-range schedules stand; with
        ``value_normalization``, also the value targets' statistics."""
        kept: Dict[str, object] = {"learned_rows": self.learned_rows}
        if self.value_normalizer is not None:
            kept.update(self.value_normalizer.state())
        return kept

    def set_state(self, state: Mapping[str, object]) -> None:
        """Restore :meth:`state` output (an empty state, of a checkpoint written before schedules, is 0 rows).

        Raises:
            ValueError: an unknown entry, ``learned_rows`` not an int >= 0, or the value
                statistics missing (with ``value_normalization``) or bad.
        """
        keeps = ["learned_rows"] + (list(VALUE_STATE_KEYS) if self.value_normalizer is not None else [])
        unknown = sorted(set(state) - set(keeps))
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown state entries {unknown}; it keeps {keeps}")
        self.learned_rows = read_counter(state, "learned_rows", "PPO") if state else 0
        if self.value_normalizer is not None:
            self.value_normalizer.set_state(state)

    def learn(self, batch: Transition[paddle.Tensor]) -> Iterator[Dict[str, paddle.Tensor]]:
        """Yields the costs of each of the ``epochs * minibatches`` optimizer steps on this batch."""
        inputs, states, actions, lengths = batch.inputs, batch.states, batch.actions, batch.sequence_lengths
        assert lengths is not None  # set in every batch learn is given (Transition.to_tensors)
        # Every step of this batch: the schedules where they stood before it (rl-zoo's at the start of a rollout).
        clip_range = self.current_clip_range()
        self.step_learning_rate = self.current_learning_rate()
        self.learned_rows += sum(lengths)
        old_log_probs, values, advantages, returns = self.batch_targets(batch)
        if self.value_normalizer is not None:  # the critic's outputs are standardized: so are its targets
            returns = self.value_normalizer.fit_and_normalize(returns)
        # With one minibatch per pass, normalizing per minibatch is normalizing the batch: done once.
        normalize_each = self.advantage_normalization == "minibatch" and self._minibatch_count(lengths) > 1
        if self.advantage_normalization != "none" and not normalize_each:
            advantages = _normalized(advantages)
        rows = {"old_log_probs": old_log_probs, "old_values": values, "advantages": advantages, "returns": returns}
        share = self.row_share
        for _ in range(self.epochs):
            for index, mb_lengths in self._minibatches(lengths):
                mb_rows = _take(rows, index)
                if normalize_each:  # over the whole minibatch, before a learner takes its share
                    mb_rows = {**mb_rows, "advantages": _normalized(mb_rows["advantages"])}
                part = 1.0
                if not share.whole:
                    index, mb_rows, mb_lengths, part = _share_of(share, index, mb_rows, mb_lengths, self.recurrent)
                costs = self._step(
                    _take(inputs, index), _take(states, index), _take(actions, index), mb_rows, mb_lengths, clip_range
                )
                yield costs if share.whole else {name: value * part for name, value in costs.items()}

    def batch_targets(
        self, batch: Transition[paddle.Tensor]
    ) -> Tuple[paddle.Tensor, paddle.Tensor, paddle.Tensor, paddle.Tensor]:
        """What every optimizer step on ``batch`` compares with, computed once before the first, without
        gradient, each ``[B, 1]``: the log-probabilities the ratio divides by (the policy's before
        this batch's steps), the values, the GAE(lambda) advantages and the value targets."""
        assert batch.sequence_lengths is not None  # set in every batch learn is given (Transition.to_tensors)
        with paddle.no_grad():
            dist, values = self.model.sequence(batch.inputs, batch.states, batch.sequence_lengths)
            old_log_probs = dist.log_prob(batch.actions["action"])
        advantages, returns = self.advantages(values, batch, self.gae_lambda)
        return old_log_probs, values, advantages, returns

    def _minibatch_count(self, lengths: Tuple[int, ...]) -> int:
        """Minibatches per pass: ``num_minibatches`` (or rows / ``minibatch_size``, rounded up), fewer when
        the batch has fewer rows (segments)."""
        wanted, size = self.num_minibatches, self.minibatch_size
        if wanted is None:
            assert size is not None  # one of the two is set (checked in __init__)
            wanted = -(-sum(lengths) // size)
        return min(wanted, len(lengths) if self.recurrent else sum(lengths))

    def _minibatches(self, lengths: Tuple[int, ...]) -> List[Tuple[Optional[paddle.Tensor], Tuple[int, ...]]]:
        """One pass of shuffled minibatches: (row index or None for the whole batch, segment lengths)."""
        count = self._minibatch_count(lengths)
        if count == 1:
            return [(None, lengths)]
        order = paddle.randperm(len(lengths) if self.recurrent else sum(lengths)).numpy()
        groups = np.array_split(order, count)
        if not self.recurrent:
            return [(paddle.to_tensor(g), (1,) * len(g)) for g in groups]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        out: List[Tuple[Optional[paddle.Tensor], Tuple[int, ...]]] = []
        for group in groups:
            index = np.concatenate([np.arange(starts[s], starts[s] + lengths[s]) for s in group])
            out.append((paddle.to_tensor(index), tuple(lengths[s] for s in group)))
        return out

    def _step(
        self,
        inputs: Mapping[str, paddle.Tensor],
        states: Mapping[str, paddle.Tensor],
        actions: Mapping[str, paddle.Tensor],
        rows: Mapping[str, paddle.Tensor],
        lengths: Tuple[int, ...],
        clip_range: float,
    ) -> Dict[str, paddle.Tensor]:
        dist, values = self.model.sequence(inputs, states, lengths)
        advantages = rows["advantages"]
        log_ratio = dist.log_prob(actions["action"]) - rows["old_log_probs"]
        ratio = paddle.exp(log_ratio)
        clipped_ratio = paddle.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
        policy_loss = -paddle.minimum(ratio * advantages, clipped_ratio * advantages).mean()
        error = values - rows["returns"]
        squared_error = error * error
        if self.value_clip is not None:
            old = rows["old_values"]
            clipped_error = old + paddle.clip(values - old, -self.value_clip, self.value_clip) - rows["returns"]
            squared_error = paddle.maximum(squared_error, clipped_error * clipped_error)
        value_loss = squared_error.mean()
        loss = policy_loss + self.value_coef * value_loss
        if self.entropy_coef > 0.0:
            entropy = dist.entropy().mean()
            loss = loss - self.entropy_coef * entropy
        with paddle.no_grad():
            if self.entropy_coef == 0.0:
                entropy = dist.entropy().mean()  # logged only: no gradient to compute
            ratio, log_ratio = ratio.detach(), log_ratio.detach()
            approx_kl = (ratio - 1.0 - log_ratio).mean()
            clip_fraction = (paddle.abs(ratio - 1.0) > clip_range).astype("float32").mean()
        return {
            "loss": loss,
            "policy_loss": policy_loss.detach(),
            "value_loss": value_loss.detach(),
            "entropy": entropy.detach(),
            "approx_kl": approx_kl,
            "clip_fraction": clip_fraction,
        }


def _normalized(advantages: paddle.Tensor) -> paddle.Tensor:
    """Zero mean, unit standard deviation (a single row is only centred)."""
    centred = advantages - advantages.mean()
    if advantages.shape[0] < 2:
        return centred
    # The unbiased estimate, written out: paddle.std costs several times more in Python.
    variance = (centred * centred).sum() / (advantages.shape[0] - 1)
    return centred / (paddle.sqrt(variance) + 1e-8)


def _share_of(
    share: RowShare,
    index: Optional[paddle.Tensor],
    rows: Mapping[str, paddle.Tensor],
    lengths: Tuple[int, ...],
    recurrent: bool,
) -> Tuple[paddle.Tensor, Mapping[str, paddle.Tensor], Tuple[int, ...], float]:
    """``share``'s part of one minibatch (``index``: its rows in the batch, None for all; ``rows``: its
    per-row values, in ``index`` order): its row index, rows and segment lengths, and its fraction of
    the minibatch's rows. Whole segments for a recurrent model."""
    total = sum(lengths)
    if recurrent:
        first_segment, end_segment = share.segments(lengths)
        first, end = sum(lengths[:first_segment]), sum(lengths[:end_segment])
        part_lengths = lengths[first_segment:end_segment]
    else:
        first, end = share.rows(total)
        part_lengths = (1,) * (end - first)
    part_index = paddle.arange(first, end) if index is None else index[first:end]
    part_rows = {k: v[first:end] for k, v in rows.items()}
    return part_index, part_rows, part_lengths, RowShare.fraction(end - first, total)


def _take(tensors: Mapping[str, paddle.Tensor], index: Optional[paddle.Tensor]) -> Mapping[str, paddle.Tensor]:
    """The rows ``index`` of every tensor (all rows when ``index`` is None)."""
    if index is None:
        return tensors
    return {k: paddle.gather(v, index) for k, v in tensors.items()}
