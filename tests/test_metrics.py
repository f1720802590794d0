"""Metrics: the wrapper's counters, gradient norms, MetricsWriter's two outputs and RobotMetrics' intervals."""

from __future__ import annotations

import glob
import json
import math
import os

import numpy as np
import paddle
import pytest

import parl
from parl.experiment.train.metrics import METRICS_FILE, MetricsWriter, RobotMetrics, task_values
from parl.layers.optimizer import Adam, global_grad_norm, grad_norm_value
from parl.serving.stats import PredictionTimer, WrapperStats

from tensorboard_events import read_scalar_events
from toys import (
    LEARN_FAIL,
    WAIT,
    CountEnv,
    EchoAlgorithm,
    FakeClock,
    ReportingEchoAgent,
    echo_algorithm_func,
    echo_batch,
    echo_obs,
)

# -- WrapperStats ----------------------------------------------------------------


def test_a_prediction_timer_books_requests_and_seconds_together() -> None:
    timer = PredictionTimer()
    timer.book(1, 0.25)
    timer.book(3, 0.5)
    assert timer.total == (4, 0.75)
    stats = WrapperStats()
    stats.prediction_timer().book(2, 1.0)
    stats.add_predictions(3, 7, 4, (7, 2.0))  # answered by copies of the task elsewhere
    snapshot = stats.snapshot()
    assert (snapshot.timed_predictions, snapshot.prediction_seconds) == (9, 3.0)
    assert (snapshot.prediction_batches, snapshot.predictions, snapshot.max_prediction_batch) == (3, 7, 4)


@pytest.mark.parametrize("placement", ["threads", "cooperative", "processes"])
def test_every_placement_books_prediction_latency_through_the_timer(placement, monkeypatch) -> None:
    booked = []
    book = PredictionTimer.book
    monkeypatch.setattr(PredictionTimer, "book", lambda timer, n, seconds: booked.append(n) or book(timer, n, seconds))
    manager = parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, placement=placement)
    for i in range(3):
        manager.add_agent(ReportingEchoAgent(CountEnv(i), num_games=2), {"T": parl.OnPolicyHelper()})
    manager.start()
    assert len(manager.join(timeout=WAIT)) == 6
    manager.stop()
    snapshot = manager.wrappers["T"].stats.snapshot()
    assert sum(booked) == snapshot.timed_predictions == snapshot.predictions > 0
    assert snapshot.prediction_seconds > 0


def test_wrapper_stats_count_predictions_updates_rows_and_costs(make_wrapper) -> None:
    wrapper = make_wrapper()
    comm = wrapper.communicator(0)
    for step in range(5):
        comm.predict({"obs": echo_obs(0, step)}, None)
    replies = [comm.learn(echo_batch(0, rows=rows)) for rows in (2, 3)]
    with pytest.raises(parl.RemoteError):
        comm.learn(echo_batch(0, marker=LEARN_FAIL))
    stats = wrapper.stats.snapshot()
    assert (stats.prediction_batches, stats.predictions, stats.max_prediction_batch) == (5, 5, 1)
    assert stats.timed_predictions == 5 and 0.0 < stats.prediction_seconds < 5.0
    assert (stats.training_batches, stats.updates, stats.training_rows) == (3, 2, 5)  # the failed one tried only
    loss_sum, loss_count, nonfinite = stats.costs["loss"]
    assert loss_sum == pytest.approx(sum(r["loss"] for r in replies)) and (loss_count, nonfinite) == (2, 0)
    assert stats.costs["rows"] == (5.0, 2, 0)
    assert stats.learning_rate == pytest.approx(1e-3)  # the Algorithm default
    assert stats.grad_norm == (0.0, 0, 0)  # not tracked unless asked


def test_per_row_costs_are_not_summed_and_nonfinite_costs_are_counted_apart() -> None:
    stats = parl.ComputationWrapper(parl.ComputationTask("T", EchoAlgorithm())).stats
    stats.record_update(4, {"loss": 1.0, "td_error": np.ones(4)}, (0.0, 0, 0), 0.1)
    stats.record_update(4, {"loss": float("nan")}, (0.0, 0, 0), 0.1)
    snapshot = stats.snapshot()
    assert set(snapshot.costs) == {"loss"} and snapshot.costs["loss"] == (1.0, 2, 1)


# -- gradient norm -----------------------------------------------------------------


def _toy_gradient_norm(weights: dict, batch: parl.Transition) -> float:
    """Global norm of d/d(w, b) mean((x w + b - r)^2) for EchoModel's one fc layer, x = obs / 1000."""
    w = next(v for v in weights.values() if v.shape == (2, 1)).astype(np.float64)
    b = next(v for v in weights.values() if v.shape == (1,)).astype(np.float64)
    x = batch.inputs["obs"].astype(np.float64) * 1e-3
    error = x @ w + b - batch.rewards["reward"]
    grad_w = 2.0 * x.T @ error / len(x)
    grad_b = 2.0 * error.sum(axis=0) / len(x)
    return float(np.sqrt((grad_w**2).sum() + (grad_b**2).sum()))


