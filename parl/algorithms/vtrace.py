"""V-trace (Espeholt et al., 2018): off-policy value targets and advantages over time-ordered segments.

    targets = vtrace(behaviour_log_probs, target_log_probs, rewards, values, next_values,
                     episode_end, lengths, gamma=0.99)
    targets.values          # v_s: what V(s_t) learns towards
    targets.advantages      # rho_t * (r_t + gamma * v_{t+1} - V(s_t)): the policy gradient's weight

The rows are consecutive segments (:attr:`~parl.core.batch.Transition.sequence_lengths`) as in
:mod:`parl.algorithms.returns`; a segment's last row bootstraps from ``V(next_inputs)``
unless its episode terminated there (``episode_end``), so a truncation bootstraps and a
termination does not. Within a segment, with ``rho_t = min(rho_bar, pi(a_t|s_t) / mu(a_t|s_t))``,
``c_t = min(c_bar, pi / mu)`` and ``delta_t = rho_t * (r_t + gamma * (1 - end_t) * V(s'_t) - V(s_t))``:

    v_t - V(s_t) = delta_t + gamma * (1 - end_t) * c_t * (v_{t+1} - V(s_{t+1}))   (0 after the last row)
    A_t          = rho_t * (r_t + gamma * (1 - end_t) * v'_t - V(s_t))

where ``v'_t`` is ``v_{t+1}`` inside a segment and ``V(s'_t)`` on its last row. When behaviour
and target agree (and ``rho_bar, c_bar >= 1``) ``v_t`` is the discounted return to the
segment's end plus the discounted bootstrap value: A2C's n-step return.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, Tuple

import numpy as np

from parl.algorithms.returns import backward_sums, segment_columns
from parl.validation import check_positive, check_range


class VTraceTargets(NamedTuple):
    """V-trace's outputs, float32 ``[B]`` each, row for row."""

    #: ``v_s``: the value targets.
    values: np.ndarray
    #: ``rho_s * (r_s + gamma * v_{s+1} - V(s))``: the policy-gradient advantages.
    advantages: np.ndarray
    #: ``rho_s``: the clipped importance weights ``min(rho_bar, pi / mu)``.
    clipped_rhos: np.ndarray


def check_clips(rho_bar: float, c_bar: float) -> Tuple[float, float]:
    """``(rho_bar, c_bar)`` as floats when both are > 0.

    Raises:
        ValueError: either is not a number > 0 (the message names it and its value).
    """
    return check_positive("rho_bar", rho_bar), check_positive("c_bar", c_bar)


def vtrace(
    behaviour_log_probs: np.ndarray,
    target_log_probs: np.ndarray,
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    episode_end: np.ndarray,
    sequence_lengths: Sequence[int],
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> VTraceTargets:
    """V-trace targets and advantages of every row (the module docstring gives the equations).

    Args:
        behaviour_log_probs: ``log mu(a_t|s_t)``, of the policy that acted.
        target_log_probs: ``log pi(a_t|s_t)``, of the policy being learned.
        rewards, values, next_values, episode_end: ``V(s_t)``, ``V(s'_t)`` and 1 where ``s'_t`` is terminal.
            Every array is ``[B]`` or ``[B, 1]``.
        sequence_lengths: segment lengths, summing to ``B``.
        gamma: discount, in [0, 1].
        rho_bar: clip of the importance weights in the targets' TD errors and the advantages (> 0;
            the paper's 1).
        c_bar: clip of the trace-cutting weights (> 0; the paper's 1).

    Raises:
        ValueError: a parameter out of range, or lengths that do not sum to the rows.
    """
    check_range("gamma", gamma, 0.0, 1.0)
    check_clips(rho_bar, c_bar)
    (mu, pi, r, v, nv, end), lengths = segment_columns(
        (behaviour_log_probs, target_log_probs, rewards, values, next_values, episode_end), sequence_lengths
    )
    ratios = np.exp(pi - mu)
    rhos = np.minimum(rho_bar, ratios)
    cs = np.minimum(c_bar, ratios)
    discounts = gamma * (1.0 - end)
    deltas = rhos * (r + discounts * nv - v)
    corrections = backward_sums(deltas, discounts * cs, lengths)  # v_t - V(s_t)
    targets = v + corrections
    # v'_t: the next row's target inside a segment, the bootstrap value on a segment's last row.
    next_targets = nv.copy()
    inside = np.ones(r.shape[0], dtype=bool)
    inside[np.cumsum(lengths) - 1] = False
    next_targets[inside] = targets[1:][inside[:-1]]
    advantages = rhos * (r + discounts * next_targets - v)
    return VTraceTargets(targets.astype(np.float32), advantages.astype(np.float32), rhos.astype(np.float32))
