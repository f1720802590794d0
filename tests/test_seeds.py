"""Multi-seed experiments: --seeds parsing, the interquartile mean and bootstrap intervals, the aggregate of
seed runs, the band plot, and `parl train CONFIG --seeds` end to end on a tiny robot."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Sequence

import numpy as np
import pytest
import yaml
from test_cli import write_config

from parl.experiment.cli.commands import main
from parl.experiment.runs import seed_runs
from parl.experiment.runs.aggregate import AGGREGATE_FILE, aggregate_runs, summary_table, write_aggregate
from parl.experiment.runs.plot import evaluation_kinds, mean_band, plot_curves, read_experiment
from parl.experiment.runs.seed_runs import parse_seeds, seed_command
from parl.experiment.runs.statistics import bootstrap_interval, interquartile_mean, mean
from parl.experiment.train.metrics import MetricsWriter
from parl.testing.watching import running


@pytest.mark.parametrize(
    "text, seeds", [("0-4", [0, 1, 2, 3, 4]), ("0,3,7", [0, 3, 7]), ("2-3, 10", [2, 3, 10]), ("5", [5])]
)
def test_seeds_are_ranges_and_lists(text: str, seeds) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    "text, message",
    [("a-b", "'a-b'"), ("3-1", "'3-1' ends before it starts"), ("0,0", "seed 0 is named twice"), ("-2", "'-2'")],
)
def test_bad_seeds_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_seeds(text)


def test_a_seed_run_is_parl_train_with_its_seed_and_directory_last() -> None:
    command = seed_command("c.yaml", ["train.max_env_steps=10"], 3, "runs/x", resume=True, quiet=True)
    assert command[1:4] == ["-m", "parl", "train"]
    assert command[4:] == [
        "c.yaml", "-o", "train.max_env_steps=10", "-o", "seed=3", "-o", "log_dir=runs/x/seed_3", "--resume", "--quiet"
    ]  # fmt: skip


def test_the_interquartile_mean_cuts_a_quarter_of_the_runs_from_each_end() -> None:
    assert interquartile_mean(np.array([480.0, 500.0, 500.0, 120.0, 500.0])) == pytest.approx(1480.0 / 3)
    assert interquartile_mean(np.arange(8.0)) == pytest.approx(3.5)  # 2..5
    assert interquartile_mean(np.array([1.0, 9.0, 5.0])) == pytest.approx(5.0)  # n < 4: nothing cut


def test_bootstrap_intervals_hold_the_statistic_and_narrow_with_more_runs() -> None:
    rng = np.random.default_rng(0)
    few, many = rng.normal(10.0, 2.0, 5), rng.normal(10.0, 2.0, 100)
    for values in (few, many):
        low, high = bootstrap_interval(values, mean)
        assert low <= values.mean() <= high
    assert np.ptp(bootstrap_interval(many, mean)) < np.ptp(bootstrap_interval(few, mean))
    assert bootstrap_interval(np.array([3.0]), interquartile_mean) == (3.0, 3.0)
    assert bootstrap_interval(few, mean) == bootstrap_interval(few, mean)  # seeded: repeatable
    rows_low, rows_high = bootstrap_interval(np.stack([few, few + 100.0]), mean)  # one interval per row
    assert rows_high[1] - rows_low[1] == pytest.approx(rows_high[0] - rows_low[0])
    with pytest.raises(ValueError, match="at least one run"):
        bootstrap_interval(np.array([]), mean)


def _result(seed: int, final: float, best: float, reached: bool = True) -> dict:
    return {
        "seed": seed, "env_steps": 1000 * (seed + 1), "episodes": 10, "train_seconds": 1.0, "updates": {"RL": 5},
        "stop_reason": "target return" if reached else "step budget", "reached": reached, "last_eval": best,
        "best_eval": best, "final_eval": final, "checkpoint": None,
    }  # fmt: skip


def _write_seed_run(directory: Path, seed: int, final: float, best: float, eval_episodes=(1, 10, 60)) -> None:
    run = directory / f"seed_{seed}"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps(_result(seed, final, best, reached=final >= 400)))
    (run / "config.yaml").write_text(
        yaml.safe_dump({"train": {"target_return": 475.0}, "evaluation": {"episodes": 10}})
    )
    with MetricsWriter(str(run), tensorboard=False) as writer:
        for i in range(40 + 10 * seed):
            writer.scalars(50 * i, {"episode/reward": float(i + seed)})
        for i, episodes in enumerate(eval_episodes):
            writer.scalars(600 * (i + 1), {"eval/mean_return": 100.0 * (i + 1), "eval/episodes": float(episodes)})


def test_the_aggregate_gives_each_seed_and_mean_and_iqm_with_intervals(tmp_path) -> None:
    for seed, final in enumerate([500.0, 480.0, 120.0, 500.0, 490.0]):
        _write_seed_run(tmp_path, seed, final, best=final + 5.0)
    nan_run = tmp_path / "seed_5"  # no evaluation ran: NaN figures are left out
    nan_run.mkdir()
    (nan_run / "result.json").write_text(json.dumps(_result(5, float("nan"), float("nan"), reached=False)))
    summary = aggregate_runs(str(tmp_path), [0, 1, 2, 3, 4, 5, 9])
    assert [run["seed"] for run in summary["runs"]] == [0, 1, 2, 3, 4, 5] and summary["missing"] == [9]
    final = summary["final_return"]
    assert final["n"] == 5 and final["mean"] == pytest.approx(418.0)
    assert final["iqm"] == pytest.approx((480.0 + 490.0 + 500.0) / 3)
    assert final["mean_ci"][0] < final["mean"] < final["mean_ci"][1]
    assert final["iqm_ci"][0] <= final["iqm"] <= final["iqm_ci"][1] and (final["min"], final["max"]) == (120.0, 500.0)
    assert summary["best_return"]["mean"] == pytest.approx(423.0) and summary["reached"] == 4
    path = write_aggregate(str(tmp_path), summary)
    assert json.loads(Path(path).read_text())["runs"][5]["final_eval"] is None  # NaN as null
    table = summary_table(summary)
    assert "target reached: 4/6 seeds" in table and "no result" in table
    assert (
        "final return: mean 418.0 [" in table and "IQM 490.0 [" in table and "95% bootstrap intervals over 5" in table
    )
    assert aggregate_runs(str(tmp_path))["seeds"] == [0, 1, 2, 3, 4, 5]  # every seed_<n> found
    with pytest.raises(ValueError, match="no seed_<n> run directories"):
        aggregate_runs(str(tmp_path / "seed_0"))


def test_evaluation_kinds_come_from_the_episodes_each_played() -> None:
    kinds = evaluation_kinds(np.array([1.0, 10.0, 60.0, 1.0]), 10)
    assert list(kinds) == ["check", "full", "confirmed", "check"]
    assert list(evaluation_kinds(np.array([1.0, 6.0]), 1)) == ["full", "confirmed"]  # 1-episode evaluations
    assert list(evaluation_kinds(np.array([1.0, 7.0]), None)) == ["check", "full"]


def test_the_band_counts_only_the_seeds_whose_run_reached_each_step() -> None:
    short = (np.array([0.0, 100.0]), np.array([0.0, 10.0]))
    long = (np.array([0.0, 200.0]), np.array([10.0, 30.0]))
    grid, center, low, high, count = mean_band([short, long])
    assert grid[0] == 0.0 and grid[-1] == 200.0
    assert center[0] == pytest.approx(5.0) and (low[0], high[0]) == (0.0, 10.0)
    assert count[0] == 2 and count[-1] == 1 and center[-1] == pytest.approx(30.0) and low[-1] == high[-1] == 30.0


def test_a_multi_seed_directory_is_drawn_as_one_experiment_with_target_and_kinds(tmp_path) -> None:
    for seed in range(3):
        _write_seed_run(tmp_path / "exp", seed, 480.0, 490.0)
    experiment = read_experiment(str(tmp_path / "exp"))
    assert experiment.label == "exp" and len(experiment.runs) == 3 and experiment.target == 475.0
    assert experiment.runs[0].eval_episodes == 10
    np.testing.assert_array_equal(experiment.runs[0].curves["eval/episodes"][1], [1.0, 10.0, 60.0])
    single = read_experiment(str(tmp_path / "exp" / "seed_1"))
    assert len(single.runs) == 1
    out = tmp_path / "band.png"
    plot_curves([str(tmp_path / "exp"), str(tmp_path / "exp" / "seed_1")], str(out))
    assert out.read_bytes().startswith(b"\x89PNG") and out.stat().st_size > 10_000


def test_parl_train_with_seeds_writes_a_run_per_seed_and_the_aggregate(tmp_path, capsys) -> None:
    config = write_config(
        tmp_path, {"train": {"max_env_steps": 400}, "evaluation": {"every_steps": 200, "episodes": 1}}
    )
    assert main(["train", str(config), "--seeds", "0,2", "--jobs", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    log_dir = tmp_path / "runs" / "small"
    for seed in (0, 2):
        result = json.loads((log_dir / f"seed_{seed}" / "result.json").read_text())
        assert result["seed"] == seed and result["stop_reason"] == "step budget"
        assert yaml.safe_load((log_dir / f"seed_{seed}" / "config.yaml").read_text())["seed"] == seed
    summary = json.loads((log_dir / AGGREGATE_FILE).read_text())
    assert summary["seeds"] == [0, 2] and summary["missing"] == [] and summary["final_return"]["n"] == 2
    assert math.isfinite(summary["final_return"]["iqm"])
    assert "final return: mean" in out and f"aggregate: {log_dir / AGGREGATE_FILE}" in out


def test_seeds_with_a_seed_override_or_jobs_alone_are_one_line(tmp_path, capsys) -> None:
    config = write_config(tmp_path, {})
    assert main(["train", str(config), "--seeds", "0-1", "-o", "seed=3"]) == 2
    assert capsys.readouterr().err.strip() == "parl train: seed: set by --seeds for each run; drop -o seed=..."
    assert main(["train", str(config), "--jobs", "2"]) == 2
    assert "--jobs 2: only with --seeds" in capsys.readouterr().err
    assert main(["train", str(config), "--seeds", "1-x"]) == 2
    assert "--seeds: expected seeds such as 0-4" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", "-2"])
def test_fewer_than_one_job_is_refused_in_one_line_before_any_run(tmp_path, capsys, jobs: str) -> None:
    config = write_config(tmp_path, {})
    assert main(["train", str(config), "--seeds", "0-1", "--jobs", jobs]) == 2
    assert capsys.readouterr().err == f"parl train: --jobs must be an integer >= 1, got {jobs}\n"
    assert not (tmp_path / "runs").exists()


#: A stand-in for a seed's ``parl train`` (argv: its run directory, its seed): it writes a result.json
#: of final return 100 + seed, except for seed 1, which ends well and writes none.
FAKE_RUN = """
import json, os, sys
run_dir, seed = sys.argv[1], int(sys.argv[2])
if seed != 1:
    result = {"seed": seed, "env_steps": 10, "train_seconds": 0.1, "stop_reason": "step budget",
              "reached": False, "best_eval": 100.0 + seed, "final_eval": 100.0 + seed}
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump(result, f)
"""


def fake_seed_command(
    config: str, overrides: Sequence[str], seed: int, log_dir: str, resume: bool, quiet: bool
) -> List[str]:
    return [sys.executable, "-c", FAKE_RUN, seed_runs.seed_log_dir(log_dir, seed), str(seed)]


def test_a_result_left_by_an_earlier_run_is_never_taken_for_this_runs(tmp_path, capsys, monkeypatch) -> None:
    config = write_config(tmp_path, {})
    log_dir = tmp_path / "runs" / "small"
    stale = _result(0, 480.0, 490.0)
    for seed in (0, 1):
        (log_dir / f"seed_{seed}").mkdir(parents=True)
        (log_dir / f"seed_{seed}" / "result.json").write_text(json.dumps({**stale, "seed": seed}))
    monkeypatch.setattr(seed_runs, "seed_command", fake_seed_command)
    assert main(["train", str(config), "--seeds", "0-1", "--jobs", "2", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "parl train: the runs of seeds [1] did not end well" in err  # exit status 0, but no result
    summary = json.loads((log_dir / AGGREGATE_FILE).read_text())
    assert [(run["seed"], run["final_eval"]) for run in summary["runs"]] == [(0, 100.0)] and summary["missing"] == [1]
    for seed in (0, 1):  # the earlier results were moved aside, not lost
        previous = json.loads((log_dir / f"seed_{seed}" / "result.previous.json").read_text())
        assert previous["final_eval"] == 480.0
    assert not (log_dir / "seed_1" / "result.json").exists()


#: ``python -c PARENT CONFIG SEEDS JOBS``: ``parl train CONFIG --seeds SEEDS --jobs JOBS --quiet`` whose seed
#: runs are stand-ins that wait for a signal, then write a result.json saying which (a ``parl train``
#: stopped by a signal writes its final checkpoint and result.json, tests/test_cli.py), and their pids.
PARENT = '''
import sys
from parl.experiment.runs import seed_runs
from parl.experiment.cli.commands import main

CHILD = """
import json, os, signal, sys, time
run_dir, seed = sys.argv[1], int(sys.argv[2])
got = []
for signum in (signal.SIGINT, signal.SIGTERM):
    signal.signal(signum, lambda signum, frame: got.append(signum))
