"""PPO: the clipped surrogate, value clipping, advantage normalization and the minibatch schedule.

The model is linear (no hidden layer) with known weights, so every cost can be
recomputed in numpy. ``PPO.learn`` is a generator; driving it by hand (no
optimizer) and changing the weights between items shows what each step
computes against the log-probabilities, values and advantages frozen before
the first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import paddle
import pytest

import parl
from parl.algorithms.ppo import PPO
from parl.models import LSTMActorCritic, MLPActorCritic

from toys import LINEAR_WEIGHTS, columns_batch, linear_actor_critic, linear_forward

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "configs"
GAMMA, LAM, CLIP = 0.9, 0.8, 0.2
LENGTHS = [4, 3, 5]  # three segments of 12 rows
N = sum(LENGTHS)
START = LINEAR_WEIGHTS
# Far enough from START that some ratios leave [1 - CLIP, 1 + CLIP] on both sides.
MOVED = {
    "logits.w": np.array([[1.5, -1.0], [-0.8, 1.2]], np.float32),
    "logits.b": np.array([0.4, -0.3], np.float32),
    "critic.w": np.array([[0.9], [-0.1]], np.float32),
    "critic.b": np.array([-0.1], np.float32),
}


def make_batch(seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ends = np.zeros((N, 1), np.float32)
    ends[LENGTHS[0] - 1] = 1.0  # the first segment terminates; the others are cut (bootstrap)
    return {
        "obs": rng.standard_normal((N, 2)).astype(np.float32),
        "next_obs": rng.standard_normal((N, 2)).astype(np.float32),
        "action": rng.integers(0, 2, (N, 1)).astype(np.int64),
        "reward": rng.standard_normal((N, 1)).astype(np.float32),
        "end": ends,
    }


# -- numpy reference ----------------------------------------------------------------------


def gae(r, v, nv, end, lengths: Sequence[int]) -> np.ndarray:
    """Row-by-row GAE(LAM), restarting at each segment."""
    adv, start = np.zeros(len(r)), 0
    for n in lengths:
        running = 0.0
        for t in reversed(range(start, start + n)):
            delta = r[t] + GAMMA * (1.0 - end[t]) * nv[t] - v[t]
            running = delta + (GAMMA * LAM * (1.0 - end[t]) * running if t < start + n - 1 else 0.0)
            adv[t] = running
        start += n
    return adv


def expected_costs(batch, old, new, *, normalize: bool, value_clip=None, clip: float = CLIP) -> Dict[str, float]:
    """Costs of one step on the whole batch: frozen quantities from ``old``, the step's from ``new``."""
    old_logp, old_v = linear_forward(old, batch["obs"])
    _, next_v = linear_forward(old, batch["next_obs"])
    a = batch["action"]
    adv = gae(batch["reward"][:, 0], old_v[:, 0], next_v[:, 0], batch["end"][:, 0], LENGTHS)
    returns = adv + old_v[:, 0]
    if normalize:
        adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
    logp, v = linear_forward(new, batch["obs"])
    log_ratio = np.take_along_axis(logp, a, 1)[:, 0] - np.take_along_axis(old_logp, a, 1)[:, 0]
    ratio = np.exp(log_ratio)
    policy_loss = -np.mean(np.minimum(ratio * adv, np.clip(ratio, 1 - clip, 1 + clip) * adv))
    error = (v[:, 0] - returns) ** 2
    if value_clip is not None:
        clipped = old_v[:, 0] + np.clip(v[:, 0] - old_v[:, 0], -value_clip, value_clip)
        error = np.maximum(error, (clipped - returns) ** 2)
    entropy = -np.mean((np.exp(logp) * logp).sum(axis=1))
    return {
        "policy_loss": policy_loss,
        "value_loss": error.mean(),
        "entropy": entropy,
        "loss": policy_loss + 0.5 * error.mean(),
        "approx_kl": np.mean(ratio - 1.0 - log_ratio),
        "clip_fraction": np.mean(np.abs(ratio - 1.0) > clip),
    }


