"""ReplayBuffer storage and sampling; ExpReplayHelper and OnPolicyHelper schedules."""

from __future__ import annotations

import math

import numpy as np
import pytest

import parl

from toys import EchoModel, RecordingCommunicator, specs

INPUTS = specs(("obs", [3], "float32"), ("mask", [2], "bool"))
STATES = specs(("h", [2, 2], "float32"))
ACTIONS = specs(("action", [1], "int64"), ("logits", [2], "float32"))
REWARDS = specs(("reward", [1], "float32"))


def transition(i: int) -> parl.Transition:
    """Transition ``i``: every field carries ``i`` so a sampled row can be traced and checked for consistency."""
    return parl.Transition(
        inputs={"obs": np.full(3, i, np.float32), "mask": np.array([i % 2 == 0, True])},
        next_inputs={"obs": np.full(3, i + 0.5, np.float32), "mask": np.array([False, i % 2 == 1])},
        states={"h": np.full((2, 2), -i, np.float32)},
        next_states={"h": np.full((2, 2), -i - 0.5, np.float32)},
        actions={"action": np.array([i], np.int64), "logits": np.array([i, 2 * i], np.float32)},
        rewards={"reward": np.array([10.0 * i], np.float32)},
        next_episode_end=np.array([float(i % 3 == 0)], np.float32),
    )


def check_rows(batch: parl.Transition) -> list:
    """The transition index of every row, after checking that each row is one whole stored transition."""
    ids = batch.inputs["obs"][:, 0].astype(int)
    for row, i in enumerate(ids):
        expected = transition(int(i))
        for field in ("inputs", "next_inputs", "states", "next_states", "actions", "rewards"):
            for name, value in getattr(expected, field).items():
                np.testing.assert_array_equal(
                    getattr(batch, field)[name][row], value, err_msg=f"{field}/{name} row {row}"
                )
        np.testing.assert_array_equal(batch.next_episode_end[row], expected.next_episode_end)
    return [int(i) for i in ids]


def make_buffer(capacity: int) -> parl.ReplayBuffer:
    return parl.ReplayBuffer(capacity, INPUTS, STATES, ACTIONS, REWARDS)


def test_sample_shapes_and_dtypes_follow_the_specs() -> None:
    buffer = make_buffer(10)
    for i in range(4):
        buffer.add(transition(i))
    batch = buffer.sample(7, np.random.default_rng(0))
    # A replay sample: no row structure (one-row segments, one env step, weight 1).
    assert batch.sequence_lengths is None and batch.bootstrap_steps is None and batch.weights is None
    for field, spec_list in [
        ("inputs", INPUTS),
        ("next_inputs", INPUTS),
        ("states", STATES),
        ("next_states", STATES),
        ("actions", ACTIONS),
        ("rewards", REWARDS),
    ]:
        assert sorted(getattr(batch, field)) == sorted(s.name for s in spec_list)
        for spec in spec_list:
            array = getattr(batch, field)[spec.name]
            assert array.shape == (7,) + spec.shape and array.dtype == spec.dtype, (field, spec)
    assert batch.next_episode_end.shape == (7, 1) and batch.next_episode_end.dtype == np.float32
    check_rows(batch)


def test_len_counts_up_to_capacity_and_the_ring_overwrites_the_oldest() -> None:
    buffer = make_buffer(4)
    assert len(buffer) == 0
    for i in range(1, 7):
        buffer.add(transition(i))
        assert len(buffer) == min(i, 4)
    ids = check_rows(buffer.sample(500, np.random.default_rng(1)))
    assert set(ids) == {3, 4, 5, 6}  # 1 and 2 were overwritten


def test_sampling_draws_only_stored_rows_and_all_of_them() -> None:
    buffer = make_buffer(100)
    for i in range(5):
        buffer.add(transition(i))
    ids = check_rows(buffer.sample(1000, np.random.default_rng(2)))
    assert set(ids) == {0, 1, 2, 3, 4}  # the 95 empty rows are never drawn
    counts = np.bincount(ids, minlength=5)
    assert counts.min() > 150  # uniform: about 200 each


def test_sampled_batches_are_copies() -> None:
    buffer = make_buffer(3)
    buffer.add(transition(1))
    batch = buffer.sample(2, np.random.default_rng(0))
    batch.inputs["obs"][...] = 99.0
    assert check_rows(buffer.sample(2, np.random.default_rng(0))) == [1, 1]


def test_sampling_is_reproducible_with_a_seeded_rng() -> None:
    buffer = make_buffer(50)
    for i in range(50):
        buffer.add(transition(i))
    a = check_rows(buffer.sample(20, np.random.default_rng(7)))
    b = check_rows(buffer.sample(20, np.random.default_rng(7)))
    assert a == b and len(set(a)) > 1