@pytest.mark.parametrize("grad_clip", [None, 1e-6])
def test_task_grad_norm_is_the_norm_before_clipping(grad_clip) -> None:
    task = parl.ComputationTask("T", EchoAlgorithm(grad_clip=grad_clip))
    batch = echo_batch(3, rows=4)
    task.predict(batch.inputs, {})  # builds the layer, so its weights can be read before the update
    task.learn(batch)  # not tracked
    assert task.grad_norm_total == (0.0, 0, 0)
    task.track_grad_norm = True
    weights = task.algorithm_weights()["model"]
    task.learn(batch)
    total, steps, nonfinite = task.grad_norm_total
    assert (steps, nonfinite) == (1, 0)
    assert total == pytest.approx(_toy_gradient_norm(weights, batch), rel=1e-4)


def test_optimizer_keeps_the_norm_only_when_it_clips() -> None:
    param = paddle.create_parameter([3, 2], "float32")
    param.set_value(np.arange(6, dtype=np.float32).reshape(3, 2))
    for grad_clip in (None, 0.5):
        optimizer = Adam([param], learning_rate=0.01, grad_clip=grad_clip)
        assert optimizer.last_grad_norm is None
        before = param.numpy().astype(np.float64)
        ((param * param) + param).sum().backward()  # gradient 2p + 1
        optimizer.step()
        optimizer.clear_grad()
        if grad_clip is None:
            assert optimizer.last_grad_norm is None  # not computed
        else:
            assert optimizer.last_grad_norm == pytest.approx(np.sqrt(((2 * before + 1) ** 2).sum()), rel=1e-5)


def test_global_grad_norm_as_a_tensor_and_as_a_float() -> None:
    assert global_grad_norm([None, None]) is None and grad_norm_value([None]) is None
    grads = [paddle.to_tensor([3.0]), None, paddle.to_tensor([[4.0, 12.0]])]
    assert float(global_grad_norm(grads).numpy().reshape(-1)[0]) == pytest.approx(13.0)
    assert grad_norm_value(grads) == pytest.approx(13.0)


def test_learning_rate_follows_the_optimizer() -> None:
    task = parl.ComputationTask("T", EchoAlgorithm(learning_rate=0.01))
    assert task.learning_rate() is None  # no optimizer before the first update
    task.learn(echo_batch(0))
    assert task.learning_rate() == pytest.approx(0.01)
    task._optimizer.set_lr(0.002)
    assert task.learning_rate() == pytest.approx(0.002)


# -- MetricsWriter -------------------------------------------------------------------