# -- driving PPO.learn by hand ----------------------------------------------------------------


def make_ppo(**kwargs) -> PPO:
    options = dict(gamma=GAMMA, gae_lambda=LAM, clip_range=CLIP, epochs=2, num_minibatches=1)
    ppo = PPO(linear_actor_critic, **{**options, **kwargs})
    ppo.model.step({"obs": paddle.zeros([1, 2])}, {})  # builds the layers
    ppo.model.set_weights(START)
    return ppo


def learn_steps(ppo: PPO, batch, lengths: Sequence[int] = LENGTHS, states=None):
    transitions = columns_batch(batch, states=states, next_states=states, sequence_lengths=lengths)
    return ppo.learn(transitions.to_tensors())


def as_floats(costs: Dict[str, paddle.Tensor]) -> Dict[str, float]:
    return {k: float(v) for k, v in costs.items()}


def assert_costs(got: Dict[str, float], expected: Dict[str, float]) -> None:
    assert sorted(got) == sorted(expected)
    for name in expected:
        assert got[name] == pytest.approx(expected[name], rel=1e-4, abs=1e-5), name


def test_the_moved_weights_clip_ratios_on_both_sides() -> None:
    """Guards the test data: after the move, ratios leave the clip range above and below."""
    batch = make_batch()
    old_logp, _ = linear_forward(START, batch["obs"])
    new_logp, _ = linear_forward(MOVED, batch["obs"])
    a = batch["action"]
    ratio = np.exp(np.take_along_axis(new_logp, a, 1) - np.take_along_axis(old_logp, a, 1))
    assert (ratio > 1 + CLIP).any() and (ratio < 1 - CLIP).any() and (np.abs(ratio - 1) <= CLIP).any()


@pytest.mark.parametrize("normalization", ["minibatch", "batch", "none"])
def test_first_step_matches_numpy_with_ratio_one(normalization: str) -> None:
    batch = make_batch()
    steps = learn_steps(make_ppo(advantage_normalization=normalization), batch)
    costs = as_floats(next(steps))
    assert_costs(costs, expected_costs(batch, START, START, normalize=normalization != "none"))
    assert costs["approx_kl"] == pytest.approx(0.0, abs=1e-7)
    assert costs["clip_fraction"] == 0.0


def test_later_steps_clip_the_ratio_against_the_frozen_old_policy() -> None:
    batch = make_batch()
    ppo = make_ppo()
    steps = learn_steps(ppo, batch)
    next(steps)
    ppo.model.set_weights(MOVED)  # as if the optimizer had moved the policy
    costs = as_floats(next(steps))
    assert_costs(costs, expected_costs(batch, START, MOVED, normalize=True))
    assert 0.0 < costs["clip_fraction"] < 1.0


def test_the_clip_changes_the_policy_loss_on_this_data() -> None:
    """Guards the test above: the unclipped surrogate -mean(r A) differs from the clipped one."""
    batch = make_batch()
    clipped = expected_costs(batch, START, MOVED, normalize=True)["policy_loss"]
    unclipped = expected_costs(batch, START, MOVED, normalize=True, clip=1e9)["policy_loss"]
    assert abs(clipped - unclipped) > 1e-2


def positive_advantage_batch() -> Dict[str, np.ndarray]:
    """Every row takes action 0 and has a positive advantage (large rewards, no episode end)."""
    batch = make_batch()
    batch["action"][:] = 0
    batch["reward"][:] = 5.0
    batch["end"][:] = 0.0
    _, old_v = linear_forward(START, batch["obs"])
    _, next_v = linear_forward(START, batch["next_obs"])
    assert (gae(batch["reward"][:, 0], old_v[:, 0], next_v[:, 0], batch["end"][:, 0], LENGTHS) > 0).all()
    return batch


