"""The Atari, MinAtar and MuJoCo configs of examples/configs/, each trained for a few hundred env steps by
the Trainer: the real environments step, the updates the config asks for happen, their costs are finite,
and the replay buffers hold every stored transition in the model's dtypes (uint8 frames stay uint8).

The runs are cut to seconds by overrides (a short warm-up, few updates, one short evaluation episode);
what they check is the plumbing of the published settings, not learning (tests/test_learning.py
trains dqn_minatar to a target).
"""

from __future__ import annotations

import math
import pathlib
from dataclasses import dataclass
from fractions import Fraction
from typing import Dict, List, Sequence, Tuple

import numpy as np
import pytest

import parl
import parl.experiment.train.trainer as trainer_module
from parl.experience.helpers import ExpReplayHelper
from parl.experiment.config.robot_config import RobotConfig, load_config
from parl.experiment.train.trainer import Trainer

from toys import read_metrics

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "examples" / "configs"
#: Every run: no periodic evaluation or checkpoint, one evaluation episode at the end.
SHORT = (
    "evaluation.every_steps=null",
    "evaluation.episodes=1",
    "evaluation.final_episodes=1",
    "checkpoint.every_minutes=null",
)


@dataclass
class Run:
    """What a short run left: the Trainer's result, the manager, the metrics and the replay buffers."""

    config: RobotConfig
    result: Dict[str, object]
    manager: parl.Manager
    scalars: Dict[str, List[Tuple[int, float]]]

    @property
    def replay_helpers(self) -> List[ExpReplayHelper]:
        """Each training agent's replay helper of task RL."""
        return [agent.helpers["RL"] for agent in self.manager.agents]


def short_run(name: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, overrides: Sequence[str]) -> Run:
    """Train ``examples/configs/<name>.yaml`` with :data:`SHORT` and ``overrides``."""
    managers: List[parl.Manager] = []
    real_build = trainer_module.build_manager

    def keep_manager(config: RobotConfig) -> parl.Manager:
        managers.append(real_build(config))
        return managers[-1]

    monkeypatch.setattr(trainer_module, "build_manager", keep_manager)
    config = load_config(str(CONFIGS / f"{name}.yaml"), [*SHORT, f"log_dir={tmp_path}", "seed=1", *overrides])
    result = Trainer(config, progress=False).run()
    [manager] = managers
    return Run(config, result, manager, read_metrics(tmp_path))


def assert_costs_finite(run: Run, tags: Sequence[str]) -> None:
    """Each of ``tags`` (``task/RL/<cost>``) was written at least once, and every task scalar is finite."""
    for tag in tags:
        assert run.scalars[tag], f"no {tag} rows"
    for tag, rows in run.scalars.items():
        if tag.startswith("task/RL/"):
            assert all(math.isfinite(v) for _, v in rows), f"{tag}: {rows}"


def assert_replay_as_configured(run: Run, action_repeat: int, obs_dtype: type) -> None:
    """Every agent's buffer holds one transition per action step it took (n-step sums included) in the
    model's dtypes, and the task made the updates the helpers' ratio earned for the steps stored after
    warm-up."""
    helper_spec = run.config.tasks["RL"].helper.kwargs
    warmup, n_step = helper_spec["warmup_steps"], helper_spec.get("n_step", 1)
    ratio = Fraction(helper_spec["updates_per_step"]).limit_denominator()
    assert len(run.replay_helpers) == len(run.manager.agents) == run.config.agents
    assert sum(agent.total_steps for agent in run.manager.agents) == run.result["env_steps"]
    least_updates = most_updates = 0
    for agent, helper in zip(run.manager.agents, run.replay_helpers):
        batch = helper.buffer.sample(4, np.random.default_rng(0))
        assert batch.inputs["obs"].dtype == obs_dtype and batch.next_inputs["obs"].dtype == obs_dtype
        steps = agent.total_steps // action_repeat
        # n-step sums hold back the last n - 1 steps of an unfinished episode, and an agent stopped between
        # its env step and its store leaves that one step unstored.
        assert steps - n_step <= len(helper.buffer) <= steps
        # Updates are earned from the step that fills the buffer to warmup_steps on (n - 1 steps later with
        # n-step sums), the last one perhaps not yet sent when the run stopped.
        most_updates += math.ceil(max(0, steps - warmup + 1) * ratio)
        least_updates += max(0, math.ceil((steps - warmup + 1 - n_step) * ratio) - 1)
    assert least_updates <= run.result["updates"]["RL"] <= most_updates
    assert run.result["updates"]["RL"] >= 2


# -- MuJoCo -------------------------------------------------------------------------------------

#: A few hundred env steps, 100 of them random, then one update every 20 steps.
OFF_POLICY_SHORT = (
    "train.max_env_steps=400",
    "agent.random_steps=100",
    "tasks.RL.helper.warmup_steps=100",
    "tasks.RL.helper.updates_per_step=0.05",
    "env.kwargs.max_episode_steps=200",
)


