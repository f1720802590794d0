"""Returns and advantages over time-ordered segments (numpy; one pass per batch).

A batch of on-policy rows is a run of consecutive segments (see
``sequence_lengths`` of :class:`~parl.core.batch.Transition`): each segment is one agent's
steps in time order, and the last row of a segment bootstraps from its
``next_inputs``. An episode end only ever falls on a segment's last row.

    adv = gae(rewards, values, next_values, episode_end, lengths, gamma=0.99, lam=0.95)
    returns = adv + values        # lam = 1: the n-step returns of A2C
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np

from parl.validation import check_range


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    next_values: np.ndarray,
    episode_end: np.ndarray,
    sequence_lengths: Sequence[int],
    gamma: float,
    lam: float,
) -> np.ndarray:
    """Generalized advantage estimates (Schulman et al., 2016), one per row.

    ``A_t = delta_t + gamma * lam * (1 - end_t) * A_{t+1}`` within a segment, where
    ``delta_t = r_t + gamma * (1 - end_t) * V(s'_t) - V(s_t)``; the chain restarts at each
    segment. With ``lam = 1``, ``A_t + V(s_t)`` is the discounted return up to the segment's
    end plus the discounted bootstrap value there (A2C's n-step return).

    Args:
        rewards, values, next_values, episode_end: ``[B]`` or ``[B, 1]`` arrays; ``episode_end``
            is 1 where the next input is terminal.
        sequence_lengths: segment lengths, summing to ``B``.
    """
    check_range("gamma", gamma, 0.0, 1.0)
    check_range("lam", lam, 0.0, 1.0)
    (r, v, nv, end), lengths = segment_columns((rewards, values, next_values, episode_end), sequence_lengths)
    not_end = 1.0 - end
    deltas = r + gamma * not_end * nv - v
    if lengths.max(initial=0) <= 1:
        return deltas.astype(np.float32)
    return backward_sums(deltas, gamma * lam * not_end, lengths).astype(np.float32)


def segment_columns(
    arrays: Sequence[np.ndarray], sequence_lengths: Sequence[int]
) -> Tuple[List[np.ndarray], np.ndarray]:
    """``arrays`` (each ``[B]`` or ``[B, 1]``) as float64 ``[B]`` columns, and the segment lengths as int64.

    Raises:
        ValueError: the lengths do not sum to the rows of the first array.
    """
    columns = [np.asarray(a, dtype=np.float64).reshape(-1) for a in arrays]
    lengths = np.asarray(sequence_lengths, dtype=np.int64)
    if lengths.sum() != columns[0].shape[0]:
        raise ValueError(f"sequence_lengths sum to {int(lengths.sum())}, the batch has {columns[0].shape[0]} rows")
    return columns, lengths


def backward_sums(terms: np.ndarray, decay: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``x_t = terms_t + decay_t * x_{t+1}`` within each segment (``x`` after a segment's last row is 0),
    all segments walked backwards at once, one time offset per step."""
    out = np.empty_like(terms)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    running = np.zeros(len(lengths))
    for offset in range(int(lengths.max(initial=0)) - 1, -1, -1):
        live = lengths > offset
        rows = starts[live] + offset
        carry = np.where(offset == lengths[live] - 1, 0.0, running[live])
        running[live] = terms[rows] + decay[rows] * carry
        out[rows] = running[live]
    return out