@pytest.mark.parametrize("bias, live", [([2.0, -2.0], False), ([-2.0, 2.0], True)], ids=["r>1+eps", "r<1-eps"])
def test_gradient_flows_only_where_the_ratio_is_not_clipped_in_the_advantages_direction(bias, live) -> None:
    """With A > 0, min(r A, clip(r) A) is flat in r above 1 + eps and not below 1 - eps."""
    batch = positive_advantage_batch()
    ppo = make_ppo(value_coef=0.0, advantage_normalization="none")
    steps = learn_steps(ppo, batch)
    next(steps)
    ppo.model.set_weights({**START, "logits.b": np.array(bias, np.float32)})
    costs = next(steps)
    assert float(costs["clip_fraction"]) == 1.0
    costs["loss"].backward()
    grad = ppo.model.logits.params["w"].grad
    norm = 0.0 if grad is None else float(paddle.abs(grad).sum())
    if live:
        assert norm > 1e-2, norm
    else:
        assert norm == 0.0, norm


def test_value_clipping_takes_the_larger_error_of_the_clipped_value() -> None:
    batch = make_batch()
    ppo = make_ppo(value_clip=0.1)
    steps = learn_steps(ppo, batch)
    next(steps)
    ppo.model.set_weights(MOVED)
    costs = as_floats(next(steps))
    clipped = expected_costs(batch, START, MOVED, normalize=True, value_clip=0.1)
    plain = expected_costs(batch, START, MOVED, normalize=True)
    assert_costs(costs, clipped)
    assert clipped["value_loss"] > plain["value_loss"] + 1e-3  # the clip bites on this data


@pytest.mark.parametrize("normalization", ["minibatch", "batch", "none"])
def test_advantage_normalization_scope(normalization: str) -> None:
    """At ratio 1 a step's policy loss is minus the mean advantage of its minibatch.

    Per minibatch: every minibatch's normalized advantages average to 0. Per batch:
    the minibatches (of equal size here) average to 0 only together. None: the raw
    GAE advantages.
    """
    batch = make_batch()
    paddle.seed(0)
    ppo = make_ppo(num_minibatches=3, epochs=2, advantage_normalization=normalization)
    losses = [float(c["policy_loss"]) for c in learn_steps(ppo, batch)]
    assert len(losses) == 6
    old_logp, old_v = linear_forward(START, batch["obs"])
    _, next_v = linear_forward(START, batch["next_obs"])
    adv = gae(batch["reward"][:, 0], old_v[:, 0], next_v[:, 0], batch["end"][:, 0], LENGTHS)
    for epoch in (losses[:3], losses[3:]):
        if normalization == "minibatch":
            assert epoch == pytest.approx([0.0, 0.0, 0.0], abs=1e-6)
        elif normalization == "batch":
            assert max(abs(x) for x in epoch) > 1e-3
            assert np.mean(epoch) == pytest.approx(0.0, abs=1e-6)
        else:
            assert np.mean(epoch) == pytest.approx(-adv.mean(), rel=1e-5)


# -- the minibatch schedule -------------------------------------------------------------------------


class SequenceSpy:
    """Records the rows (by obs[:, 0]) and segment lengths of every ``model.sequence`` call."""

    def __init__(self, model) -> None:
        self.calls: List[tuple] = []
        original = model.sequence

        def sequence(inputs, states, lengths):
            self.calls.append((inputs["obs"].numpy()[:, 0].astype(int).tolist(), tuple(lengths)))
            return original(inputs, states, lengths)

        model.sequence = sequence


def indexed_batch() -> Dict[str, np.ndarray]:
    batch = make_batch()
    batch["obs"][:, 0] = np.arange(N)  # each row names itself
    return batch


