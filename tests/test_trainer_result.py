"""The Trainer's result and final evaluation: the policy of the evaluation that passed, else of the best
one, else the learners', plays ``evaluation.final_episodes`` episodes on the run's fresh seeds."""

from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import numpy as np
import pytest

from parl.experiment.config.robot_config import ConfigError, RobotConfig, load_config
from parl.experiment.evaluation.greedy import CONFIRM_FACTOR, final_seed
from parl.experiment.train import trainer as trainer_module
from parl.experiment.train.trainer import Trainer
from parl.serving.computation_task import ComputationTask

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"
#: The example robot the end-to-end tests train.
A2C_CARTPOLE = CONFIGS / "a2c_cartpole.yaml"
#: Overrides of a seeded run that never reaches its target, so it trains to its step budget.
FAR_FROM_TARGET = ("seed=7", "train.target_return=1e9")
RESULT_KEYS = {"seed", "reached", "best_eval", "final_eval", "last_eval", "env_steps", "stop_reason", "updates"}


def fingerprint(tasks: Mapping[str, ComputationTask]) -> str:
    """A digest of every weight (and input statistic) the tasks hold: equal weights, equal digests."""
    digest = hashlib.sha256()

    def add(path: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key in sorted(value):
                add(f"{path}.{key}", value[key])
        else:
            digest.update(path.encode())
            digest.update(np.ascontiguousarray(value).tobytes())

    add("", {name: task.algorithm_weights() for name, task in tasks.items()})
    return digest.hexdigest()


class EvaluationSpy:
    """Records each call of the Trainer's ``evaluate_agents``: episodes, first seed, weights and returns."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: List[Dict[str, Any]] = []
        real = trainer_module.evaluate_agents

        def spy(make_agent, tasks, *, episodes, seed, **kwargs):
            returns = real(make_agent, tasks, episodes=episodes, seed=seed, **kwargs)
            self.calls.append(
                dict(
                    episodes=episodes,
                    seed=seed,
                    weights=fingerprint(tasks),
                    returns=returns,
                    concurrency=kwargs.get("concurrency"),
                )
            )
            return returns

        monkeypatch.setattr(trainer_module, "evaluate_agents", spy)

    def during_training(self) -> List[Dict[str, Any]]:
        return self.calls[:-1]

    def final(self) -> Dict[str, Any]:
        return self.calls[-1]


def example_config(log_dir: Path, *overrides: str, name: str = "a2c_cartpole") -> RobotConfig:
    """examples/configs/``name``.yaml logging to ``log_dir``, with ``overrides`` (``key=value``)."""
    return load_config(str(CONFIGS / f"{name}.yaml"), [f"log_dir={log_dir}", *overrides])


def run(
    tmp_path: Path, *overrides: str, name: str = "a2c_cartpole", made: Optional[List[Trainer]] = None, **options: Any
) -> Dict[str, Any]:
    """Train config ``name`` with ``overrides`` (Trainer ``options``); the Trainer is appended to ``made``."""
    config = example_config(tmp_path / "run", "seed=7", "evaluation.episodes=2", *overrides, name=name)
    options.setdefault("progress", False)
    trainer = Trainer(config, **options)
    if made is not None:
        made.append(trainer)
    result = trainer.run()
    assert RESULT_KEYS <= set(result)
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert {key: saved[key] for key in ("seed", "reached", "env_steps")} == {
        key: result[key] for key in ("seed", "reached", "env_steps")
    }
    return result


def test_a_run_at_its_target_evaluates_the_passing_policy_on_fresh_seeds(tmp_path, monkeypatch) -> None:
    spy = EvaluationSpy(monkeypatch)
    # Every CartPole episode returns more than 5: the first evaluation passes.
    result = run(tmp_path, "train.target_return=5.0", "evaluation.every_steps=200", "evaluation.final_episodes=3")
    assert result["reached"] is True and result["stop_reason"] == "target return" and result["seed"] == 7
    final = spy.final()
    assert (final["episodes"], final["seed"]) == (3, final_seed(7))
    assert final["weights"] == spy.during_training()[-1]["weights"]  # the weights that passed
    assert result["final_eval"] == pytest.approx(float(np.mean(final["returns"])))
    assert result["best_eval"] == result["last_eval"] >= 5.0


def test_a_run_short_of_its_target_evaluates_its_best_evaluation(tmp_path, monkeypatch) -> None:
    spy = EvaluationSpy(monkeypatch)
    result = run(
        tmp_path,
        "train.max_env_steps=2500",
        "train.target_return=1e9",
        "evaluation.every_steps=300",
        "evaluation.start_return=null",
    )
    assert result["reached"] is False and result["stop_reason"] == "step budget"
    evaluations = spy.during_training()  # each one episode (far below the target), at its own weights
    assert len({call["weights"] for call in evaluations}) >= 2
    best = max(evaluations, key=lambda call: call["returns"][0])
    assert result["best_eval"] == best["returns"][0] and result["last_eval"] == evaluations[-1]["returns"][0]
    final = spy.final()
    assert final["weights"] == best["weights"]
    assert (final["episodes"], final["seed"]) == (CONFIRM_FACTOR * 2, final_seed(7))  # final_episodes: null


def test_the_policy_training_ends_with_is_evaluated_when_training_went_on_after_the_last_evaluation(
    tmp_path, monkeypatch
) -> None:
    """A budget shorter than every_steps: the evaluation after the first update, then one at the end of
    the policy training ended with, which the final evaluation may choose."""
    spy = EvaluationSpy(monkeypatch)
    made: List[Trainer] = []
    result = run(
        tmp_path,
        "train.max_env_steps=1500",
        "train.target_return=1e9",
        "evaluation.every_steps=100000",
        "evaluation.start_return=null",
        made=made,
    )
    evaluations = spy.during_training()
    assert result["evaluations"] == len(evaluations) == 2
    assert evaluations[-1]["weights"] == fingerprint(made[0].manager.tasks)  # the learners' at the end
    assert evaluations[0]["weights"] != evaluations[-1]["weights"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows if "eval/mean_return" in row][-1] == result["env_steps"]
    best = max(evaluations, key=lambda call: call["returns"][0])
    assert spy.final()["weights"] == best["weights"] and result["best_eval"] == best["returns"][0]


def test_without_an_evaluation_the_learners_play_the_final_one(tmp_path, monkeypatch) -> None:
    spy = EvaluationSpy(monkeypatch)
    trainer: List[Trainer] = []
    result = run(
        tmp_path, "train.max_env_steps=1500", "evaluation.start_return=1e9", "evaluation.final_episodes=2", made=trainer
    )
    assert math.isnan(result["best_eval"]) and math.isnan(result["last_eval"]) and result["updates"]["RL"] > 0
    assert len(spy.calls) == 1 and spy.final()["weights"] == fingerprint(trainer[0].manager.tasks)
    assert result["final_eval"] == pytest.approx(float(np.mean(spy.final()["returns"])))


def test_a_run_that_never_trained_has_no_final_evaluation(tmp_path, monkeypatch) -> None:
    spy = EvaluationSpy(monkeypatch)
    # DQN's agents each store 500 transitions before the first update: 100 env steps train nothing.
    result = run(tmp_path, "train.max_env_steps=100", name="dqn_cartpole")
    assert result["updates"]["RL"] == 0 and spy.calls == []
    assert math.isnan(result["final_eval"]) and math.isnan(result["best_eval"]) and result["reached"] is False


def test_the_final_evaluation_is_reported_with_the_progress(tmp_path) -> None:
    stream = io.StringIO()
    run(tmp_path, "train.max_env_steps=600", "evaluation.final_episodes=1", progress=True, stream=stream)
    assert "final evaluation of the " in stream.getvalue()


def test_final_episodes_is_checked_at_load() -> None:
    with pytest.raises(ConfigError, match=r"^evaluation\.final_episodes: expected .*, got 0$"):
        load_config(str(CONFIGS / "a2c_cartpole.yaml"), ["evaluation.final_episodes=0"])
    assert load_config(str(CONFIGS / "a2c_cartpole.yaml")).evaluation.final_episodes is None


def test_evaluations_play_at_most_evaluation_concurrency_episodes_at_once(tmp_path, monkeypatch) -> None:
    with pytest.raises(ConfigError, match=r"^evaluation\.concurrency: expected .*, got 0$"):
        load_config(str(CONFIGS / "a2c_cartpole.yaml"), ["evaluation.concurrency=0"])
    assert load_config(str(CONFIGS / "a2c_cartpole.yaml")).evaluation.concurrency == 32
    spy = EvaluationSpy(monkeypatch)
    run(tmp_path, "train.max_env_steps=600", "evaluation.every_steps=200", "evaluation.concurrency=3")
    assert len(spy.calls) >= 2 and {call["concurrency"] for call in spy.calls} == {3}