with open(os.path.join(run_dir, "pid"), "w") as f:
    f.write(str(os.getpid()))
while not got:
    time.sleep(0.02)
result = {"seed": seed, "env_steps": 10, "train_seconds": 0.1, "stop_reason": "signal " + signal.Signals(got[0]).name,
          "reached": False, "best_eval": 1.0, "final_eval": 2.0}
with open(os.path.join(run_dir, "result.json"), "w") as f:
    json.dump(result, f)
"""


def waiting_run(config, overrides, seed, log_dir, resume, quiet):
    return [sys.executable, "-c", CHILD, seed_runs.seed_log_dir(log_dir, seed), str(seed)]


seed_runs.seed_command = waiting_run
config, seeds, jobs = sys.argv[1:]
sys.exit(main(["train", config, "--seeds", seeds, "--jobs", jobs, "--quiet"]))
'''


@pytest.mark.parametrize("signum, jobs", [(signal.SIGINT, 1), (signal.SIGTERM, 2)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_reaches_the_runs_going_on_and_no_other_starts(tmp_path, signum: int, jobs: int) -> None:
    config = write_config(tmp_path, {})
    log_dir = tmp_path / "runs" / "small"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(config), "0-3", str(jobs)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = [log_dir / f"seed_{seed}" / "pid" for seed in range(jobs)]
    try:
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text() for p in pids):
            assert parent.poll() is None and time.monotonic() < deadline, parent.communicate()
            time.sleep(0.05)
        time.sleep(0.2)  # nothing else starts while the runs go on
        assert sorted(os.listdir(log_dir)) == [f"seed_{seed}" for seed in range(jobs)]
        parent.send_signal(signum)
        out, err = parent.communicate(timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    name = signal.Signals(signum).name
    assert parent.returncode == 128 + signum, err
    not_started = list(range(jobs, 4))
    assert err.splitlines()[-1] == f"parl train: stopped by {name}; seeds not started: {not_started}"
    summary = json.loads((log_dir / AGGREGATE_FILE).read_text())
    assert [(run["seed"], run["stop_reason"]) for run in summary["runs"]] == [
        (s, f"signal {name}") for s in range(jobs)
    ]
    assert summary["missing"] == [] and summary["not_started"] == not_started
    for seed in not_started:
        assert f"{seed:>6}  not started" in out
        assert not (log_dir / f"seed_{seed}").exists()
    assert not [p for p in pids if running(int(p.read_text()))]  # each run ended on the one signal it got
