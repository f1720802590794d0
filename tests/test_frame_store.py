"""Frame-stack replay storage: FrameStore on its own, and replay buffers keeping frame stacks once per frame.

Every buffer test compares a frame-store buffer with a plain one fed the same transitions: what
``gather`` returns must be bit-identical, field by field.
"""

from __future__ import annotations

import logging
from typing import Iterator, Tuple

import numpy as np
import pytest

import parl
from parl.core.specs import Spec
from parl.experience.frame_store import FrameStore, check_frame_store, frame_stack_inputs, is_frame_stack
from parl.experience.n_step import NStepAccumulator
from parl.experiment.config.class_spec import ConfigError, check_arguments

from toys import EchoModel, RecordingCommunicator, specs

K = 4
FRAME = (6, 7)
INPUTS = specs(("obs", [K, *FRAME], "uint8"), ("pos", [2], "float32"))
ACTIONS = specs(("action", [1], "int64"))
REWARDS = specs(("reward", [1], "float32"))

#: One step of a stream: its transition, whether its episode ends there, whether it is an episode's first step.
Step = Tuple[parl.Transition, bool, bool]


def frames_stream(
    rng: np.random.Generator, episodes: int, *, padding: str = "reset", lengths: Tuple[int, int] = (1, 40)
) -> Iterator[Step]:
    """Episodes of stacked frames as FrameStackObservation makes them (stacking axis first, newest last),
    the first stack padded with the reset frame (``padding="reset"``) or with zeros; episodes of random
    lengths, terminated or truncated at random; a frame repeats the one before now and then (a still screen)."""
    for _ in range(episodes):
        reset = rng.integers(0, 256, FRAME, dtype=np.uint8)
        pad = reset if padding == "reset" else np.zeros(FRAME, np.uint8)
        stack = np.stack([pad] * (K - 1) + [reset])
        length = int(rng.integers(*lengths, endpoint=True))
        terminated = bool(rng.integers(2))
        for t in range(length):
            frame = stack[-1].copy() if rng.random() < 0.2 else rng.integers(0, 256, FRAME, dtype=np.uint8)
            next_stack = np.concatenate([stack[1:], frame[None]])
            last = t == length - 1
            transition = parl.Transition(
                inputs={"obs": stack, "pos": rng.normal(size=2).astype(np.float32)},
                next_inputs={"obs": next_stack, "pos": rng.normal(size=2).astype(np.float32)},
                actions={"action": np.array([rng.integers(6)], np.int64)},
                rewards={"reward": np.array([rng.normal()], np.float32)},
                next_episode_end=np.array([float(last and terminated)], np.float32),
                states={},
                next_states={},
            )
            yield transition, last, t == 0
            stack = next_stack


def random_stacks(rng: np.random.Generator, count: int) -> Iterator[Step]:
    """Transitions whose stacks share no frames (no stacking at all)."""
    for t in range(count):
        yield (
            parl.Transition(
                inputs={"obs": rng.integers(0, 256, (K, *FRAME), dtype=np.uint8), "pos": np.zeros(2, np.float32)},
                next_inputs={"obs": rng.integers(0, 256, (K, *FRAME), dtype=np.uint8), "pos": np.ones(2, np.float32)},
                actions={"action": np.array([t], np.int64)},
                rewards={"reward": np.array([t], np.float32)},
                next_episode_end=np.zeros(1, np.float32),
                states={},
                next_states={},
            ),
            False,
            False,
        )


def assert_same(a: parl.Transition, b: parl.Transition) -> None:
    """Every field of the batches ``a`` and ``b`` bit-identical, dtypes included."""
    for field in ("inputs", "next_inputs", "actions", "rewards", "states", "next_states"):
        left, right = getattr(a, field), getattr(b, field)
        assert sorted(left) == sorted(right), field
        for name in left:
            assert left[name].dtype == right[name].dtype, (field, name)
            assert np.array_equal(left[name], right[name]), (field, name)
    for field in ("next_episode_end", "bootstrap_steps", "weights"):
        left, right = getattr(a, field), getattr(b, field)
        assert (left is None) == (right is None), field
        if left is not None:
            assert np.array_equal(left, right), field


def buffers(capacity: int, **kwargs) -> Tuple[parl.ReplayBuffer, parl.ReplayBuffer]:
    """A frame-store buffer and a plain one of the same capacity and options."""
    plain = parl.ReplayBuffer(capacity, INPUTS, [], ACTIONS, REWARDS, **kwargs)
    frames = parl.ReplayBuffer(capacity, INPUTS, [], ACTIONS, REWARDS, frame_inputs=["obs"], **kwargs)
    return frames, plain