def test_sampling_an_empty_buffer_raises() -> None:
    with pytest.raises(ValueError, match="empty replay buffer"):
        make_buffer(5).sample(1, np.random.default_rng(0))


@pytest.mark.parametrize("capacity", [0, -1, 2.5])
def test_bad_capacity_raises(capacity) -> None:
    with pytest.raises(ValueError, match="capacity"):
        make_buffer(capacity)


def test_add_returns_the_slot_and_gather_reads_those_slots_back() -> None:
    buffer = make_buffer(3)
    assert [buffer.add(transition(i)) for i in range(5)] == [0, 1, 2, 0, 1]  # a ring of 3
    assert check_rows(buffer.gather(np.array([0, 2, 1, 0]))) == [3, 2, 4, 3]
    batch = buffer.gather(np.array([1]))
    batch.inputs["obs"][...] = 99.0  # copies, as sampled batches
    assert check_rows(buffer.gather(np.array([1]))) == [4]


def test_gathering_a_slot_that_holds_nothing_raises() -> None:
    buffer = make_buffer(10)
    buffer.add(transition(0))
    with pytest.raises(ValueError, match=r"\[0, 1\).*\[0 1\]"):
        buffer.gather(np.array([0, 1]))


def test_bootstrap_steps_are_stored_per_transition_when_asked() -> None:
    buffer = parl.ReplayBuffer(5, INPUTS, STATES, ACTIONS, REWARDS, bootstrap_steps=True)
    for i in range(4):
        steps = None if i == 0 else np.array([i + 1], np.float32)
        buffer.add(transition(i)._replace(bootstrap_steps=steps))
    batch = buffer.sample(100, np.random.default_rng(0))
    ids = check_rows(batch)
    assert batch.bootstrap_steps.shape == (100, 1) and batch.bootstrap_steps.dtype == np.float32
    np.testing.assert_array_equal(batch.bootstrap_steps[:, 0], [1 if i == 0 else i + 1 for i in ids])  # default 1
    assert make_buffer(5).gather(np.array([], np.int64)).bootstrap_steps is None  # not asked: not sent


# -- helpers ------------------------------------------------------------------


def bound(helper: parl.AgentHelper) -> RecordingCommunicator:
    comm = RecordingCommunicator(EchoModel())
    helper.bind(comm)
    return comm


def store(helper: parl.AgentHelper, step: int, *, terminated: bool = False, truncated: bool = False) -> None:
    obs = np.array([step, 0], np.float32)
    helper.store_data({"obs": obs}, {"action": np.array([step])}, float(step), {"obs": obs + 1}, terminated, truncated)


def test_exp_replay_waits_for_warmup_then_learns_at_its_update_to_data_ratio() -> None:
    helper = parl.ExpReplayHelper(capacity=100, batch_size=8, warmup_steps=5, updates_per_step=1 / 3, seed=0)
    comm = bound(helper)
    learned_at = []
    for step in range(1, 15):
        store(helper, step)
        if helper.learn() is not None:
            learned_at.append(step)
    # Nothing before 5 stored steps; then at once, and after every 3 further stores.
    assert learned_at == [5, 8, 11, 14]
    assert len(comm.batches) == 4
    for batch, step in zip(comm.batches, learned_at):
        assert batch.inputs["obs"].shape == (8, 2)
        rows = batch.inputs["obs"][:, 0]
        assert set(rows) <= set(range(1, step + 1))  # only steps stored so far
        np.testing.assert_array_equal(batch.actions["action"][:, 0], rows.astype(np.int64))
        np.testing.assert_array_equal(batch.rewards["reward"][:, 0], rows)


def test_exp_replay_learn_returns_the_costs() -> None:
    helper = parl.ExpReplayHelper(batch_size=2, warmup_steps=0)
    bound(helper)
    assert helper.learn() is None  # nothing stored yet
    store(helper, 1)
    assert helper.learn() == {"loss": 0.0}
    assert helper.learn() is None  # nothing new stored since


def test_exp_replay_buffer_uses_the_capacity() -> None:
    helper = parl.ExpReplayHelper(capacity=3, batch_size=50, warmup_steps=0, seed=1)
    comm = bound(helper)
    for step in range(10):
        store(helper, step)
    helper.learn()
    assert len(helper.buffer) == 3
    assert set(comm.batches[-1].inputs["obs"][:, 0]) == {7, 8, 9}


