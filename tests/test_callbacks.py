"""Callbacks and custom metrics: numbers an agent's episode returns and scalar costs an algorithm
returns reach metrics.jsonl and TensorBoard; callbacks named in a config run and may stop the run."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import List, Mapping, Optional, Tuple

import numpy as np
import pytest

from parl.experiment.config.robot_config import ConfigError, load_config
from parl.experiment.config.callbacks import CALLBACK_STOP, Callback, Callbacks, EarlyStopping
from parl.experiment.train.metrics import RobotMetrics
from parl.experiment.train.trainer import Trainer
from parl.validation import ParameterError

from tensorboard_events import read_scalar_events

CONFIGS = Path(__file__).resolve().parent.parent / "examples" / "configs"

#: A module of the user's, beside the config: an agent with statistics of its own, an algorithm with a
#: cost of its own, and a callback that records what it is shown.
USER_MODULE = '''
from typing import Mapping, Optional

from parl.algorithms import A2C
from parl.experiment.config.callbacks import Callback
from parl.utils import GymAgent


class CountingAgent(GymAgent):
    def run_one_episode(self):
        result = super().run_one_episode()
        return {**result, "bonus": 2.5, "long": result["steps"] > 20, "trace": [1, 2], "note": "text"}


class CostlyA2C(A2C):
    def learn(self, batch):
        costs = super().learn(batch)
        return {**costs, "my_cost": 0.75, "doubled_loss": 2.0 * costs["loss"]}


class Recorder(Callback):
    """Appends one JSON line per hook call to ``path``; stops the run after ``stop_after`` episodes."""

    def __init__(self, path: str, stop_after: int = 10**9) -> None:
        self.path, self.stop_after, self.episodes = path, stop_after, 0

    def _write(self, hook, step, payload) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"hook": hook, "step": step, "payload": payload}) + "\\n")

    def on_episode_end(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        self.episodes += 1
        self._write("episode", step, sorted(values))
        return "enough episodes" if self.episodes >= self.stop_after else None

    def on_update(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        self._write("update", step, sorted(values))
        return None

    def on_evaluation(self, step: int, values: Mapping[str, float]) -> Optional[str]:
        self._write("evaluation", step, values["eval/mean_return"])
        return None

    def on_checkpoint(self, step: int, path: str, kind: str) -> Optional[str]:
        self._write("checkpoint", step, [path, kind])
        return None
'''


def user_robot(tmp_path: Path, *overrides: str):
    """a2c_cartpole with the user's agent, algorithm and recording callback (stopping after 40 episodes)."""
    (tmp_path / "user_robot.py").write_text("import json\n" + textwrap.dedent(USER_MODULE))
    return load_config(
        str(CONFIGS / "a2c_cartpole.yaml"),
        [
            f"python_path=[{tmp_path}]",
            f"log_dir={tmp_path / 'run'}",
            "agents=2",
            "agent.class=user_robot.CountingAgent",
            "tasks.RL.algorithm.class=user_robot.CostlyA2C",
            "tasks.RL.batching.max_batchsize=2",
            "train.target_return=null",
            "evaluation.every_steps=500",
            "evaluation.episodes=1",
            f"callbacks=[{{class: user_robot.Recorder, path: {tmp_path / 'calls.jsonl'}, stop_after: 40}}]",
            *overrides,
        ],
    )


def calls(tmp_path: Path) -> List[dict]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_agent_statistics_and_algorithm_costs_reach_metrics_and_tensorboard_and_the_callback_runs(tmp_path) -> None:
    result = Trainer(user_robot(tmp_path), progress=False, log_seconds=0.05).run()
    assert result["stop_reason"] == f"{CALLBACK_STOP}enough episodes"

    events = read_scalar_events(tmp_path / "run")
    tags = {tag for _, tag, _ in events}
    assert {"episode/bonus", "episode/long", "task/RL/my_cost", "task/RL/doubled_loss"} <= tags
    assert not any(tag in tags for tag in ("episode/trace", "episode/note", "episode/agent_id", "episode/episode"))
    assert {value for _, tag, value in events if tag == "episode/bonus"} == {2.5}
    assert {value for _, tag, value in events if tag == "episode/long"} <= {0.0, 1.0}
    assert {value for _, tag, value in events if tag == "task/RL/my_cost"} == {0.75}
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    doubled = [(r["task/RL/doubled_loss"], r["task/RL/loss"]) for r in rows if "task/RL/doubled_loss" in r]
    assert doubled and all(d == pytest.approx(2 * loss, rel=1e-5, abs=1e-6) for d, loss in doubled)

    recorded = calls(tmp_path)
    episodes = [c for c in recorded if c["hook"] == "episode"]
    # The callback stopped the run at its 40th episode; it saw every episode the run counted.
    assert len(episodes) == result["episodes"] >= 40 and all("episode/bonus" in c["payload"] for c in episodes)
    updates = [c for c in recorded if c["hook"] == "update"]
    assert updates and all("task/RL/my_cost" in c["payload"] for c in updates)
    assert [c["payload"][1] for c in recorded if c["hook"] == "checkpoint"][-1] == "final"
    assert [c["payload"][0] for c in recorded if c["hook"] == "checkpoint"][-1] == result["checkpoint"]
    steps = [c["step"] for c in episodes]
    assert steps == sorted(steps)