def store_of(buffer: parl.ReplayBuffer) -> FrameStore:
    return buffer.frame_stores["obs"]


def check_holders(store: FrameStore, stacks_held: int) -> None:
    """The store's exact bookkeeping: each held stack holds ``k`` frames and the window one each, and the
    frames in use are exactly those with a holder."""
    holders = store.holders()
    assert holders.min() >= 0
    assert holders.sum() == stacks_held * K + len(store.window_ids())
    assert np.count_nonzero(holders) == store.frames_in_use
    assert all(holders[i] >= 1 for i in store.window_ids())


# -- FrameStore on its own ----------------------------------------------------------------------------


def test_stacks_come_back_exactly_and_shared_frames_are_stored_once() -> None:
    rng = np.random.default_rng(0)
    store = FrameStore((K, *FRAME), np.uint8, transitions=10)
    frames = rng.integers(0, 256, (K + 2, *FRAME), dtype=np.uint8)
    first = store.add_stack(frames[:K])
    second = store.add_stack(frames[1 : K + 1])  # shifted by one frame
    again = store.add_stack(frames[1 : K + 1])
    padded = store.add_stack(np.stack([frames[K + 1]] * K))  # one frame, four times
    assert store.frames_in_use == K + 2
    assert list(second[:-1]) == list(first[1:]) and list(again) == list(second)
    assert len(set(padded.tolist())) == 1
    out = store.gather(np.stack([first, second, again, padded]))
    assert out.dtype == np.uint8 and out.shape == (4, K, *FRAME)
    for row, stack in zip(out, [frames[:K], frames[1 : K + 1], frames[1 : K + 1], np.stack([frames[K + 1]] * K)]):
        assert np.array_equal(row, stack)
    check_holders(store, stacks_held=4)


def test_released_frames_are_freed_once_out_of_the_window_and_their_slots_reused() -> None:
    rng = np.random.default_rng(1)
    store = FrameStore((K, *FRAME), np.uint8, transitions=100)
    held = [store.add_stack(rng.integers(0, 256, (K, *FRAME), dtype=np.uint8)) for _ in range(10)]
    for ids in held:
        store.release(ids)
    assert store.frames_in_use == store.window  # only the window holds frames now
    check_holders(store, stacks_held=0)
    freed = set(np.concatenate(held).tolist()) - set(store.window_ids())
    for _ in range(10):  # new frames go to freed slots and push the old ones out of the window
        ids = store.add_stack(rng.integers(0, 256, (K, *FRAME), dtype=np.uint8))
        assert set(ids.tolist()) <= freed
        store.release(ids)
        freed = set(range(10 * K)) - set(store.window_ids())
    assert store.frames_in_use == store.window


def test_frame_store_refuses_a_wrong_shape_and_an_id_it_does_not_hold() -> None:
    store = FrameStore((K, *FRAME), np.uint8, transitions=4, name="obs")
    with pytest.raises(ValueError, match=r"'obs' holds stacks of shape \[4, 6, 7\], got \[4, 7, 6\]"):
        store.add_stack(np.zeros((K, 7, 6), np.uint8))
    ids = store.add_stack(np.zeros((K, *FRAME), np.uint8))
    store.release(ids)
    with pytest.raises(ValueError, match=r"frame id 3 is not held"):
        store.release(np.array([3]))
    with pytest.raises(ValueError, match=r"\[4\]"):
        FrameStore((4,), np.uint8, transitions=4)


# -- replay buffers: lossless against plain storage ---------------------------------------------------


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_a_frame_store_buffer_gives_back_what_a_plain_one_does_as_the_ring_wraps(padding: str) -> None:
    rng = np.random.default_rng(2)
    frames, plain = buffers(50)
    added = 0
    for transition, _, _ in frames_stream(rng, 40, padding=padding):
        assert frames.add(transition) == plain.add(transition)
        added += 1
        if added % 7 == 0:
            slots = np.arange(len(plain))
            assert_same(frames.gather(slots), plain.gather(slots))
    assert added > 4 * 50  # the ring wrapped several times
    assert_same(frames.gather(np.arange(50)), plain.gather(np.arange(50)))
    assert frames.gather(np.arange(50)).inputs["obs"].dtype == np.uint8
    check_holders(store_of(frames), stacks_held=2 * 50)