@pytest.mark.parametrize("epochs, num_minibatches, steps", [(1, 1, 1), (3, 1, 3), (2, 4, 8), (3, 5, 15), (2, 50, 24)])
def test_optimizer_steps_per_batch_are_epochs_times_minibatches(epochs, num_minibatches, steps) -> None:
    """Through the task: one optimizer step per minibatch; a batch of 12 rows gives at most 12 minibatches."""
    parl.seed_everything(0)
    func = parl.create_algorithm_func(
        MLPActorCritic,
        dict(obs_dim=2, num_actions=2, hidden_sizes=(8,)),
        PPO,
        dict(epochs=epochs, num_minibatches=num_minibatches),
    )
    task = parl.ComputationTask("RL", func())
    spy = SequenceSpy(task.algorithm.model)
    batch = indexed_batch()
    task.learn(columns_batch(batch, sequence_lengths=LENGTHS))
    assert task.update_steps == steps
    # One pass without gradient first (old log-probs, values), then one call per step.
    assert len(spy.calls) == 1 + steps
    assert spy.calls[0][0] == list(range(N))
    per_epoch = steps // epochs
    for epoch in range(epochs):
        calls = spy.calls[1 + epoch * per_epoch : 1 + (epoch + 1) * per_epoch]
        rows = sorted(r for rows, _ in calls for r in rows)
        assert rows == list(range(N)), "each pass covers every row exactly once"
        sizes = [len(r) for r, _ in calls]
        assert max(sizes) - min(sizes) <= 1


def test_minibatches_are_shuffled_reproducibly() -> None:
    def orders(seed: int) -> List[List[int]]:
        ppo = make_ppo(num_minibatches=3, epochs=2)
        spy = SequenceSpy(ppo.model)
        paddle.seed(seed)
        list(learn_steps(ppo, indexed_batch()))
        return [rows for rows, _ in spy.calls[1:]]

    first = orders(3)
    assert first == orders(3)
    assert first != orders(4)
    assert first[:3] != first[3:]  # each epoch shuffles anew


def test_recurrent_minibatches_keep_whole_segments_in_time_order() -> None:
    ppo = PPO(
        lambda: LSTMActorCritic(obs_dim=2, num_actions=2, hidden_size=4),
        epochs=2,
        num_minibatches=2,
        gamma=GAMMA,
        gae_lambda=LAM,
    )
    spy = SequenceSpy(ppo.model)
    states = {name: np.zeros((N, 4), np.float32) for name in ("h", "c")}
    paddle.seed(0)
    steps = list(learn_steps(ppo, indexed_batch(), states=states))
    assert len(steps) == 4
    segments = [list(range(s, s + n)) for s, n in zip(np.cumsum([0] + LENGTHS[:-1]), LENGTHS)]
    for epoch in (spy.calls[1:3], spy.calls[3:5]):
        seen = []
        for rows, lengths in epoch:
            start = 0
            for n in lengths:
                assert rows[start : start + n] in segments
                seen.append(rows[start : start + n])
                start += n
        assert sorted(seen) == segments


def test_recurrent_batches_with_fewer_segments_than_minibatches_use_one_per_segment() -> None:
    ppo = PPO(lambda: LSTMActorCritic(obs_dim=2, num_actions=2, hidden_size=4), epochs=1, num_minibatches=8)
    states = {name: np.zeros((N, 4), np.float32) for name in ("h", "c")}
    assert len(list(learn_steps(ppo, indexed_batch(), states=states))) == len(LENGTHS)


# -- continuous actions and settings --------------------------------------------------------------


def test_continuous_actions_learn_with_a_gaussian_policy() -> None:
    parl.seed_everything(0)
    func = parl.create_algorithm_func(
        MLPActorCritic, dict(obs_dim=3, action_dim=2, hidden_sizes=(8,)), PPO, dict(epochs=2, num_minibatches=2)
    )
    task = parl.ComputationTask("RL", func())
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((10, 3)).astype(np.float32)
    actions, _ = task.predict({"obs": obs}, {})
    assert actions["action"].shape == (10, 2) and actions["action"].dtype == np.float32
    mean, _ = task.predict({"obs": obs}, {}, deterministic=True)
    np.testing.assert_array_equal(mean["action"], task.predict({"obs": obs}, {}, deterministic=True)[0]["action"])
    before = task.algorithm_weights()["model"]
    costs = task.learn(
        parl.Transition(
            inputs={"obs": obs},
            next_inputs={"obs": rng.standard_normal((10, 3)).astype(np.float32)},
            states={},
            next_states={},
            actions=actions,
            rewards={"reward": rng.standard_normal((10, 1)).astype(np.float32)},
            next_episode_end=np.zeros((10, 1), np.float32),
            sequence_lengths=(6, 4),
        )
    )
    assert task.update_steps == 4
    assert sorted(costs) == ["approx_kl", "clip_fraction", "entropy", "loss", "policy_loss", "value_loss"]
    assert all(np.isfinite(v) for v in costs.values())
    after = task.algorithm_weights()["model"]
    assert any(not np.array_equal(before[k], after[k]) for k in before)


