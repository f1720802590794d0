"""Distributed replay carries two-input transitions (a uint8 ``image`` and a float32 ``vec``): what a
ShardWriter gathers reaches its shard whole, and every sampled row holds one stored transition's
image, vector, action and next inputs together, for uniform and prioritized shards. No Ray cluster:
the shard is called in-process, as Ray would call the actor."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, Tuple

import numpy as np
import pytest
from dict_obs import IMAGE_SHAPE, TwoInputQModel, dict_obs

import parl
from parl.algorithms import DQN
from parl.experience.helpers import ExpReplayHelper
from parl.runtime.ray.replay import Allowance, ReplaySettings, ReplayShard, ShardWriter
from parl.serving.computation_task import ComputationTask

ROWS = 20


class InProcessShard:
    """A shard actor's handle whose ``add.remote`` runs the shard's ``add`` here."""

    def __init__(self, shard: ReplayShard) -> None:
        self.add = SimpleNamespace(remote=shard.add)


def transition(index: int) -> parl.Transition:
    """Transition ``index``: its image filled with ``index``, its vector and action tagged by it."""
    obs = dict_obs(np.random.default_rng(index))
    obs["image"][...] = index
    nxt = {"image": np.full(IMAGE_SHAPE, index + 100, np.uint8), "vec": obs["vec"] + 1}
    return parl.Transition(
        inputs=obs,
        actions={"action": np.array([index % 3], np.int64)},
        rewards={"reward": np.array([float(index)], np.float32)},
        next_inputs=nxt,
        next_episode_end=np.zeros(1, np.float32),
        states={},
        next_states={},
    )


def shard_of(prioritized: bool) -> ReplayShard:
    specs = ComputationTask("RL", DQN(lambda: TwoInputQModel()), normalize_inputs=False).specs
    helper = ExpReplayHelper(capacity=64, batch_size=8, warmup_steps=4, prioritized=prioritized)
    return ReplayShard(specs, ReplaySettings.from_helpers("RL", [helper], shards=1), seed=0)


@pytest.mark.parametrize("prioritized", [False, True])
def test_shards_carry_two_input_transitions_whole(prioritized: bool) -> None:
    shard = shard_of(prioritized)
    writer = ShardWriter("RL", [InProcessShard(shard)], first=0, allowance=Allowance({"RL": 1000}))
    stored: Dict[int, Tuple[Any, ...]] = {}
    for index in range(ROWS):
        row = transition(index)
        stored[index] = (row.inputs["vec"].copy(), int(row.actions["action"][0]))
        writer.add(row)
    writer.flush()
    assert shard.added == ROWS and len(shard.buffer) == ROWS
    batches, size, _ = shard.sample(8, 3)
    assert size == ROWS and len(batches) == 3
    for batch, slots in batches:
        assert (slots is not None) == prioritized
        image, vec = batch.inputs["image"], batch.inputs["vec"]
        assert image.dtype == np.uint8 and image.shape == (8,) + IMAGE_SHAPE
        assert vec.dtype == np.float32 and vec.shape == (8, 3)
        for row in range(8):
            index = int(image[row].flat[0])
            assert (image[row] == index).all()  # one transition's image, not a mix
            expected_vec, expected_action = stored[index]
            np.testing.assert_array_equal(vec[row], expected_vec)
            assert int(batch.actions["action"][row, 0]) == expected_action
            assert float(batch.rewards["reward"][row, 0]) == float(index)
            assert (batch.next_inputs["image"][row] == index + 100).all()
            np.testing.assert_allclose(batch.next_inputs["vec"][row], expected_vec + 1)