def test_no_stack_mixes_two_episodes() -> None:
    rng = np.random.default_rng(3)
    frames, _ = buffers(500)
    starts = []
    for transition, _, first in frames_stream(rng, 30, lengths=(1, 12)):
        slot = frames.add(transition)
        if first:
            starts.append((slot, transition.inputs["obs"][-1].copy()))
    batch = frames.gather(np.array([slot for slot, _ in starts]))
    for row, (_, reset) in enumerate(starts):
        # The first stack of an episode is its reset frame K times: no frame of the episode before.
        assert np.array_equal(batch.inputs["obs"][row], np.stack([reset] * K)), row
        assert np.array_equal(batch.next_inputs["obs"][row][: K - 1], np.stack([reset] * (K - 1))), row


def test_n_step_transitions_through_a_frame_store_are_exact() -> None:
    rng = np.random.default_rng(4)
    frames, plain = buffers(60, bootstrap_steps=True)
    accumulator = NStepAccumulator(3, gamma=0.9)
    for transition, episode_over, _ in frames_stream(rng, 30):
        for n_step_transition in accumulator.add(transition, episode_over):
            frames.add(n_step_transition)
            plain.add(n_step_transition)
    slots = np.arange(len(plain))
    assert_same(frames.gather(slots), plain.gather(slots))
    assert frames.gather(slots).bootstrap_steps.max() == 3


def test_prioritized_replay_over_a_frame_store_samples_the_same_batches() -> None:
    rng = np.random.default_rng(5)
    plain = parl.PrioritizedReplayBuffer(40, INPUTS, [], ACTIONS, REWARDS)
    frames = parl.PrioritizedReplayBuffer(40, INPUTS, [], ACTIONS, REWARDS, frame_inputs=["obs"])
    rng_plain, rng_frames = np.random.default_rng(6), np.random.default_rng(6)
    for i, (transition, _, _) in enumerate(frames_stream(rng, 20)):
        plain.add(transition)
        frames.add(transition)
        if i % 5 == 4:
            (batch_plain, slots_plain), (batch_frames, slots_frames) = (
                plain.sample(16, rng_plain),
                frames.sample(16, rng_frames),
            )
            assert np.array_equal(slots_plain, slots_frames)
            assert_same(batch_frames, batch_plain)
            td = rng.normal(size=16)
            plain.update_priorities(slots_plain, td)
            frames.update_priorities(slots_frames, td)
    assert list(frames.frame_stores) == ["obs"] and list(plain.frame_stores) == []


def test_stacks_that_share_no_frames_are_kept_exactly_in_a_grown_pool_with_one_warning(caplog) -> None:
    rng = np.random.default_rng(7)
    frames, plain = buffers(30)
    pool = store_of(frames).pool_frames
    with caplog.at_level(logging.WARNING, logger="parl"):
        for transition, _, _ in random_stacks(rng, 100):
            frames.add(transition)
            plain.add(transition)
    assert store_of(frames).pool_frames > pool
    assert_same(frames.gather(np.arange(30)), plain.gather(np.arange(30)))
    warnings = [r for r in caplog.records if "do not look like stacks of consecutive frames" in r.getMessage()]
    assert len(warnings) == 1


# -- memory accounting -------------------------------------------------------------------------------


def test_a_consecutive_stream_costs_about_one_frame_per_transition_and_old_episodes_are_freed() -> None:
    rng = np.random.default_rng(8)
    capacity = 400
    frames, _ = buffers(capacity)
    episodes = 0
    for transition, _, first in frames_stream(rng, 25, lengths=(20, 60)):
        frames.add(transition)
        episodes += first
    store = store_of(frames)
    transitions = len(frames)
    assert store.frames_in_use <= transitions * 1.05 + episodes + K + store.window
    assert store.pool_frames == capacity + capacity // 8 + 2 * K + store.window  # never grew
    check_holders(store, stacks_held=2 * transitions)
    # One long episode overwrites every slot: every frame of the old episodes is freed.
    for transition, _, _ in frames_stream(rng, 1, lengths=(capacity + 10, capacity + 10)):
        frames.add(transition)
    assert store.frames_in_use <= capacity + K + store.window
    check_holders(store, stacks_held=2 * capacity)