def test_entropy_bonus_enters_the_loss() -> None:
    batch = make_batch()
    plain = as_floats(next(learn_steps(make_ppo(), batch)))
    bonus = as_floats(next(learn_steps(make_ppo(entropy_coef=0.1), batch)))
    assert bonus["loss"] == pytest.approx(plain["loss"] - 0.1 * plain["entropy"], rel=1e-5)


@pytest.mark.parametrize(
    "option, value",
    [
        ("clip_range", 0.0),
        ("gae_lambda", 1.5),
        ("value_clip", -0.1),
        ("value_coef", -1.0),
        ("entropy_coef", -0.01),
        ("epochs", 0),
        ("num_minibatches", 0),
        ("advantage_normalization", "per_row"),
        ("grad_clip", 0.0),
    ],
)
def test_bad_settings_raise_value_error_naming_them(option: str, value: object) -> None:
    with pytest.raises(ValueError) as info:
        make_ppo(**{option: value})
    assert option in str(info.value) and repr(value) in str(info.value), str(info.value)


def test_ppo_needs_an_actor_critic_model() -> None:
    from parl.models import MLPQModel

    with pytest.raises(ValueError, match="ActorCriticModel"):
        PPO(lambda: MLPQModel(obs_dim=2, num_actions=2))


# -- minibatches by size, and annealing (rl-zoo's batch_size and lin_ schedules) ----------------------


@pytest.mark.parametrize("epochs, size, steps", [(1, 5, 3), (2, 4, 6), (2, 12, 2), (1, 64, 1), (1, 1, 12)])
def test_minibatch_size_gives_minibatches_of_at_most_that_many_rows(epochs, size, steps) -> None:
    """12 rows in minibatches of ``size``: ceil(12 / size) nearly equal minibatches per pass."""
    ppo = make_ppo(epochs=epochs, num_minibatches=None, minibatch_size=size)
    spy = SequenceSpy(ppo.model)
    paddle.seed(0)
    assert len(list(learn_steps(ppo, indexed_batch()))) == steps
    sizes = [len(rows) for rows, _ in spy.calls[1:]]
    assert max(sizes) <= size and max(sizes) - min(sizes) <= 1 and sum(sizes) == epochs * N


def test_recurrent_minibatches_by_size_are_at_most_one_per_segment() -> None:
    ppo = PPO(lambda: LSTMActorCritic(obs_dim=2, num_actions=2, hidden_size=4), epochs=1, minibatch_size=2)
    states = {name: np.zeros((N, 4), np.float32) for name in ("h", "c")}
    assert len(list(learn_steps(ppo, indexed_batch(), states=states))) == len(LENGTHS)


def test_num_minibatches_and_minibatch_size_together_are_one_line_naming_both() -> None:
    with pytest.raises(ValueError) as info:
        make_ppo(num_minibatches=4, minibatch_size=64)
    message = str(info.value)
    assert "\n" not in message and "num_minibatches=4" in message and "minibatch_size=64" in message
    assert make_ppo(num_minibatches=None).num_minibatches == 32  # neither: 32 minibatches, as before


def test_a_config_with_both_names_the_key_in_one_line() -> None:
    from parl.experiment.config.robot_config import ConfigError, load_config

    with pytest.raises(ConfigError) as info:
        load_config(str(CONFIGS / "ppo_cartpole.yaml"), ["tasks.RL.algorithm.minibatch_size=64"])
    message = str(info.value)
    assert message.startswith("tasks.RL.algorithm") and "minibatch_size=64" in message and "\n" not in message


