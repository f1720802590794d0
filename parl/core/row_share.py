"""RowShare: which rows of a batch one of several learners computes gradients on.

    share = RowShare(rank=1, learners=2)
    first, end = share.rows(10)                 # (5, 10): rows 5..9
    first, end = share.segments((3, 3, 4))      # (1, 3): segments 1 and 2 (rows 3..9)
    part = share.fraction(end - first, 10)      # 0.5: this share's part of a mean over the 10 rows

Several learners that split one update each take their share of its rows,
compute the gradient of the mean over those rows, scale it by the share's
fraction of all the rows and sum the results across learners: the sum is the
gradient of the mean over all rows, as one learner computes it. Shares are
contiguous and in rank order, and sizes differ by at most one row (or one
segment), as ``numpy.array_split`` cuts.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence, Tuple


class RowShare(NamedTuple):
    """Learner ``rank``'s share of a batch split between ``learners`` learners."""

    rank: int = 0
    learners: int = 1

    @staticmethod
    def of(rank: int, count: int) -> "RowShare":
        """A checked share.

        Raises:
            ValueError: ``count`` is not an int >= 1, or ``rank`` not in ``[0, count)``.
        """
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"learner count must be an int >= 1, got {count!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < count:
            raise ValueError(f"learner rank must be an int in [0, {count}), got {rank!r}")
        return RowShare(rank, count)

    @property
    def whole(self) -> bool:
        """True for a learner that works alone (its share is every row)."""
        return self.learners == 1

    def rows(self, total: int) -> Tuple[int, int]:
        """``(first, end)``: this share of ``total`` rows.

        Raises:
            ValueError: fewer rows than learners (some learner would get none).
        """
        if total < self.learners:
            raise ValueError(f"a batch of {total} rows cannot be split between {self.learners} learners")
        size, extra = divmod(total, self.learners)
        first = self.rank * size + min(self.rank, extra)
        return first, first + size + (1 if self.rank < extra else 0)

    def segments(self, lengths: Sequence[int]) -> Tuple[int, int]:
        """``(first, end)``: this share of the segments whose lengths are ``lengths`` (whole segments,
        nearly equal counts of them)."""
        return self.rows(len(lengths))

    @staticmethod
    def fraction(share_rows: int, total_rows: int) -> float:
        """The weight of a mean over ``share_rows`` rows in the mean over ``total_rows``."""
        return share_rows / total_rows


#: The share of a learner that works alone: every row.
WHOLE_BATCH = RowShare(0, 1)