def test_an_atari_shaped_stream_takes_under_7_5_kb_per_transition() -> None:
    rng = np.random.default_rng(9)
    spec = [Spec("obs", [4, 84, 84], "uint8")]
    buffer = parl.ReplayBuffer(5_000, spec, [], ACTIONS, REWARDS, frame_inputs=["obs"])
    stack = np.zeros((4, 84, 84), np.uint8)
    for t in range(5_000):
        if t % 700 == 0:  # a new episode: its reset frame, four times
            stack = np.stack([rng.integers(0, 256, (84, 84), dtype=np.uint8)] * 4)
        next_stack = np.concatenate([stack[1:], rng.integers(0, 256, (1, 84, 84), dtype=np.uint8)])
        buffer.add(
            parl.Transition(
                inputs={"obs": stack},
                next_inputs={"obs": next_stack},
                actions={"action": np.array([0], np.int64)},
                rewards={"reward": np.array([0.0], np.float32)},
                next_episode_end=np.zeros(1, np.float32),
                states={},
                next_states={},
            )
        )
        stack = next_stack
    store = buffer.frame_stores["obs"]
    ids_bytes = 2 * 4 * np.dtype(np.int32).itemsize
    per_transition = store.bytes_in_use / len(buffer) + ids_bytes
    assert per_transition <= 7_500, per_transition
    assert per_transition >= 7_056  # at least one frame each: the accounting counts what is there


# -- choosing the inputs ---------------------------------------------------------------------------


def test_auto_picks_channel_first_uint8_frame_stacks_only() -> None:
    specs_ = [
        Spec("stack", [4, 84, 84], "uint8"),
        Spec("float_stack", [4, 84, 84], "float32"),
        Spec("rgb", [84, 84, 3], "uint8"),
        Spec("vector", [8], "uint8"),
    ]
    assert [s.name for s in specs_ if is_frame_stack(s)] == ["stack"]
    assert frame_stack_inputs(specs_, "auto") == ["stack"]
    assert frame_stack_inputs(specs_, True) == ["stack"]
    assert frame_stack_inputs(specs_, False) == []
    assert frame_stack_inputs(specs_[1:], "auto") == []
    with pytest.raises(ValueError, match=r"frame_store=True needs .*'rgb'"):
        frame_stack_inputs(specs_[1:], True)


@pytest.mark.parametrize("value", ["yes", 1, None, "Auto"])
def test_a_bad_frame_store_setting_is_named(value: object) -> None:
    with pytest.raises(ValueError, match=rf"frame_store must be True, False or 'auto', got {value!r}"):
        check_frame_store(value)
    with pytest.raises(ValueError, match=r"frame_store must be"):
        parl.ExpReplayHelper(frame_store=value)


def test_the_helper_keeps_frame_stacks_by_default_and_plain_arrays_when_told() -> None:
    class FrameModel(EchoModel):
        def get_input_specs(self):
            return [("obs", dict(shape=[K, *FRAME], dtype="uint8"))]

    for setting, expected in [("auto", ["obs"]), (True, ["obs"]), (False, [])]:
        helper = parl.ExpReplayHelper(capacity=10, frame_store=setting)
        helper.bind(RecordingCommunicator(FrameModel()))
        assert sorted(helper.buffer.frame_stores) == expected
    helper = parl.ExpReplayHelper(capacity=10, frame_store=True)
    with pytest.raises(ValueError, match=r"frame_store=True needs"):
        helper.bind(RecordingCommunicator(EchoModel()))


def test_a_config_sets_frame_store_on_the_helper_and_refuses_other_values() -> None:
    # The check a robot config's tasks.<name>.helper section goes through.
    for value in (True, False, "auto"):
        assert check_arguments(parl.ExpReplayHelper, "parl.ExpReplayHelper", {"frame_store": value}, "h")[0] == {
            "frame_store": value
        }
    with pytest.raises(ConfigError, match=r"tasks.RL.helper.frame_store: expected true or false or 'auto', got 'no'"):
        check_arguments(parl.ExpReplayHelper, "parl.ExpReplayHelper", {"frame_store": "no"}, "tasks.RL.helper")


def test_frame_inputs_must_name_stackable_input_specs() -> None:
    with pytest.raises(ValueError, match=r"'frames', which is not an input spec \(inputs: \['obs', 'pos'\]\)"):
        parl.ReplayBuffer(4, INPUTS, [], ACTIONS, REWARDS, frame_inputs=["frames"])
    with pytest.raises(ValueError, match=r"'pos', whose shape \[2\]"):
        parl.ReplayBuffer(4, INPUTS, [], ACTIONS, REWARDS, frame_inputs=["pos"])
    with pytest.raises(ValueError, match=r"got the string 'obs'"):
        parl.ReplayBuffer(4, INPUTS, [], ACTIONS, REWARDS, frame_inputs="obs")