@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Hopper-v5"])
@pytest.mark.parametrize(
    "name,costs", [("sac_mujoco", ["task/RL/critic_loss"]), ("td3_mujoco", ["task/RL/critic_loss"])]
)
def test_off_policy_mujoco_configs_step_learn_and_fill_their_replay(
    name: str, costs: List[str], env_id: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = short_run(name, tmp_path, monkeypatch, [f"env.id={env_id}", *OFF_POLICY_SHORT])
    assert run.result["stop_reason"] == "step budget"
    assert_costs_finite(run, costs)
    assert_replay_as_configured(run, action_repeat=1, obs_dtype=np.float32)
    assert math.isfinite(run.result["final_eval"])


@pytest.mark.parametrize("name", ["ppo_halfcheetah", "ppo_hopper"])
def test_ppo_mujoco_configs_update_once_per_segment(
    name: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = short_run(
        name,
        tmp_path,
        monkeypatch,
        ["train.max_env_steps=256", "tasks.RL.helper.sample_interval=64", "env.kwargs.max_episode_steps=200"],
    )
    assert run.result["stop_reason"] == "step budget"
    assert_costs_finite(run, ["task/RL/policy_loss", "task/RL/value_loss"])
    algorithm = run.manager.tasks["RL"].algorithm
    # Every row learned was an env step, and every update a segment of at most 64 of them.
    assert 0 < algorithm.learned_rows <= run.result["env_steps"]
    updates = run.result["updates"]["RL"]
    assert math.ceil(algorithm.learned_rows / 64) <= updates <= algorithm.learned_rows


# -- Atari and MinAtar -------------------------------------------------------------------------

#: Two agents, 300 action steps (1,200 frames) in all, episodes cut at 100 action steps, a warm-up of 50
#: per agent, then one batch of 16 every 16 action steps: about a dozen Nature-CNN updates.
DQN_ATARI_SHORT = (
    "train.max_env_steps=1200",
    "env.kwargs.max_episode_steps=100",
    "agent.epsilon.steps=400",
    "tasks.RL.helper.warmup_steps=50",
    "tasks.RL.helper.batch_size=16",
    "tasks.RL.helper.updates_per_step=0.0625",
    "tasks.RL.algorithm.target_update_interval=5",
)


@pytest.mark.parametrize("game", ["ALE/Pong-v5", "ALE/Breakout-v5"])
def test_dqn_atari_keeps_uint8_frames_and_updates_as_configured(
    game: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = short_run("dqn_atari", tmp_path, monkeypatch, [f"env.kwargs.env_id={game}", *DQN_ATARI_SHORT])
    assert run.result["stop_reason"] == "step budget"
    assert_costs_finite(run, ["task/RL/loss", "task/RL/q_mean"])
    assert_replay_as_configured(run, action_repeat=4, obs_dtype=np.uint8)
    assert run.config.tasks["RL"].model_sizes["num_actions"] == {"ALE/Pong-v5": 6, "ALE/Breakout-v5": 4}[game]


@pytest.mark.parametrize("game", ["ALE/Pong-v5", "ALE/Breakout-v5"])
def test_ppo_atari_learns_joined_segments_of_uint8_frames(
    game: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two agents, each sending two segments of 32 action steps (512 frames in all): every row is learned
    once, in updates that join the segments at hand (two of 64 rows; the last segments may be learned
    apart as the run drains them before it stops), in minibatches of 32 for one epoch (the Nature CNN
    costs about 0.1 s per 32 rows here)."""
    overrides = [
        f"env.kwargs.env_id={game}",
        "agents=2",
        "train.max_env_steps=512",
        "env.kwargs.max_episode_steps=100",
        "tasks.RL.helper.sample_interval=32",
        "tasks.RL.algorithm.minibatch_size=32",
        "tasks.RL.algorithm.epochs=1",
        "tasks.RL.algorithm.schedule_steps=256",
    ]
    run = short_run("ppo_atari", tmp_path, monkeypatch, overrides)
    assert run.result["stop_reason"] == "step budget"
    assert_costs_finite(run, ["task/RL/policy_loss", "task/RL/value_loss", "task/RL/entropy"])
    algorithm = run.manager.tasks["RL"].algorithm
    # The four segments sent by the budget are learned (the last ones drained before the stop); an
    # agent may have taken a step of a fifth, unsent segment as the run stopped.
    assert algorithm.learned_rows == 2 * 2 * 32
    assert 512 <= run.result["env_steps"] < 512 + 2 * 4 * 32
    assert 2 <= run.result["updates"]["RL"] <= 4
    assert algorithm.remaining() == 0.5  # the linear schedules: half of schedule_steps learned


def test_dqn_minatar_stores_n_step_transitions_of_binary_frames(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overrides = ["train.max_env_steps=600", "tasks.RL.helper.warmup_steps=100", "tasks.RL.helper.updates_per_step=0.1"]
    run = short_run("dqn_minatar", tmp_path, monkeypatch, overrides)
    assert run.result["stop_reason"] == "step budget"
    assert_costs_finite(run, ["task/RL/loss"])
    assert_replay_as_configured(run, action_repeat=1, obs_dtype=np.uint8)
    [buffer] = [helper.buffer for helper in run.replay_helpers]
    frames = buffer.sample(64, np.random.default_rng(0)).inputs["obs"]
    assert frames.shape == (64, 4, 10, 10) and set(np.unique(frames)) <= {0, 1}
