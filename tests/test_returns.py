"""gae over time-ordered segments, against a per-segment reference written the slow way."""

from __future__ import annotations

from typing import List, Sequence

import numpy as np
import pytest

from parl.algorithms.returns import gae


def reference_gae(rewards, values, next_values, ends, lengths: Sequence[int], gamma: float, lam: float) -> np.ndarray:
    """Brute force: for every row, sum the discounted TD errors up to its segment's end or an episode end."""
    out = np.zeros(len(rewards))
    start = 0
    for n in lengths:
        for t in range(start, start + n):
            total, factor = 0.0, 1.0
            for k in range(t, start + n):
                delta = rewards[k] + gamma * (1.0 - ends[k]) * next_values[k] - values[k]
                total += factor * delta
                if ends[k]:
                    break
                factor *= gamma * lam
            out[t] = total
        start += n
    return out


def reference_returns(rewards, next_values, ends, lengths: Sequence[int], gamma: float) -> np.ndarray:
    """Discounted rewards to the segment's end, plus the discounted bootstrap value there (none after a termination)."""
    out = np.zeros(len(rewards))
    start = 0
    for n in lengths:
        last = start + n - 1
        for t in range(start, start + n):
            ret = sum(gamma ** (k - t) * rewards[k] for k in range(t, last + 1))
            ret += gamma ** (last - t + 1) * (1.0 - ends[last]) * next_values[last]
            out[t] = ret
        start += n
    return out


def random_segments(rng: np.random.Generator, lengths: List[int], terminal: List[bool]):
    """Rows of several segments as helpers send them: an episode end only on a segment's last row,
    and each row's next value is the following row's value except at a segment's end."""
    b = sum(lengths)
    rewards = rng.standard_normal(b)
    values = rng.standard_normal(b)
    next_values = rng.standard_normal(b)
    ends = np.zeros(b)
    last_rows = np.cumsum(lengths) - 1
    # Within a segment the next input is the following row's input: V(s'_t) = V(s_{t+1}).
    inner = np.setdiff1d(np.arange(b), last_rows)
    next_values[inner] = values[inner + 1]
    ends[last_rows[np.array(terminal, bool)]] = 1.0
    return rewards, values, next_values, ends


CASES = [
    ([5], [False]),
    ([5], [True]),
    ([1], [True]),
    ([1], [False]),
    ([1, 1, 1, 1], [True, False, False, True]),  # replay-like rows
    ([3, 1, 4, 2], [False, True, True, False]),
    ([1, 7, 1, 2, 6], [False, False, True, True, False]),
    ([8, 8], [True, False]),
]


@pytest.mark.parametrize("lengths, terminal", CASES)
@pytest.mark.parametrize("gamma, lam", [(0.99, 0.95), (0.9, 0.5), (0.5, 1.0), (1.0, 1.0), (0.8, 0.0), (0.0, 0.7)])
def test_gae_matches_a_per_segment_reference(lengths, terminal, gamma, lam) -> None:
    rng = np.random.default_rng(sum(lengths) * 31 + len(lengths))
    r, v, nv, end = random_segments(rng, lengths, terminal)
    adv = gae(r, v, nv, end, lengths, gamma, lam)
    assert adv.shape == (sum(lengths),) and adv.dtype == np.float32
    np.testing.assert_allclose(adv, reference_gae(r, v, nv, end, lengths, gamma, lam), rtol=1e-5, atol=1e-5)


def test_gae_accepts_column_arrays_and_sequence_lengths_as_arrays() -> None:
    rng = np.random.default_rng(3)
    lengths = [2, 3]
    r, v, nv, end = random_segments(rng, lengths, [False, True])
    flat = gae(r, v, nv, end, lengths, 0.9, 0.8)
    column = gae(*(a.reshape(-1, 1).astype(np.float32) for a in (r, v, nv, end)), np.array(lengths), 0.9, 0.8)
    np.testing.assert_allclose(column, flat, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lengths, terminal", CASES)
def test_lam_one_gives_discounted_returns_plus_the_discounted_bootstrap(lengths, terminal) -> None:
    rng = np.random.default_rng(7 + sum(lengths))
    r, v, nv, end = random_segments(rng, lengths, terminal)
    gamma = 0.9
    returns = gae(r, v, nv, end, lengths, gamma, 1.0) + v
    np.testing.assert_allclose(returns, reference_returns(r, nv, end, lengths, gamma), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lengths, terminal", CASES)
def test_lam_zero_gives_the_one_step_td_errors(lengths, terminal) -> None:
    rng = np.random.default_rng(11 + sum(lengths))
    r, v, nv, end = random_segments(rng, lengths, terminal)
    gamma = 0.95
    td = r + gamma * (1.0 - end) * nv - v
    np.testing.assert_allclose(gae(r, v, nv, end, lengths, gamma, 0.0), td, rtol=1e-5, atol=1e-5)


def test_a_known_segment_by_hand() -> None:
    # One segment of 3 steps, truncated (bootstrap from V = 10), gamma = 0.5, lam = 1.
    r = np.array([1.0, 2.0, 4.0])
    v = np.zeros(3)
    nv = np.array([0.0, 0.0, 10.0])
    adv = gae(r, v, nv, np.zeros(3), [3], 0.5, 1.0)
    np.testing.assert_allclose(adv, [1 + 0.5 * 2 + 0.25 * 4 + 0.125 * 10, 2 + 0.5 * 4 + 0.25 * 10, 4 + 0.5 * 10])
    # Terminated instead: no bootstrap.
    adv = gae(r, v, nv, np.array([0.0, 0.0, 1.0]), [3], 0.5, 1.0)
    np.testing.assert_allclose(adv, [3.0, 4.0, 4.0])


def test_segments_do_not_leak_into_each_other() -> None:
    # The same rows as one segment or as two: only the first segment's rows change.
    rng = np.random.default_rng(5)
    r, v, nv, end = random_segments(rng, [6], [False])
    whole = gae(r, v, nv, end, [6], 0.9, 0.9)
    split = gae(r, v, nv, end, [3, 3], 0.9, 0.9)
    np.testing.assert_allclose(split[3:], whole[3:], rtol=1e-6)
    assert not np.allclose(split[:3], whole[:3])
    # Row 2 is now a segment's last row: it bootstraps from its own next value.
    assert split[2] == pytest.approx(r[2] + 0.9 * nv[2] - v[2], rel=1e-5)


@pytest.mark.parametrize(
    "gamma, lam, name", [(1.5, 0.9, "gamma"), (-0.1, 0.9, "gamma"), (0.9, 1.1, "lam"), (0.9, -0.5, "lam")]
)
def test_bad_gamma_or_lam_raise_naming_them(gamma, lam, name) -> None:
    with pytest.raises(ValueError) as info:
        gae(np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2), [2], gamma, lam)
    assert name in str(info.value)
    assert str(gamma if name == "gamma" else lam) in str(info.value)


def test_sequence_lengths_that_do_not_cover_the_batch_raise() -> None:
    with pytest.raises(ValueError, match="sequence_lengths"):
        gae(np.zeros(4), np.zeros(4), np.zeros(4), np.zeros(4), [2, 1], 0.9, 0.9)