def test_metrics_writer_writes_json_lines_and_tensorboard_events(tmp_path) -> None:
    log_dir = str(tmp_path / "run")
    with MetricsWriter(log_dir) as writer:
        writer.scalars(10, {"episode/reward": 12.5, "episode/length": np.int64(12)})
        writer.scalars(20, {"task/RL/loss": float("nan"), "task/RL/grad_norm": float("inf"), "x": 1})
        writer.scalars(30, {})  # nothing to write
    with open(os.path.join(log_dir, METRICS_FILE), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    assert [r["step"] for r in rows] == [10, 20]
    assert rows[0]["episode/reward"] == 12.5 and rows[0]["episode/length"] == 12.0
    assert rows[1]["task/RL/loss"] is None and rows[1]["task/RL/grad_norm"] is None and rows[1]["x"] == 1.0
    assert all(abs(r["time"] - rows[0]["time"]) < 60 and r["time"] > 1.6e9 for r in rows)
    events = read_scalar_events(log_dir)
    assert (10, "episode/reward", 12.5) in events and (20, "x", 1.0) in events
    assert any(step == 20 and tag == "task/RL/loss" and math.isnan(v) for step, tag, v in events)


def test_metrics_writer_appends_and_can_skip_tensorboard(tmp_path) -> None:
    for step in (1, 2):
        with MetricsWriter(str(tmp_path), tensorboard=False) as writer:
            writer.scalars(step, {"a": step})
    with open(tmp_path / METRICS_FILE, encoding="utf-8") as f:
        assert [json.loads(line)["a"] for line in f] == [1.0, 2.0]
    assert not glob.glob(str(tmp_path / "events.out.tfevents.*"))


def test_metrics_writer_refuses_bad_rows_and_writes_after_close(tmp_path) -> None:
    writer = MetricsWriter(str(tmp_path), tensorboard=False)
    with pytest.raises(ValueError, match="step must be an integer >= 0, got -1"):
        writer.scalars(-1, {"a": 1.0})
    with pytest.raises(ValueError, match="'time'"):
        writer.scalars(1, {"time": 1.0})
    with pytest.raises(ValueError, match="metric 'a' must be a number, got 'high'"):
        writer.scalars(1, {"a": "high"})
    writer.close()
    writer.close()  # a second close does nothing
    with pytest.raises(RuntimeError, match="closed"):
        writer.scalars(1, {"a": 1.0})
    assert (tmp_path / METRICS_FILE).read_text() == ""


# -- RobotMetrics ------------------------------------------------------------------------


def test_episode_values() -> None:
    values = RobotMetrics.episode_values({"agent_id": 0, "episode": 3, "reward": 10.0, "steps": 20, "seconds": 0.5})
    assert values == {
        "episode/reward": 10.0,
        "episode/length": 20.0,
        "episode/seconds": 0.5,
        "episode/reward_per_second": 20.0,
    }
    assert RobotMetrics.episode_values({"reward": 1.0, "seconds": 0.0}) == {
        "episode/reward": 1.0,
        "episode/seconds": 0.0,
    }


def test_robot_metrics_report_the_interval_since_the_last_collect(make_manager) -> None:
    manager = make_manager()
    clock = FakeClock(100.0)
    metrics = RobotMetrics(manager, clock=clock)
    assert manager.tasks["T"].track_grad_norm
    wrapper = manager.wrappers["T"]
    wrapper.start()
    comm = wrapper.communicator(0)
    for step in range(3):
        comm.predict({"obs": echo_obs(0, step)}, None)
    losses = [comm.learn(echo_batch(0, rows=rows))["loss"] for rows in (2, 4)]
    clock.now += 2.0
    values = metrics.collect(100)
    assert values["robot/env_steps_per_second"] == pytest.approx(50.0)
    assert values["task/T/updates_per_second"] == pytest.approx(1.0)
    assert values["task/T/updates_per_env_step"] == pytest.approx(2 / 100)  # the achieved update-to-data ratio
    assert values["task/T/loss"] == pytest.approx(np.mean(losses))
    assert values["task/T/rows"] == pytest.approx(3.0)  # a cost of EchoAlgorithm: the rows of its batch
    assert values["task/T/training_batch"] == pytest.approx(3.0)
    assert values["task/T/prediction_batch"] == 1.0
    assert 0.0 < values["task/T/prediction_latency_ms"] < 5000.0
    assert values["task/T/grad_norm"] > 0.0
    assert values["task/T/learning_rate"] == pytest.approx(1e-3)

    clock.now += 1.0  # no update, prediction or env step: rates are 0, means and the ratio are left out
    assert metrics.collect(100) == {
        "robot/env_steps_per_second": 0.0,
        "task/T/updates_per_second": 0.0,
        "task/T/learning_rate": pytest.approx(1e-3),
    }

    comm.learn(echo_batch(0, rows=6))
    clock.now += 0.5
    values = metrics.collect(150)
    assert values["robot/env_steps_per_second"] == pytest.approx(100.0)
    assert values["task/T/training_batch"] == 6.0 and values["task/T/updates_per_second"] == pytest.approx(2.0)
    assert values["task/T/updates_per_env_step"] == pytest.approx(1 / 50)
    assert "task/T/prediction_batch" not in values


def test_robot_metrics_start_from_a_resumed_step_count(make_manager) -> None:
    clock = FakeClock(100.0)
    metrics = RobotMetrics(make_manager(), start_env_steps=5000, clock=clock)
    clock.now += 2.0
    assert metrics.collect(5100)["robot/env_steps_per_second"] == pytest.approx(50.0)
    with pytest.raises(ValueError, match="start_env_steps must be an integer >= 0, got -1"):
        RobotMetrics(make_manager(), start_env_steps=-1)


def test_a_nonfinite_cost_shows_as_nan_in_its_interval_only() -> None:
    stats = parl.ComputationWrapper(parl.ComputationTask("T", EchoAlgorithm())).stats
    first = stats.snapshot()
    stats.record_update(2, {"loss": float("inf")}, (3.0, 2, 1), 0.1)
    stats.record_update(2, {"loss": 1.0}, (3.0, 2, 1), 0.1)
    second = stats.snapshot()
    stats.record_update(2, {"loss": 3.0}, (7.0, 3, 1), 0.1)
    third = stats.snapshot()
    values = task_values("T", first, second, 1.0)
    assert math.isnan(values["task/T/loss"]) and math.isnan(values["task/T/grad_norm"])
    values = task_values("T", second, third, 1.0)
    assert values["task/T/loss"] == 3.0 and values["task/T/grad_norm"] == 4.0