def test_on_policy_sends_sample_interval_transitions_in_order() -> None:
    helper = parl.OnPolicyHelper(sample_interval=3)
    comm = bound(helper)
    sent_at = []
    for step in range(7):
        store(helper, step)
        if helper.learn() is not None:
            sent_at.append(step)
    assert sent_at == [2, 5]
    assert [list(b.inputs["obs"][:, 0]) for b in comm.batches] == [[0, 1, 2], [3, 4, 5]]
    for batch in comm.batches:
        np.testing.assert_array_equal(batch.next_inputs["obs"], batch.inputs["obs"] + 1)
        assert batch.actions["action"].shape == (3, 1) and batch.actions["action"].dtype == np.int64
        assert batch.rewards["reward"].shape == (3, 1)
        assert batch.next_episode_end.shape == (3, 1)
        assert batch.states == {} and batch.next_states == {}


@pytest.mark.parametrize("terminated, truncated, end", [(True, False, 1.0), (False, True, 0.0)])
def test_on_policy_flushes_at_episode_end(terminated, truncated, end) -> None:
    helper = parl.OnPolicyHelper(sample_interval=5)
    comm = bound(helper)
    store(helper, 0)
    assert helper.learn() is None
    store(helper, 1, terminated=terminated, truncated=truncated)
    assert helper.learn() is not None  # only 2 of 5, but the episode is over
    assert helper.learn() is None  # and the cache is empty now
    assert len(comm.batches) == 1
    batch = comm.batches[0]
    assert list(batch.inputs["obs"][:, 0]) == [0, 1]
    np.testing.assert_array_equal(batch.next_episode_end, [[0.0], [end]])
    # The next episode starts a fresh cache.
    for step in range(10, 15):
        store(helper, step)
    assert helper.learn() is not None
    assert list(comm.batches[1].inputs["obs"][:, 0]) == [10, 11, 12, 13, 14]


def test_helpers_must_be_bound() -> None:
    with pytest.raises(RuntimeError, match="not bound"):
        parl.OnPolicyHelper().predict({"obs": np.zeros(2)})


@pytest.mark.parametrize(
    "make",
    [
        lambda: parl.ExpReplayHelper(batch_size=0),
        lambda: parl.ExpReplayHelper(warmup_steps=-1),
        lambda: parl.OnPolicyHelper(sample_interval=0),
    ],
)
def test_bad_helper_settings_raise(make) -> None:
    with pytest.raises(ValueError, match="must be an integer"):
        make()


@pytest.mark.parametrize("ratio", [0, -1, 1e-7, 1001, float("inf"), float("nan"), True, "0.25"])
def test_an_update_to_data_ratio_out_of_range_is_refused_by_name(ratio) -> None:
    with pytest.raises(ValueError, match=r"updates_per_step must be a number in \[1e-06, 1000.0\]"):
        parl.ExpReplayHelper(updates_per_step=ratio)


@pytest.mark.parametrize("ratio", [0.1, 0.25, 1 / 3, 1.0, 2.5])
def test_exp_replay_sends_exactly_the_updates_its_ratio_earns(ratio) -> None:
    helper = parl.ExpReplayHelper(capacity=100, batch_size=2, warmup_steps=5, updates_per_step=ratio, seed=0)
    comm = bound(helper)
    for step in range(1, 41):
        store(helper, step)
        helper.learn()
        ready = max(0, step - 4)  # steps stored since the buffer held warmup_steps (the 5th is the first)
        assert len(comm.batches) == math.ceil(round(ready * ratio, 9)), (ratio, step)
    assert helper.updates_due() == 0


def test_on_policy_cache_is_not_changed_by_an_agent_reusing_its_arrays() -> None:
    helper = parl.OnPolicyHelper(sample_interval=3)
    comm = bound(helper)
    obs, action = np.zeros(2, np.float32), np.zeros(1, np.int64)
    for step in range(3):
        obs[0], action[0] = step, step  # one buffer, updated in place, as some environments do
        helper.store_data({"obs": obs}, {"action": action}, 0.0, {"obs": obs}, False, False)
    helper.learn()
    np.testing.assert_array_equal(comm.batches[0].inputs["obs"][:, 0], [0, 1, 2])
    np.testing.assert_array_equal(comm.batches[0].actions["action"][:, 0], [0, 1, 2])


def test_make_replay_buffer_takes_task_specs_and_still_a_tuple_with_a_warning() -> None:
    from parl.core.task_specs import TaskSpecs
    from parl.experience.prioritized_replay_buffer import make_replay_buffer

    lists = (specs(("obs", [2], "float32")), [], specs(("action", [1], "int64")), specs(("reward", [1], "float32")))
    settings = dict(prioritized=False, alpha=0.6, beta_start=0.4, beta_steps=10, epsilon=1e-6, bootstrap_steps=False)
    buffer = make_replay_buffer(8, TaskSpecs(*lists), **settings)
    with pytest.warns(DeprecationWarning, match="TaskSpecs"):
        old = make_replay_buffer(8, lists, **settings)
    assert type(old) is type(buffer) is parl.ReplayBuffer
    assert old.capacity == buffer.capacity == 8
