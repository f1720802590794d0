"""Several learners of one task: two learner processes, gradients summed through paddle.distributed (gloo),
end with the same weights and costs as one learner on the same batches (PPO with several epochs of
uneven minibatches; DQN with importance weights, per-row TD errors and target syncs)."""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest

import parl
from parl.algorithms import DQN
from parl.algorithms.ppo import PPO
from parl.core.batch import Transition
from parl.core.row_share import RowShare
from parl.models import MLPActorCritic, MLPQModel
from parl.runtime.learner_processes import LearnerProcesses
from parl.seeding import seed_everything
from parl.serving.learner_collective import (
    LearnerAddress,
    batch_share,
    free_endpoints,
    join_learner_group,
    learner_device,
)

OBS_DIM, ACTIONS, SEED = 4, 3, 7
SEGMENTS, SEGMENT_LENGTH = 5, 13  # 65 rows: uneven shares of the batch and of each minibatch


def make_ppo_task() -> parl.ComputationTask:
    """PPO over 3 epochs of 3 minibatches (22, 22, 21 rows), minibatch advantage normalization."""
    algorithm = PPO(
        lambda: MLPActorCritic(OBS_DIM, num_actions=ACTIONS, hidden_sizes=(16,)),
        learning_rate=3e-3,
        epochs=3,
        num_minibatches=3,
        grad_clip=0.5,
    )
    return parl.ComputationTask("ppo", algorithm)


def make_dqn_task() -> parl.ComputationTask:
    algorithm = DQN(lambda: MLPQModel(OBS_DIM, ACTIONS, hidden_sizes=(16,)), target_update_interval=2)
    return parl.ComputationTask("dqn", algorithm)


def batch(seed: int, rows: int, lengths, weights: bool) -> Transition[np.ndarray]:
    rng = np.random.default_rng(seed)
    return Transition(
        inputs={"obs": rng.standard_normal((rows, OBS_DIM)).astype(np.float32)},
        actions={"action": rng.integers(0, ACTIONS, (rows, 1)).astype(np.int64)},
        rewards={"reward": rng.standard_normal((rows, 1)).astype(np.float32)},
        next_inputs={"obs": rng.standard_normal((rows, OBS_DIM)).astype(np.float32)},
        next_episode_end=(rng.random((rows, 1)) < 0.1).astype(np.float32),
        states={},
        next_states={},
        sequence_lengths=lengths,
        weights=rng.uniform(0.2, 1.0, (rows, 1)).astype(np.float32) if weights else None,
    )


def ppo_batches() -> List[Transition[np.ndarray]]:
    rows = SEGMENTS * SEGMENT_LENGTH
    return [batch(seed, rows, (SEGMENT_LENGTH,) * SEGMENTS, weights=False) for seed in range(3)]


def dqn_batches() -> List[Transition[np.ndarray]]:
    return [batch(10 + seed, 33, None, weights=True) for seed in range(5)]


def alone(make_task, batches) -> tuple:
    seed_everything(SEED)
    task = make_task()
    return [task.learn(b) for b in batches], task.algorithm_weights()


def assert_same_weights(actual: Dict, expected: Dict) -> None:
    for model in expected:
        for key, value in expected[model].items():
            np.testing.assert_allclose(actual[model][key], value, rtol=1e-5, atol=1e-6, err_msg=f"{model}/{key}")


def assert_same_costs(actual: Dict, expected: Dict) -> None:
    assert set(actual) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(actual[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize(
    "make_task, batches",
    [(make_ppo_task, ppo_batches), (make_dqn_task, dqn_batches)],
    ids=["ppo", "dqn"],
)
def test_two_learners_equal_one(make_task, batches) -> None:
    expected_costs, expected_weights = alone(make_task, batches())
    with LearnerProcesses(make_task, count=2, seed=SEED) as learners:
        costs = [learners.learn(b) for b in batches()]
        first, second = learners.all_weights()
    assert_same_weights(first, expected_weights)
    assert_same_weights(second, first)
    for got, want in zip(costs, expected_costs):
        assert_same_costs(got, want)
    # The weights moved: the test compares updates, not initial values.
    seed_everything(SEED)
    task = make_task()
    task.build_layers()
    initial = task.algorithm_weights()["model"]
    assert initial.keys() == first["model"].keys()
    assert all(not np.allclose(first["model"][k], v) for k, v in initial.items())


def test_batch_share_keeps_whole_segments() -> None:
    b = batch(0, 10, (3, 3, 4), weights=False)
    part, first, end = batch_share(b, RowShare.of(1, 2))
    assert (first, end, part.sequence_lengths) == (6, 10, (4,))
    np.testing.assert_array_equal(part.inputs["obs"], b.inputs["obs"][6:10])
    rows, first, end = batch_share(b._replace(sequence_lengths=None), RowShare.of(0, 3))
    assert (first, end, rows.batch_size) == (0, 4, 4)


def test_shares_cover_every_row_once() -> None:
    for total in (2, 7, 64):
        for count in (1, 2, 3):
            if total < count:
                continue
            spans = [RowShare.of(rank, count).rows(total) for rank in range(count)]
            assert spans[0][0] == 0 and spans[-1][1] == total
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
            assert max(e - f for f, e in spans) - min(e - f for f, e in spans) <= 1


@pytest.mark.parametrize("rank, count", [(2, 2), (-1, 2), (0, 0), (0, True)])
def test_bad_shares_are_refused(rank, count) -> None:
    with pytest.raises(ValueError, match="learner"):
        RowShare.of(rank, count)


def test_too_few_rows_for_the_learners() -> None:
    with pytest.raises(ValueError, match="3 rows cannot be split between 4 learners"):
        RowShare.of(0, 4).rows(3)


def test_learner_device() -> None:
    assert learner_device("cpu", 2) == "cpu"
    with pytest.raises(ValueError, match="'tpu'"):
        learner_device("tpu", 1)
    import paddle

    gpus = paddle.device.cuda.device_count() if paddle.is_compiled_with_cuda() else 0
    if gpus < 64:
        with pytest.raises(ValueError, match=f"64 learners, {gpus} GPUs"):
            learner_device("gpu", 64)
        assert learner_device("auto", 64) == "cpu"


def test_a_learner_alone_learns_as_a_plain_task() -> None:
    """A group of one (no paddle group is made) splits nothing and sums nothing."""
    collective = join_learner_group(LearnerAddress(0, 1, free_endpoints(2)))
    expected_costs, expected_weights = alone(make_dqn_task, dqn_batches())
    seed_everything(SEED)
    task = make_dqn_task()
    task.join_learners(collective)
    costs = [task.learn(b) for b in dqn_batches()]
    assert_same_weights(task.algorithm_weights(), expected_weights)
    for got, want in zip(costs, expected_costs):
        assert_same_costs(got, want)


def test_join_learners_refuses_other_objects() -> None:
    with pytest.raises(ValueError, match="expected a LearnerCollective, got 3"):
        make_dqn_task().join_learners(3)