def test_the_clip_range_anneals_linearly_with_the_rows_learned() -> None:
    """With schedule_steps = 2 batches, the second batch clips at half the range."""
    batch = make_batch()
    ppo = make_ppo(clip_range_schedule="linear", schedule_steps=2 * N)
    list(learn_steps(ppo, batch))  # by hand, no optimizer: the weights stay at START
    assert ppo.learned_rows == N and ppo.current_clip_range() == pytest.approx(CLIP / 2)
    steps = learn_steps(ppo, batch)
    next(steps)
    ppo.model.set_weights(MOVED)
    assert_costs(as_floats(next(steps)), expected_costs(batch, START, MOVED, normalize=True, clip=CLIP / 2))
    assert ppo.learned_rows == 2 * N and ppo.current_clip_range() == 0.0


def annealed_task(schedule_steps: int) -> parl.ComputationTask:
    parl.seed_everything(0)
    func = parl.create_algorithm_func(
        MLPActorCritic,
        dict(obs_dim=2, num_actions=2, hidden_sizes=(8,)),
        PPO,
        dict(
            epochs=2,
            minibatch_size=6,
            learning_rate=1e-3,
            learning_rate_schedule="linear",
            schedule_steps=schedule_steps,
        ),
    )
    return parl.ComputationTask("RL", func())


def test_the_learning_rate_anneals_to_zero_and_then_leaves_the_weights() -> None:
    task = annealed_task(schedule_steps=4 * N)
    batch = columns_batch(indexed_batch(), sequence_lengths=LENGTHS)
    rates = []
    for _ in range(4):
        task.learn(batch)
        rates.append(task.learning_rate())
    assert rates == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3])  # each batch at the rate before its rows
    before = task.algorithm_weights()["model"]
    task.learn(batch)  # all 4 * N rows learned: rate 0
    assert task.learning_rate() == 0.0
    after = task.algorithm_weights()["model"]
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_a_resumed_task_goes_on_annealing_where_it_stopped(tmp_path) -> None:
    task = annealed_task(schedule_steps=4 * N)
    batch = columns_batch(indexed_batch(), sequence_lengths=LENGTHS)
    task.learn(batch)
    task.save(str(tmp_path / "RL.json"))
    restored = annealed_task(schedule_steps=4 * N)
    restored.load(str(tmp_path / "RL.json"))
    assert restored.algorithm.learned_rows == N and restored.algorithm.state() == {"learned_rows": N}
    restored.learn(batch)
    assert restored.learning_rate() == pytest.approx(0.75e-3)  # not the 1e-3 saved with the optimizer


def test_ppo_state_refuses_unknown_entries_and_takes_an_empty_one() -> None:
    ppo = make_ppo()
    ppo.set_state({})
    assert ppo.learned_rows == 0
    with pytest.raises(ValueError, match="unknown state entries \\['steps'\\]"):
        ppo.set_state({"steps": 3})
    with pytest.raises(ValueError, match="learned_rows"):
        ppo.set_state({"learned_rows": -1})


@pytest.mark.parametrize(
    "option, value",
    [
        ("minibatch_size", 0),
        ("learning_rate_schedule", "cosine"),
        ("clip_range_schedule", "step"),
        ("schedule_steps", 0),
    ],
)
def test_bad_schedule_settings_raise_value_error_naming_them(option: str, value: object) -> None:
    settings = {"num_minibatches": None} if option == "minibatch_size" else {}
    with pytest.raises(ValueError) as info:
        make_ppo(**{**settings, "schedule_steps": 100, option: value})
    assert option in str(info.value) and repr(value) in str(info.value), str(info.value)


def test_a_linear_schedule_needs_schedule_steps() -> None:
    with pytest.raises(ValueError, match="schedule_steps: a linear schedule needs"):
        make_ppo(learning_rate_schedule="linear")