def test_early_stopping_in_a_config_stops_the_run_at_a_threshold(tmp_path) -> None:
    config = user_robot(
        tmp_path,
        "callbacks=[{class: parl.experiment.config.callbacks.EarlyStopping, metric: episode/reward, threshold: 30.0}]",
    )
    assert isinstance(config.callbacks[0].build(), EarlyStopping)
    assert config.to_dict()["callbacks"] == [
        {"class": "parl.experiment.config.callbacks.EarlyStopping", "metric": "episode/reward", "threshold": 30.0}
    ]
    result = Trainer(config, progress=False).run()
    assert result["stop_reason"].startswith(f"{CALLBACK_STOP}episode/reward reached ")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    returns = [r["episode/reward"] for r in rows if "episode/reward" in r]
    assert max(returns) >= 30.0


def test_callbacks_given_in_python_run_too(tmp_path) -> None:
    seen: List[Tuple[str, int]] = []

    class Evaluations(Callback):
        def on_evaluation(self, step: int, values: Mapping[str, float]) -> Optional[str]:
            seen.append(("evaluation", step))
            return "one is enough"

    config = user_robot(tmp_path, "callbacks=null", "evaluation.every_steps=100")
    result = Trainer(config, progress=False, callbacks=[Evaluations()]).run()
    assert result["stop_reason"] == f"{CALLBACK_STOP}one is enough"
    assert len(seen) == 1 and 0 < seen[0][1] <= result["env_steps"]


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "callbacks={class: parl.experiment.config.callbacks.EarlyStopping}",
            "callbacks: expected a list of class specs",
        ),
        ("callbacks=[{class: parl.utils.GymAgent}]", "callbacks[0].class: expected a subclass of parl.Callback"),
        (
            "callbacks=[{class: parl.experiment.config.callbacks.EarlyStopping, metric: eval/mean_return, patience: 0}]",
            "callbacks[0].patience: expected an integer >= 1, got 0",
        ),
        (
            "callbacks=[{class: parl.experiment.config.callbacks.EarlyStopping, metric: x/y, patience: 2, mode: up}]",
            "callbacks[0].mode: expected one of ['max', 'min'], got 'up'",
        ),
        (
            "callbacks=[{class: parl.experiment.config.callbacks.EarlyStopping, metric: eval/mean_return}]",
            "callbacks[0]: EarlyStopping needs patience, threshold or both; got neither",
        ),
    ],
)
def test_bad_callbacks_are_config_errors_at_their_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(str(CONFIGS / "ppo_cartpole.yaml"), [override])
    assert str(caught.value).startswith(message)


# -- units -----------------------------------------------------------------------------------------


def test_early_stopping_counts_observations_without_improvement() -> None:
    stop = EarlyStopping("eval/mean_return", patience=2, min_delta=1.0)
    assert stop.on_update(0, {"task/RL/loss": 1.0}) is None  # rows without the metric are no observations
    assert [stop.on_evaluation(0, {"eval/mean_return": v}) for v in (10.0, 10.5, 12.0, float("nan"), 12.9)] == [
        None,
        None,
        None,
        None,
        None,
    ]
    reason = stop.on_evaluation(0, {"eval/mean_return": 11.0})
    assert reason == "eval/mean_return did not improve on 12 in 2 observations"


def test_early_stopping_on_a_falling_metric_and_a_threshold() -> None:
    stop = EarlyStopping("task/RL/loss", threshold=0.1, mode="min")
    assert stop.on_update(0, {"task/RL/loss": 0.5}) is None
    assert stop.on_update(0, {"task/RL/loss": 0.05}) == "task/RL/loss reached 0.05 (threshold 0.1)"
    with pytest.raises(ParameterError, match="min_delta must be a number in"):
        EarlyStopping("eval/mean_return", patience=1, min_delta=-1.0)
    with pytest.raises(ParameterError, match="metric must be a tag"):
        EarlyStopping("reward", patience=1)


def test_callbacks_keep_the_first_stop_reason_and_show_updates_only_with_costs() -> None:
    class Stopper(Callback):
        def __init__(self, reason: str) -> None:
            self.reason, self.updates = reason, 0

        def on_update(self, step: int, values: Mapping[str, float]) -> Optional[str]:
            self.updates += 1
            return self.reason

    first, second = Stopper("first"), Stopper("second")
    callbacks = Callbacks([first, second])
    callbacks.update(10, {"robot/env_steps_per_second": 100.0, "task/RL/updates_per_second": 0.0})
    assert first.updates == 0 and callbacks.stop_reason is None
    callbacks.update(20, {"task/RL/loss": 0.5})
    assert (first.updates, second.updates) == (1, 1) and callbacks.stop_reason == f"{CALLBACK_STOP}first"
    with pytest.raises(TypeError, match=r"callbacks\[0\]: expected a parl Callback, got object"):
        Callbacks([object()])  # type: ignore[list-item]


def test_episode_values_write_every_number_the_agent_returns() -> None:
    values = RobotMetrics.episode_values(
        {
            "agent_id": 1,
            "episode": 4,
            "seconds": 0.5,
            "reward": 3.0,
            "steps": 6,
            "subgoals_reached": 2,
            "success": True,
            "ratio": np.float32(0.25),
            "bad": float("nan"),
            "frames": np.zeros(3),
            "name": "x",
        }
    )
    assert values == {
        "episode/reward": 3.0,
        "episode/length": 6.0,
        "episode/seconds": 0.5,
        "episode/reward_per_second": 6.0,
        "episode/subgoals_reached": 2.0,
        "episode/success": 1.0,
        "episode/ratio": 0.25,
        "episode/bad": pytest.approx(math.nan, nan_ok=True),
    }


def test_an_agents_own_length_is_not_written_over_parls(caplog) -> None:
    values = RobotMetrics.episode_values({"reward": 1.0, "steps": 5, "length": 99})
    assert values["episode/length"] == 5.0
    assert "'length'" in caplog.text and "rename it" in caplog.text
