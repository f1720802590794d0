"""`parl tune`: planning a grid of trials, the result table, cores of their own, and a 2x2 grid of
the PPO CartPole config on Ray Tune (on the session's local Ray cluster)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from parl.core_claims import claim_cores
from parl.experiment.cli.commands import main
from parl.experiment.config.class_spec import ConfigError
from parl.experiment.runs import sweep
from parl.experiment.runs.sweep import TrialRow, best_row, parse_axis, plan_sweep, table_lines, write_results
from parl.experiment.runs.tune import trial_report

REPO = Path(__file__).resolve().parents[1]
PPO = str(REPO / "examples" / "configs" / "ppo_cartpole.yaml")
LR, EPOCHS = "tasks.RL.algorithm.learning_rate", "tasks.RL.algorithm.epochs"
#: A run of the PPO config that ends in seconds: 2000 env steps, one evaluation of one episode at the end.
QUICK = [
    "train.max_env_steps=2000",
    "evaluation.every_steps=null",
    "evaluation.episodes=1",
    "evaluation.final_episodes=1",
]
#: The columns of the table of a grid over the learning rate and the epochs.
COLUMNS = ["trial", "learning_rate", "epochs", "seed", "final_eval", "best_eval", "env_steps", "reached", "seconds"]


def test_import_parl_and_parl_train_leave_ray_unimported(tmp_path: Path) -> None:
    args = ["train", PPO, "--quiet", "-o", f"log_dir={tmp_path / 'run'}"] + [p for o in QUICK for p in ("-o", o)]
    script = (
        "import sys, parl\n"
        "from parl.experiment.cli.commands import main\n"
        "assert 'ray' not in sys.modules, 'import parl imported ray'\n"
        f"assert main({args!r}) == 0\n"
        "assert 'ray' not in sys.modules, 'parl train imported ray'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_without_ray_parl_tune_says_how_to_install_it_in_one_line(monkeypatch, tmp_path: Path, capsys) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    status = main(["tune", PPO, "--grid", f"{LR}=0.001,0.002", "--log-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert status == 1
    assert err == "parl tune: parl tune needs Ray Tune, which is not installed: pip install 'parl[ray]'"
    assert not (tmp_path / "tune").exists()


# -- the plan ---------------------------------------------------------------------------------


def test_grid_values_are_read_as_yaml_and_commas_in_brackets_or_quotes_do_not_split() -> None:
    axis = parse_axis('tasks.RL.model.hidden_sizes=[32, 32],[64,64], "a,b"')
    assert axis.key == "tasks.RL.model.hidden_sizes"
    assert axis.values == ("[32, 32]", "[64,64]", '"a,b"')


@pytest.mark.parametrize(
    "text, message",
    [
        ("seed", "seed: expected --grid key.path=value1,value2,..."),
        ("seed=", "seed: expected at least one value, got '' (in --grid seed=)"),
        ("seed=1,[2", "seed: cannot parse '1,[2'"),
        ("seed=1,2,1", "seed: value 1 given twice (in --grid seed=1,2,1)"),
        ("log_dir=a,b", "log_dir: a sweep sets each trial's log_dir; give --log-dir instead"),
    ],
)
def test_a_bad_grid_is_one_line_naming_it(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_axis(text)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--samples", "0", "--samples must be an integer in [1, 10000], got 0"),
        ("--max-concurrent", "0", "--max-concurrent must be an integer >= 1, got 0"),
        ("--trial-cpus", "-1", "--trial-cpus must be a number of CPUs >= 0, got -1.0"),
        ("--trial-cpus", "nan", "--trial-cpus must be a number of CPUs >= 0, got nan"),
        ("--trial-cpus", "inf", "--trial-cpus must be a number of CPUs >= 0, got inf"),
    ],
)
def test_a_bad_number_of_a_sweep_option_is_one_line_and_exit_status_2(
    tmp_path: Path, capsys, option: str, value: str, message: str
) -> None:
    status = main(["tune", PPO, "--grid", "seed=1,2", "--log-dir", str(tmp_path), option, value])
    assert (status, capsys.readouterr().err) == (2, f"parl tune: {message}\n")
    assert not (tmp_path / "tune").exists()


def test_a_grid_value_the_config_refuses_is_a_config_error_naming_the_grid(tmp_path: Path, capsys) -> None:
    status = main(["tune", PPO, "--grid", "tasks.RL.algorithm.gamma=0.9,1.5", "--log-dir", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert status == 2
    assert err.startswith("parl tune: tasks.RL.algorithm.gamma: ")
    assert err.endswith("(in --grid tasks.RL.algorithm.gamma=0.9,1.5)") and "\n" not in err
    with pytest.raises(
        ConfigError,
        match=r"tasks.RL.algorithm.learning_rat: unknown option of parl.algorithms.PPO; did you mean .*\(in --grid ",
    ):
        plan_sweep(PPO, [f"{LR[:-1]}=0.1"], log_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=r"seed: given in two --grid options"):
        plan_sweep(PPO, ["seed=1,2", "seed=3"], log_dir=str(tmp_path))


def test_trials_are_every_combination_and_each_sample_has_its_own_seed(tmp_path: Path) -> None:
    plan = plan_sweep(PPO, [f"{LR}=0.001,0.002", f"{EPOCHS}=5"], samples=2, overrides=["seed=7"], log_dir=str(tmp_path))
    assert [(t.values, t.sample, t.seed) for t in plan.trials] == [
        (("0.001", "5"), 0, 7),
        (("0.001", "5"), 1, 8),
        (("0.002", "5"), 0, 7),
        (("0.002", "5"), 1, 8),
    ]
    first = plan.trials[0]
    assert first.name == "trial-000_learning_rate=0.001_epochs=5_seed=7"
    assert first.log_dir == str(tmp_path / "tune" / first.name)
    assert first.overrides == ("seed=7", f"{LR}=0.001", f"{EPOCHS}=5", "seed=7", f"log_dir={first.log_dir}")
    assert first.bundles == ({"CPU": 1.0},)
    assert len({t.name for t in plan.trials}) == 4
    assert all(plan.find(t.values, t.sample) is t for t in plan.trials)
    assert plan.command(first) == f"parl train {PPO} -o seed=7 -o {LR}=0.001 -o {EPOCHS}=5 -o seed=7"


def test_a_seed_axis_is_the_base_of_its_samples(tmp_path: Path) -> None:
    plan = plan_sweep(PPO, ["seed=10,20"], samples=2, log_dir=str(tmp_path))
    assert [t.seed for t in plan.trials] == [10, 11, 20, 21]
    assert all(t.overrides.count(f"seed={t.seed}") == 1 for t in plan.trials)


def test_each_trial_asks_for_the_cpus_its_robot_needs(tmp_path: Path) -> None:
    def bundles(*overrides: str, trial_cpus=None):
        plan = plan_sweep(PPO, ["seed=1"], overrides=overrides, log_dir=str(tmp_path), trial_cpus=trial_cpus)
        return plan.trials[0].bundles

    assert bundles() == ({"CPU": 1.0},)
    assert bundles(trial_cpus=0.5) == ({"CPU": 0.5},)
    assert bundles("placement.name=processes", "placement.workers=2") == ({"CPU": 2.0},)
    ray = ("placement.name=ray", "placement.workers=3", "placement.worker_cpus=0.5")
    assert bundles(*ray) == ({}, {"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 0.5})
    assert bundles(*ray, trial_cpus=1) == ({"CPU": 1.0}, {"CPU": 0.5}, {"CPU": 0.5}, {"CPU": 0.5})
    reserves = r"placement.workers: workers must be set \(a sweep reserves CPUs for each trial's Ray workers\)"
    with pytest.raises(ConfigError, match=reserves):
        bundles("placement=ray")
    with pytest.raises(ValueError, match=r"--samples must be an integer in \[1, 10000\], got 0"):
        plan_sweep(PPO, ["seed=1"], samples=0, log_dir=str(tmp_path))
    with pytest.raises(ValueError, match="--trial-cpus must be a number of CPUs >= 0, got -1"):
        bundles(trial_cpus=-1)


def test_a_sweep_of_more_than_the_most_trials_is_refused_before_any_config_is_loaded(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    def no_loading(path: str):
        raise AssertionError("a config was loaded")

    monkeypatch.setattr(sweep, "config_loader", no_loading)
    thousand = ",".join(str(i) for i in range(1000))
    grid = ["--grid", f"seed={thousand}", "--grid", f"{EPOCHS}={thousand}", "--log-dir", str(tmp_path)]
    assert main(["tune", PPO, *grid]) == 2
    assert capsys.readouterr().err == (
        "parl tune: --grid: 1000 x 1000 values make 1,000,000 trials; a sweep runs at most 10,000\n"
    )
    assert main(["tune", PPO, "--grid", "seed=1,2,3", "--samples", "4000", "--log-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        "parl tune: --grid: 3 values x 4000 samples make 12,000 trials; a sweep runs at most 10,000\n"
    )
    assert main(["tune", PPO, "--grid", "seed=1", "--samples", str(10**9), "--log-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "parl tune: --samples must be an integer in [1, 10000], got 1000000000\n"
    with pytest.raises(ConfigError, match="seed: value 7 given twice"):  # counted, not compared pairwise
        parse_axis("seed=" + ",".join(str(i) for i in range(20_000)) + ",7")
    assert not (tmp_path / "tune").exists()


def test_trials_ask_for_the_cpus_of_their_own_values_of_the_keys_that_decide_them(tmp_path: Path) -> None:
    grid = ["placement.workers=1,2", "seed=5,6"]
    plan = plan_sweep(PPO, grid, overrides=["placement=processes"], log_dir=str(tmp_path))
    assert [(t.values, t.bundles) for t in plan.trials] == [
        (("1", "5"), ({"CPU": 1.0},)),
        (("1", "6"), ({"CPU": 1.0},)),
        (("2", "5"), ({"CPU": 2.0},)),
        (("2", "6"), ({"CPU": 2.0},)),
    ]
    ray_overrides = ["placement.name=ray", "placement.workers=2"]
    ray = plan_sweep(PPO, ["placement.worker_cpus=0.5,1"], overrides=ray_overrides, log_dir=str(tmp_path))
    assert [t.bundles for t in ray.trials] == [({}, {"CPU": 0.5}, {"CPU": 0.5}), ({}, {"CPU": 1.0}, {"CPU": 1.0})]
    with pytest.warns(DeprecationWarning) as caught:  # the keys of before the placement block
        old = plan_sweep(
            PPO, ["ray.worker_cpus=0.5,1"], overrides=["placement=ray", "workers=2"], log_dir=str(tmp_path)
        )
    assert {str(w.message).split(" is deprecated")[0] for w in caught} == {
        "config key ray.worker_cpus",
        "config key workers",
    }
    assert [t.bundles for t in old.trials] == [t.bundles for t in ray.trials]


def test_a_trial_asking_for_more_cpus_than_the_machine_has_is_refused_before_a_local_ray_starts(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from parl.runtime.ray_cluster.session import RaySession, import_ray

    ray = import_ray()  # through parl, as every import of Ray in these tests: a local Ray stays on loopback

    def no_start(*args, **kwargs):
        raise AssertionError("Ray was joined or started")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh `parl tune`, whatever this session holds
    monkeypatch.setattr(RaySession, "join", no_start)
    status = main(["tune", PPO, "--grid", "seed=1,2", "--trial-cpus", "1000", "--log-dir", str(tmp_path)])
    cpus = os.cpu_count()
    assert (status, capsys.readouterr().err) == (
        1,
        f"parl tune: trial 0 (trial-000_seed=1) asks for 1000 CPUs; this machine has {cpus} (fewer placement.workers, "
        "placement.worker_cpus or --trial-cpus; or --address of a larger cluster)\n",
    )
    assert not (tmp_path / "tune").exists()


def test_a_sweep_never_writes_over_another(tmp_path: Path) -> None:
    (tmp_path / "tune").mkdir()
    (tmp_path / "tune" / "results.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"--log-dir: .*tune already holds a sweep"):
        plan_sweep(PPO, ["seed=1"], log_dir=str(tmp_path))


def test_a_trial_whose_values_do_not_go_together_reports_its_error(tmp_path: Path) -> None:
    # Each value loads alone; together the batch would wait for 8 segments from 4 agents.
    plan = plan_sweep(PPO, ["agents=4,8", "tasks.RL.batching.min_batchsize=8"], log_dir=str(tmp_path))
    report = trial_report(plan, plan.trials[0])
    assert report == {
        "error": "tasks.RL.batching.min_batchsize: expected at most the batches joined per update (4), got 8"
    }
    assert not os.path.exists(plan.trials[0].log_dir)


def test_the_table_has_a_row_per_trial_and_the_best_is_by_final_eval_then_fewer_steps(tmp_path: Path) -> None:
    plan = plan_sweep(PPO, [f"{LR}=0.001,0.002,0.003", f"{EPOCHS}=5"], log_dir=str(tmp_path))
    figures = {"best_eval": 480.0, "reached": True, "train_seconds": 3.25, "final_eval": 500.0}
    rows = [
        TrialRow(plan.trials[0], {**figures, "env_steps": 9000}),
        TrialRow(plan.trials[1], {**figures, "env_steps": 8000}),
        TrialRow(plan.trials[2], None, "ValueError: boom"),
    ]
    assert best_row(rows) is rows[1]
    lines = table_lines(plan, rows)
    assert lines[0].split() == COLUMNS + ["error"]
    assert lines[2].split() == ["1", "0.002", "5", "0", "500.0", "480.0", "8,000", "yes", "3.2"]
    assert lines[3].split(maxsplit=9) == ["2", "0.003", "5", "0", "nan", "nan", "-", "-", "nan", "ValueError: boom"]
    assert lines[4] == f"best: trial 1 (final_eval 500.0, 8,000 env steps): {plan.command(plan.trials[1])}"
    assert best_row([rows[2]]) is None
    assert table_lines(plan, [rows[2]])[-1] == "best: none (no trial finished with a final evaluation)"


def test_claims_give_each_process_cores_of_its_own_and_give_them_back(tmp_path: Path) -> None:
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        pytest.skip("needs two cores")
    folder = str(tmp_path / "claims")
    other = (  # another process of the machine (it would inherit this thread's core: given all back first)
        f"import os\nos.sched_setaffinity(0, {sorted(allowed)})\nfrom parl.core_claims import claim_cores\n"
        f"with claim_cores(1, {folder!r}) as cores:\n    print(sorted(cores), sorted(os.sched_getaffinity(0)))\n"
    )
    with claim_cores(1, folder) as first:
        assert os.sched_getaffinity(0) == first and len(first) == 1
        done = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, timeout=60)
        second = json.loads(done.stdout.split("] ")[0] + "]")
        assert done.returncode == 0 and len(second) == 1 and not set(second) & first, done.stdout + done.stderr
        assert done.stdout.split("] ")[1].strip() == str(second)  # that process ran on its claimed core
        with claim_cores(2, folder) as beyond:  # more than this thread may use now
            assert beyond is None and os.sched_getaffinity(0) == first
    assert os.sched_getaffinity(0) == allowed
    with claim_cores(len(allowed), folder) as every:  # every lock was given back
        assert every == allowed


# -- a sweep on Ray Tune -----------------------------------------------------------------------


def test_a_2x2_grid_of_ppo_runs_on_ray_tune_and_prints_the_table(ray_cluster, tmp_path: Path, capsys) -> None:
    args = ["tune", PPO, "--grid", f"{LR}=0.0015,0.0005", "--grid", f"{EPOCHS}=5,10", "--log-dir", str(tmp_path)]
    status = main(args + [part for o in QUICK for part in ("-o", o)] + ["--max-concurrent", "2"])
    out = [line for line in capsys.readouterr().out.strip().splitlines() if "pid=" not in line]  # not Ray's lines
    assert status == 0, out
    results = json.loads((tmp_path / "tune" / "results.json").read_text())
    trials = results["trials"]
    assert [(t["values"][LR], t["values"][EPOCHS]) for t in trials] == [
        ("0.0015", "5"), ("0.0015", "10"), ("0.0005", "5"), ("0.0005", "10")
    ]  # fmt: skip
    assert out[0].split() == COLUMNS
    for line, trial in zip(out[1:5], trials):
        assert trial["error"] is None
        run = Path(trial["log_dir"])
        assert run == tmp_path / "tune" / trial["name"]
        result = json.loads((run / "result.json").read_text())
        assert result["env_steps"] == trial["env_steps"] >= 2000 and result["stop_reason"] == "step budget"
        assert result["final_eval"] == trial["final_eval"] and math.isfinite(result["final_eval"])
        assert line.split() == [
            str(trial["trial"]),
            trial["values"][LR],
            trial["values"][EPOCHS],
            "0",
            f"{result['final_eval']:.1f}",
            f"{result['best_eval']:.1f}",
            f"{result['env_steps']:,}",
            "no",
            f"{result['train_seconds']:.1f}",
        ]
        config = yaml.safe_load((run / "config.yaml").read_text())
        algorithm = config["tasks"]["RL"]["algorithm"]
        assert (str(algorithm["learning_rate"]), str(algorithm["epochs"])) == (
            trial["values"][LR],
            trial["values"][EPOCHS],
        )
        assert config["log_dir"] == str(run) and config["train"]["max_env_steps"] == 2000
        assert (run / "metrics.jsonl").stat().st_size > 0
        assert list((run / "checkpoints").glob("ckpt-*"))
    best = max(trials, key=lambda t: (t["final_eval"], -t["env_steps"]))
    assert results["best"] == best["trial"]
    assert out[5].startswith(f"best: trial {best['trial']} (final_eval {best['final_eval']:.1f}, ")
    assert out[5].endswith(best["command"]) and f"-o {LR}={best['values'][LR]}" in best["command"]
    assert Path(out[6].split("results: ")[1]).resolve() == tmp_path / "tune" / "results.json"
    assert list((tmp_path / "tune" / "ray").glob("experiment_state-*.json"))  # Tune's own state: in the log dir


def test_a_trial_whose_process_dies_is_one_line_and_its_traceback_goes_to_the_sweeps_log(
    ray_cluster, tmp_path: Path, capfd
) -> None:
    crash = ["python_path=[" + str(REPO / "tests") + "]", "env.id=null", "env.factory=toys.exiting_env"]
    args = ["tune", PPO, "--grid", "seed=1", "--log-dir", str(tmp_path)] + [p for o in QUICK + crash for p in ("-o", o)]
    assert main(args) == 1
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "Trial task failed" not in out + err
    died = "The actor is dead because its worker process has died."
    assert err.splitlines()[-1] == f"parl tune: all 1 trials failed; first: trial 0: {died}"
    row = out.splitlines()[1].split()
    assert row[:8] == ["0", "1", "1", "nan", "nan", "-", "-", "nan"] and " ".join(row[8:]) == died
    text = (tmp_path / "tune" / "results.json").read_text()
    (trial,) = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in results.json"))["trials"]
    assert trial["error"] == died and trial["final_eval"] is None and trial["seconds"] is None
    log = (tmp_path / "tune" / "tune.log").read_text()
    assert "Trial task failed for trial trial-000_seed=1" in log and "Traceback" in log


def test_results_json_holds_null_for_a_figure_that_is_nan(tmp_path: Path) -> None:
    plan = plan_sweep(PPO, ["seed=1,2"], log_dir=str(tmp_path))
    figures = {"env_steps": 2000, "reached": False, "train_seconds": 1.5, "best_eval": float("nan")}
    rows = [TrialRow(plan.trials[0], {**figures, "final_eval": float("nan")}), TrialRow(plan.trials[1], None, "boom")]
    text = Path(write_results(plan, rows)).read_text()
    trials = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in results.json"))["trials"]
    assert [(t["final_eval"], t["best_eval"], t["seconds"], t["env_steps"]) for t in trials] == [
        (None, None, 1.5, 2000),
        (None, None, None, None),
    ]
    assert table_lines(plan, rows)[1].split() == ["0", "1", "1", "nan", "nan", "2,000", "no", "1.5"]


def test_a_signal_to_the_sweep_stops_every_trial_which_is_saved(ray_cluster, tmp_path: Path, capsys) -> None:
    # Trials with budgets they never reach: a SIGINT to the sweep once both have begun stops them at
    # their next episode's end, each with its final checkpoint and result.json, and the table follows.
    def interrupt_once_both_train() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(tmp_path.glob("tune/trial-*/metrics.jsonl"))) < 2:
            time.sleep(0.2)
        time.sleep(2.0)
        os.kill(os.getpid(), signal.SIGINT)

    overrides = ["train.max_env_steps=100000000", "train.target_return=null", "evaluation.every_steps=null"]
    args = ["tune", PPO, "--grid", f"{LR}=0.0015,0.0005", "--log-dir", str(tmp_path), "--max-concurrent", "2"]
    sender = threading.Thread(target=interrupt_once_both_train, daemon=True)
    sender.start()
    status = main(args + [part for o in overrides for part in ("-o", o)])
    sender.join()
    assert status == 0
    for run in sorted(tmp_path.glob("tune/trial-*")):
        result = json.loads((run / "result.json").read_text())
        assert result["stop_reason"] == "callback: the sweep got SIGINT"
        assert result["checkpoint"] is not None and Path(result["checkpoint"]).is_dir()
    assert len(list(tmp_path.glob("tune/trial-*/result.json"))) == 2
