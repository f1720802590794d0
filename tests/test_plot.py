"""plot_curves: learning curves from metrics.jsonl to a PNG, and its errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from parl.experiment.runs.plot import moving_average, plot_curves, read_curves
from parl.experiment.train.metrics import METRICS_FILE, MetricsWriter

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_run(log_dir, episodes: int = 30, evaluations: bool = True) -> None:
    with MetricsWriter(str(log_dir), tensorboard=False) as writer:
        for i in range(episodes):
            writer.scalars(100 * i, {"episode/reward": float(i), "episode/length": 10.0})
            if evaluations and i % 10 == 9:
                writer.scalars(100 * i, {"eval/mean_return": float(2 * i), "eval/min_return": 0.0})
            writer.scalars(100 * i + 50, {"task/RL/loss": float("nan")})


def test_two_runs_are_drawn_to_a_png(tmp_path) -> None:
    _write_run(tmp_path / "seed0")
    _write_run(tmp_path / "seed1", episodes=12, evaluations=False)
    out = tmp_path / "plots" / "curves.png"
    assert plot_curves([str(tmp_path / "seed0"), str(tmp_path / "seed1")], str(out), smooth=5) == str(out)
    data = out.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 10_000
    width, height = np.frombuffer(data[16:24], dtype=">u4")
    assert (width, height) == (900, 700)


def test_curves_are_read_sorted_with_nulls_and_a_cut_last_line_skipped(tmp_path) -> None:
    rows = [
        {"step": 20, "time": 1.0, "episode/reward": 2.0},
        {"step": 10, "time": 1.0, "episode/reward": 1.0, "eval/mean_return": None},
        {"step": 30, "time": 1.0, "eval/mean_return": 5.0},
    ]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 40, "episode/rew'
    (tmp_path / METRICS_FILE).write_text(text)
    curves = read_curves(str(tmp_path))
    np.testing.assert_array_equal(curves["episode/reward"][0], [10.0, 20.0])
    np.testing.assert_array_equal(curves["episode/reward"][1], [1.0, 2.0])
    np.testing.assert_array_equal(curves["eval/mean_return"][1], [5.0])


def test_errors_name_the_run(tmp_path) -> None:
    out = str(tmp_path / "x.png")
    with pytest.raises(ValueError, match="no metrics.jsonl"):
        plot_curves([str(tmp_path / "missing")], out)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / METRICS_FILE).write_text('{"step": 1, "time": 1.0, "eval/mean_return": 3.0}\n')
    with pytest.raises(ValueError, match="empty.*no episode/reward rows"):
        plot_curves([str(tmp_path / "empty")], out)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / METRICS_FILE).write_text('not json\n{"step": 1, "episode/reward": 1.0}\n')
    with pytest.raises(ValueError, match="line 1: not JSON"):
        plot_curves([str(tmp_path / "bad")], out)
    with pytest.raises(ValueError, match="smooth must be an integer >= 1, got 0"):
        plot_curves([str(tmp_path)], out, smooth=0)
    with pytest.raises(ValueError, match="list of run directories"):
        plot_curves(str(tmp_path), out)


def test_moving_average_uses_fewer_values_at_the_start() -> None:
    np.testing.assert_allclose(moving_average(np.array([1.0, 3.0, 5.0, 7.0]), 2), [1.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(moving_average(np.array([4.0, 2.0]), 1), [4.0, 2.0])
