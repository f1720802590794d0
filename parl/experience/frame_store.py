"""FrameStore: stacks of frames kept once per frame, for replay buffers of frame-stacked observations.

    store = FrameStore((4, 84, 84), np.uint8, transitions=100_000)
    ids = store.add_stack(obs)          # int32 [4]: the id of each frame of the stack
    stacks = store.gather(id_rows)      # ids [B, 4] -> [B, 4, 84, 84], bit-identical to the stacks added
    store.release(ids)                  # the stack is no longer held; frames nothing holds are freed

An observation stacked from consecutive frames (gymnasium's ``FrameStackObservation``: the
stacking axis first, the newest frame last) shares all but its newest frame with the one before,
and a transition's ``next_inputs`` is the next transition's ``inputs``. Stored stack by stack,
a stream of such transitions keeps ``2 k`` copies of every frame; stored here, one.

Each frame of a stack added is compared, byte for byte, with the last few distinct frames stored
(:attr:`FrameStore.window` of them, the frames of the stack itself included); an equal frame is
shared (its id is handed out again), any other is written to a free slot of the pool. Nothing is
rebuilt from neighbouring frames, so every stack comes back exactly as it was added, at episode
boundaries too, whatever padding the first stacks of an episode have; observations that share
no frames are kept as exactly, at the memory of plain arrays or more (the pool then grows, and a
warning says so once).

Memory: the pool is allocated for about one new frame per transition plus an eighth for episode
starts, with ``np.zeros``, so pages never written take no memory; fresh slots are handed out only
when no freed one is left, so the resident memory follows the frames in use.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Sequence, Union

import numpy as np

from parl.core.specs import Spec
from parl.validation import ParameterError, check_int

logger = logging.getLogger("parl")

#: What ``ExpReplayHelper(frame_store=...)`` takes.
FrameStoreSetting = Union[bool, str]


class FrameStore:
    """A refcounted pool of frames, holding stacks of shape ``stack_shape`` (the stacking axis first).

    Args:
        stack_shape: one stack's shape, ``[k, *frame_shape]``, e.g. ``[4, 84, 84]``.
        dtype: the frames' dtype.
        transitions: the transitions whose stacks it will hold (the pool starts with room for
            ``transitions + transitions // 8`` frames and a few more).
        name: what the growth warning calls the store (the input spec's name).

    Attributes:
        frames_per_stack: ``k``.
        frame_shape: one frame's shape.
        frame_bytes: bytes of one frame.
        window: the distinct frames most recently stored or shared, which a new frame is compared with.
    """

    def __init__(
        self, stack_shape: Sequence[int], dtype: Union[str, np.dtype], *, transitions: int, name: str = "frames"
    ) -> None:
        shape = tuple(int(d) for d in stack_shape)
        if len(shape) < 2 or min(shape) < 1:
            raise ValueError(f"a frame stack's shape must be [k, *frame_shape] with sizes >= 1, got {list(shape)}")
        transitions = check_int("transitions", transitions, 1)
        self.name = name
        self.stack_shape = shape
        self.frames_per_stack = shape[0]
        self.frame_shape = shape[1:]
        self.dtype = np.dtype(dtype)
        self.frame_bytes = int(np.prod(self.frame_shape)) * self.dtype.itemsize
        self.window = 2 * self.frames_per_stack + 8
        size = transitions + transitions // 8 + 2 * self.frames_per_stack + self.window
        self._pool = np.zeros((size,) + self.frame_shape, self.dtype)  # untouched pages are not resident
        self._holders = [0] * size  # stacks holding each frame, +1 while it is in the window (a list: fast scalars)
        self._free: List[int] = []  # freed slots, reused before fresh ones
        self._top = 0  # slots [0, _top) have been used
        self._recent: Dict[bytes, int] = {}  # the window: frame bytes -> id, least recently used first
        self._last: List[bytes] = []  # the bytes of the last stack added, frame by frame
        self._grown = False

    @property
    def pool_frames(self) -> int:
        """Frames the pool has room for now."""
        return len(self._pool)

    @property
    def frames_in_use(self) -> int:
        """Frames held by a stack or the window."""
        return self._top - len(self._free)

    @property
    def bytes_in_use(self) -> int:
        """Bytes of the frames in use."""
        return self.frames_in_use * self.frame_bytes

    def holders(self) -> np.ndarray:
        """A copy of each pool slot's holder count: the stacks holding the frame, plus 1 while it is in the window."""
        return np.array(self._holders, np.int32)

    def window_ids(self) -> List[int]:
        """The ids of the frames in the window, least recently used first."""
        return list(self._recent.values())

    def add_stack(self, stack: np.ndarray) -> np.ndarray:
        """Hold one stack; returns the int32 ids of its ``k`` frames (for :meth:`gather` and :meth:`release`).

        Raises:
            ValueError: ``stack`` is not of the store's stack shape.
        """
        stack = np.asarray(stack)
        if stack.shape != self.stack_shape:
            raise ValueError(
                f"frame store {self.name!r} holds stacks of shape {list(self.stack_shape)}, got {list(stack.shape)}"
            )
        stack = stack.astype(self.dtype, copy=False)
        ids: List[int] = []
        placed: List[bytes] = []
        for j in range(self.frames_per_stack):
            key = self._likely_equal(stack[j].tobytes(), j, placed)
            frame_id = self._recent.pop(key, None)
            if frame_id is None:
                frame_id = self._place(stack[j])
                self._holders[frame_id] += 1  # the window's hold
            self._recent[key] = frame_id  # now the most recently used
            self._holders[frame_id] += 1
            ids.append(frame_id)
            placed.append(key)
        self._last = placed
        while len(self._recent) > self.window:
            self._drop(self._recent.pop(next(iter(self._recent))))
        return np.array(ids, np.int32)

    def release(self, ids: np.ndarray) -> None:
        """Let go of the stacks whose frame ids are ``ids`` (any shape); frames nothing holds any more are freed.

        Raises:
            ValueError: an id is not held.
        """
        for frame_id in np.asarray(ids).ravel().tolist():
            if not 0 <= frame_id < self._top or self._holders[frame_id] <= 0:
                raise ValueError(f"frame store {self.name!r}: frame id {frame_id} is not held")
            self._drop(frame_id)

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """The stacks of frame ids ``ids`` (``[B, k]`` gives ``[B, k, *frame_shape]``), as one copy."""
        return self._pool[np.asarray(ids)]

    def _likely_equal(self, key: bytes, j: int, placed: List[bytes]) -> bytes:
        """``key``, or the equal bytes object of a frame just seen, whose hash is computed already (the
        window is searched by hash, and hashing a frame costs more than comparing it): the frame one
        step older in the last stack (a stack shifted by one frame), the same frame of the last stack
        (``next_inputs`` followed by the next ``inputs``) or the frame before in this stack (a padded
        episode start). A plain byte comparison each; the window lookup still decides what is shared."""
        for candidate in self._last[j + 1 : j + 2] + self._last[j : j + 1] + placed[-1:]:
            if candidate == key:
                return candidate
        return key

    def _place(self, frame: np.ndarray) -> int:
        """Write ``frame`` to a free slot (a freed one first; the pool grows when none is left); its id."""
        if self._free:
            frame_id = self._free.pop()
        else:
            if self._top == len(self._pool):
                self._grow()
            frame_id = self._top
            self._top += 1
        self._pool[frame_id] = frame
        return frame_id

    def _drop(self, frame_id: int) -> None:
        """One holder fewer for frame ``frame_id``; freed when none is left."""
        self._holders[frame_id] -= 1
        if self._holders[frame_id] == 0:
            self._free.append(frame_id)

    def _grow(self) -> None:
        """A pool 25% larger, with every frame kept (warned about once)."""
        size = len(self._pool)
        new_size = size + max(size // 4, self.frames_per_stack)
        if not self._grown:
            self._grown = True
            logger.warning(
                "frame store %r: %d frames in use fill its pool, which grows to %d frames: the observations do not "
                "look like stacks of consecutive frames (stacking axis first, newest frame last) in episodes of more "
                "than a few steps, so they share few frames and each stored transition takes more memory than one "
                "frame",
                self.name,
                size,
                new_size,
            )
        pool = np.zeros((new_size,) + self.frame_shape, self.dtype)
        pool[:size] = self._pool
        self._holders.extend([0] * (new_size - size))
        self._pool = pool


def is_frame_stack(spec: Spec) -> bool:
    """Whether ``spec`` looks like a channel-first stack of frames: uint8 of shape ``[k, H, W]`` with ``k < H, W``."""
    return spec.dtype == np.uint8 and len(spec.shape) == 3 and spec.shape[0] < min(spec.shape[1:])


def check_frame_store(value: object) -> FrameStoreSetting:
    """``value`` if it is a setting of ``frame_store``: True, False or ``"auto"``.

    Raises:
        ParameterError: it is anything else.
    """
    if isinstance(value, bool) or (isinstance(value, str) and value == "auto"):
        return value
    raise ParameterError("frame_store", "True, False or 'auto'", value)


def frame_stack_inputs(input_specs: Sequence[Spec], frame_store: FrameStoreSetting) -> List[str]:
    """The names of the input specs to store as frame stacks: those :func:`is_frame_stack` accepts,
    unless ``frame_store`` is False (none).

    Raises:
        ValueError: ``frame_store`` is True and no input spec is a frame stack, or it is not a setting.
    """
    if not check_frame_store(frame_store):
        return []
    names = [spec.name for spec in input_specs if is_frame_stack(spec)]
    if frame_store is True and not names:
        raise ValueError(
            "frame_store=True needs an input spec of uint8 frame stacks [k, H, W] with k < H, W, got input specs "
            f"{list(input_specs)}"
        )
    return names
