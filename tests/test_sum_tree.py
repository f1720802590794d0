"""SumTree against a brute-force reference: sums, minimum, prefix-sum search and sampling proportions."""

from __future__ import annotations

import numpy as np
import pytest

from parl.experience.sum_tree import SumTree

CAPACITIES = [1, 2, 3, 5, 8, 13, 100]
FANOUTS = [2, 3, 32]  # deep trees on small capacities, and the default


def reference_find(priorities: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Leaf i with sum(p[:i]) <= v < sum(p[:i + 1]), by a cumulative sum."""
    return np.searchsorted(np.cumsum(priorities), values, side="right")


def random_tree(capacity: int, fanout: int, rng: np.random.Generator, updates: int = 20):
    """A tree and its reference after random batched updates (integer priorities, so sums are exact)."""
    tree, reference = SumTree(capacity, fanout=fanout), rng.integers(0, 10, size=capacity).astype(np.float64)
    tree.update(np.arange(capacity), reference)
    for _ in range(updates):
        indices = rng.integers(0, capacity, size=int(rng.integers(1, 2 * capacity + 2)))
        priorities = rng.integers(0, 10, size=len(indices)).astype(np.float64)
        tree.update(indices, priorities)
        for i, p in zip(indices, priorities):  # one at a time: the last write of an index wins
            reference[i] = p
    return tree, reference


@pytest.mark.parametrize("fanout", FANOUTS)
@pytest.mark.parametrize("capacity", CAPACITIES)
def test_total_min_and_leaves_match_the_reference(capacity, fanout) -> None:
    rng = np.random.default_rng(capacity)
    tree, reference = random_tree(capacity, fanout, rng)
    assert tree.total == reference.sum()
    np.testing.assert_array_equal(tree.get(np.arange(capacity)), reference)
    assert tree.min == reference.min()


@pytest.mark.parametrize("fanout", FANOUTS)
def test_min_covers_only_leaves_that_were_set(fanout) -> None:
    tree = SumTree(6, fanout=fanout)
    assert tree.min == np.inf and tree.total == 0.0
    tree.update(np.array([4, 1]), np.array([3.0, 5.0]))
    assert tree.min == 3.0  # the four leaves never set do not count as 0
    tree.update(np.array([4]), np.array([7.0]))
    assert tree.min == 5.0
    tree.update(np.array([2]), np.array([0.0]))
    assert tree.min == 0.0


@pytest.mark.parametrize("fanout", FANOUTS)
@pytest.mark.parametrize("capacity", CAPACITIES)
def test_find_matches_the_reference_everywhere_including_interval_edges(capacity, fanout) -> None:
    rng = np.random.default_rng(100 + capacity)
    tree, reference = random_tree(capacity, fanout, rng)
    if reference.sum() == 0:
        reference[0] = 1.0
        tree.update(np.array([0]), np.array([1.0]))
    cumulative = np.cumsum(reference)
    # Interior points, and every interval edge exactly (exact in float64 with integer priorities).
    values = np.concatenate([rng.random(500) * reference.sum(), [0.0], cumulative[:-1]])
    values = values[values < reference.sum()]
    found = tree.find(values)
    np.testing.assert_array_equal(found, reference_find(reference, values))
    assert np.all(reference[found] > 0)  # zero-priority leaves are never found


@pytest.mark.parametrize("fanout", FANOUTS)
def test_find_clips_values_outside_the_total_onto_positive_leaves(fanout) -> None:
    tree = SumTree(5, fanout=fanout)
    tree.update(np.arange(5), np.array([0.0, 2.0, 0.0, 3.0, 0.0]))
    np.testing.assert_array_equal(tree.find(np.array([-1.0, 0.0, 5.0, 9.0])), [1, 1, 3, 3])
    np.testing.assert_array_equal(tree.find(np.array([[1.0, 2.0], [4.0, 4.999]])), [[1, 3], [3, 3]])


@pytest.mark.parametrize("fanout", FANOUTS)
def test_find_lands_on_positive_leaves_when_rounding_puts_a_value_past_a_subtree(fanout) -> None:
    tree = SumTree(4, fanout=fanout)
    priorities = np.array([0.1, 0.2, 0.0, 0.0])  # 0.1 + 0.2 is not exactly 0.3 in floating point
    tree.update(np.arange(4), priorities)
    found = tree.find(np.array([0.3, tree.total, np.nextafter(tree.total, 0)]))
    np.testing.assert_array_equal(found, [1, 1, 1])


@pytest.mark.parametrize("fanout", FANOUTS)
@pytest.mark.parametrize("capacity", [1, 3, 7, 64])
def test_sampling_proportions_follow_the_priorities(capacity, fanout) -> None:
    rng = np.random.default_rng(capacity)
    priorities = rng.random(capacity) * (rng.random(capacity) > 0.2)
    priorities[0] = 0.5  # at least one positive
    tree = SumTree(capacity, fanout=fanout)
    tree.update(np.arange(capacity), priorities)
    draws = 200_000
    counts = np.zeros(capacity)
    for _ in range(draws // 100):
        counts += np.bincount(tree.sample(100, rng), minlength=capacity)
    expected = priorities / priorities.sum()
    assert np.all(counts[priorities == 0] == 0)
    # Stratified draws vary less than independent ones; the binomial bound is a safe envelope.
    sigma = np.sqrt(draws * expected * (1 - expected))
    assert np.all(np.abs(counts - draws * expected) <= 5 * sigma + 1), (counts / draws, expected)


def test_sampling_is_stratified_one_draw_per_equal_segment() -> None:
    tree = SumTree(4)
    tree.update(np.arange(4), np.array([1.0, 1.0, 1.0, 1.0]))
    rng = np.random.default_rng(0)
    for _ in range(50):
        np.testing.assert_array_equal(tree.sample(4, rng), [0, 1, 2, 3])  # one draw per quarter of the mass
        assert np.all(np.diff(tree.sample(16, rng)) >= 0)


@pytest.mark.parametrize("fanout", FANOUTS)
def test_repeated_indices_in_one_update_keep_the_last_priority(fanout) -> None:
    tree = SumTree(8, fanout=fanout)
    tree.update(np.array([3, 5, 3, 3, 5]), np.array([1.0, 2.0, 7.0, 4.0, 6.0]))
    np.testing.assert_array_equal(tree.get(np.array([3, 5])), [4.0, 6.0])
    assert tree.total == 10.0


def test_many_small_updates_leave_no_rounding_drift() -> None:
    tree, rng = SumTree(1000), np.random.default_rng(0)
    reference = np.zeros(1000)
    for _ in range(2000):
        i = rng.integers(0, 1000, size=32)
        p = rng.random(32) * 1e3
        tree.update(i, p)
        reference[i] = p  # no repeats matter here: rng indices may repeat, last wins in both
    np.testing.assert_allclose(tree.total, reference.sum(), rtol=1e-12)


@pytest.mark.parametrize(
    "indices, priorities, words",
    [
        (np.array([5]), np.array([1.0]), ["[0, 5)", "[5]"]),
        (np.array([-1]), np.array([1.0]), ["[0, 5)", "[-1]"]),
        (np.array([1.0]), np.array([1.0]), ["integers", "float64"]),
        (np.array([1]), np.array([-2.0]), ["finite and >= 0", "-2."]),
        (np.array([1, 2]), np.array([1.0, np.nan]), ["finite and >= 0", "nan"]),
        (np.array([1, 2]), np.array([1.0]), ["2 indices", "1 priorities"]),
    ],
)
def test_bad_updates_raise_naming_the_value(indices, priorities, words) -> None:
    with pytest.raises(ValueError) as info:
        SumTree(5).update(indices, priorities)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_searching_an_all_zero_tree_raises() -> None:
    tree = SumTree(3)
    with pytest.raises(ValueError, match="sum to 0"):
        tree.sample(2, np.random.default_rng(0))
    tree.update(np.arange(3), np.zeros(3))
    with pytest.raises(ValueError, match="sum to 0"):
        tree.find(np.array([0.0]))


@pytest.mark.parametrize("capacity", [0, -3, 2.5])
def test_bad_capacity_raises(capacity) -> None:
    with pytest.raises(ValueError, match="capacity"):
        SumTree(capacity)


@pytest.mark.parametrize("fanout", [1, 0, 2.0])
def test_bad_fanout_raises(fanout) -> None:
    with pytest.raises(ValueError, match="fanout"):
        SumTree(4, fanout=fanout)
