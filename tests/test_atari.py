"""The Atari example: the Mnih et al. network on uint8 frames, gymnasium's preprocessing, and a short
run of examples/configs/dqn_atari.yaml on the real ALE, by the Trainer, that steps, learns and writes
the trainer's scalars."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

import parl
import parl.experiment.train.trainer as trainer_module
from parl.algorithms import DQN
from parl.core.specs import check_sample, normalize_specs
from parl.experiment.config.robot_config import RobotConfig, load_config
from parl.experiment.train.trainer import Trainer
from parl.models import AtariActorCritic, MinAtarQModel
from parl.models.atari_q_model import AtariQModel
from parl.utils import obs_inputs
from parl.utils.action_repeat import TIME_STEPS

from tensorboard_events import read_scalar_events
from toys import read_metrics

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "configs" / "dqn_atari.yaml"

# A run of 900 action steps (3,600 env steps, frames): 2 agents, episodes cut at 150 action steps (so at
# least 4 end), ~40 updates of 16 transitions, one evaluation episode at the end. The trainer counts
# steps live, so the run stops soon after the budget.
REPEAT = 4
RUN_STEPS = 900 * REPEAT
EPISODE_STEPS = 150
SHORT_RUN = (
    f"train.max_env_steps={RUN_STEPS}",
    f"env.kwargs.max_episode_steps={EPISODE_STEPS}",
    "agent.epsilon.steps=2000",
    "tasks.RL.helper.warmup_steps=100",
    "tasks.RL.helper.batch_size=16",
    "tasks.RL.helper.updates_per_step=0.0625",
    "tasks.RL.algorithm.target_update_interval=10",
    "evaluation.every_steps=null",
    "evaluation.episodes=1",
    "checkpoint.every_minutes=null",
)


def short_run(tmp_path: Path, *overrides: str) -> RobotConfig:
    return load_config(str(CONFIG), [*SHORT_RUN, f"log_dir={tmp_path}", *overrides])


def frames(batch: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(batch, 4, 84, 84), dtype=np.uint8)


def reference_q(weights: Dict[str, np.ndarray], obs: np.ndarray) -> np.ndarray:
    """The paper's network written out with paddle's functional ops, on pixels scaled to [0, 1]."""
    w = {k: paddle.to_tensor(v) for k, v in weights.items()}
    h = paddle.to_tensor(obs.astype(np.float32) / 255.0)
    for i, stride in enumerate((4, 2, 1)):
        h = F.relu(F.conv2d(h, w[f"conv.{i}.w"], w[f"conv.{i}.b"], stride))
    h = F.relu(paddle.flatten(h, 1) @ w["hidden.w"] + w["hidden.b"])
    return (h @ w["q.w"] + w["q.b"]).numpy()


# -- the model ----------------------------------------------------------------------------------


def test_the_model_maps_uint8_frame_stacks_to_one_q_value_per_action() -> None:
    model = AtariQModel(num_actions=6)
    obs = frames(3)
    q = model.value({"obs": paddle.to_tensor(obs)})
    assert q.shape == [3, 6] and q.dtype == paddle.float32
    [spec] = normalize_specs(model.get_input_specs(), "AtariQModel")
    assert (spec.name, spec.shape, spec.dtype) == ("obs", (4, 84, 84), np.dtype(np.uint8))
    weights = model.get_weights()
    assert weights["conv.0.w"].shape == (32, 4, 8, 8)
    assert weights["conv.1.w"].shape == (64, 32, 4, 4)
    assert weights["conv.2.w"].shape == (64, 64, 3, 3)
    assert weights["hidden.w"].shape == (64 * 7 * 7, 512)
    assert weights["q.w"].shape == (512, 6)
    np.testing.assert_allclose(q.numpy(), reference_q(weights, obs), rtol=1e-4, atol=1e-5)
    # Float pixel values (0..255) give the same Q-values: scaling happens inside the model.
    as_float = model.value({"obs": paddle.to_tensor(obs.astype(np.float32))})
    np.testing.assert_allclose(as_float.numpy(), q.numpy(), rtol=1e-5, atol=1e-6)


def test_dqn_predicts_and_learns_on_uint8_batches() -> None:
    task = parl.ComputationTask("RL", DQN(lambda: AtariQModel(num_actions=4), learning_rate=1e-3))
    actions, _ = task.predict({"obs": frames(5)}, {})
    assert actions["action"].shape == (5, 1) and actions["action"].dtype == np.int64
    assert ((actions["action"] >= 0) & (actions["action"] < 4)).all()
    before = task.algorithm_weights()["model"]
    batch = parl.Transition(
        inputs={"obs": frames(8, seed=1)},
        next_inputs={"obs": frames(8, seed=2)},
        states={},
        next_states={},
        actions={"action": np.arange(8, dtype=np.int64).reshape(8, 1) % 4},
        rewards={"reward": np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1)},
        next_episode_end=np.zeros((8, 1), np.float32),
    )
    costs = task.learn(batch)
    assert math.isfinite(costs["loss"]) and task.update_steps == 1
    after = task.algorithm_weights()["model"]
    assert all(not np.array_equal(before[k], after[k]) for k in ("conv.0.w", "conv.2.w", "hidden.w", "q.w"))


def test_the_model_rejects_frames_too_small_for_its_convolutions() -> None:
    with pytest.raises(ValueError, match="screen_size"):
        AtariQModel(num_actions=6, screen_size=32)
    with pytest.raises(ValueError, match="screen_size 2"):
        MinAtarQModel(num_actions=3, frames=4, screen_size=2)


def test_the_actor_critic_puts_the_q_models_torso_under_a_policy_and_a_value_head() -> None:
    model = AtariActorCritic(num_actions=6)
    obs = frames(3)
    dist, value, states = model.step({"obs": paddle.to_tensor(obs)}, {})
    assert dist.logits.shape == [3, 6] and value.shape == [3, 1] and states == {}
    weights = model.get_weights()
    q_model = AtariQModel(num_actions=6)
    q_model.value({"obs": paddle.to_tensor(obs)})
    torso = {k: v.shape for k, v in weights.items() if k.startswith(("conv.", "hidden."))}
    assert torso == {k: v.shape for k, v in q_model.get_weights().items() if k.startswith(("conv.", "hidden."))}
    # The acting path (fast layer callables) computes the same policy as the plain one.
    acting, _, _ = model.compile_policy()({"obs": paddle.to_tensor(obs)}, {})
    np.testing.assert_allclose(acting.logits.numpy(), dist.logits.numpy(), rtol=1e-5, atol=1e-6)
    [spec] = normalize_specs(model.get_input_specs(), "AtariActorCritic")
    assert (spec.shape, spec.dtype) == ((4, 84, 84), np.dtype(np.uint8))


def test_minatars_model_reads_binary_channels_unscaled() -> None:
    model = MinAtarQModel(num_actions=3, frames=4)
    obs = np.random.default_rng(0).integers(0, 2, size=(5, 4, 10, 10), dtype=np.uint8)
    q = model.value({"obs": paddle.to_tensor(obs)})
    w = {k: paddle.to_tensor(v) for k, v in model.get_weights().items()}
    assert w["conv.0.w"].shape == [16, 4, 3, 3] and w["hidden.w"].shape == [16 * 8 * 8, 128]
    h = F.relu(F.conv2d(paddle.to_tensor(obs.astype(np.float32)), w["conv.0.w"], w["conv.0.b"]))
    h = F.relu(paddle.flatten(h, 1) @ w["hidden.w"] + w["hidden.b"])
    np.testing.assert_allclose(q.numpy(), (h @ w["q.w"] + w["q.b"]).numpy(), rtol=1e-4, atol=1e-5)


# -- preprocessing ------------------------------------------------------------------------------


def test_the_config_takes_the_network_sizes_from_the_preprocessed_game() -> None:
    config = load_config(str(CONFIG))
    assert config.tasks["RL"].model.cls is AtariQModel and "num_actions" not in config.tasks["RL"].model.kwargs
    assert config.tasks["RL"].model_sizes == {"frames": 4, "screen_size": 84, "num_actions": 6}  # Pong's minimal set
    assert config.agent.cls is parl.utils.EpsilonGreedyAgent and config.agents == 2


def test_preprocessing_gives_uint8_stacks_of_four_84x84_frames_that_pass_the_spec_unconverted(tmp_path: Path) -> None:
    env = short_run(tmp_path).env.make()
    try:
        assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
        obs, _ = env.reset(seed=0)
        for _ in range(10):
            previous, (obs, *_) = obs, env.step(env.action_space.sample())
            assert not np.shares_memory(previous, obs)  # stored inputs and next inputs never alias
        inputs = obs_inputs(obs)["obs"]
        assert inputs.dtype == np.uint8 and inputs.shape == (4, 84, 84)
        assert inputs.max() > inputs.min()  # a real picture, not a blank frame
        [spec] = normalize_specs(AtariQModel(num_actions=6).get_input_specs(), "AtariQModel")
        assert check_sample(spec, inputs, "input") is inputs  # no per-step conversion or copy
    finally:
        env.close()


def test_episodes_can_be_cut_to_a_number_of_agent_steps(tmp_path: Path) -> None:
    env = short_run(tmp_path, "env.kwargs.max_episode_steps=7").env.make()
    try:
        env.reset(seed=0)
        ends = [env.step(0)[2:4] for _ in range(7)]
        assert ends[-1] == (False, True) and not any(any(end) for end in ends[:-1])
    finally:
        env.close()


def test_the_action_repeat_observes_what_gymnasiums_frame_skip_observed(tmp_path: Path) -> None:
    """parl's ActionRepeat between AtariPreprocessing (a frame per time step) and the resize gives the
    observations, rewards and episode ends of AtariPreprocessing repeating each action itself."""
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    reference = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.25)
    reference = AtariPreprocessing(
        reference, noop_max=30, frame_skip=REPEAT, screen_size=84, terminal_on_life_loss=False, grayscale_obs=True
    )
    reference = FrameStackObservation(reference, 4)
    env = load_config(str(CONFIG), [f"log_dir={tmp_path}"]).env.make()
    try:
        first, _ = env.reset(seed=3)
        np.testing.assert_array_equal(first, reference.reset(seed=3)[0])
        rng = np.random.default_rng(0)
        for _ in range(300):
            action = int(rng.integers(6))
            obs, reward, terminated, truncated, info = env.step(action)
            expected = reference.step(action)
            assert (reward, terminated, truncated) == tuple(expected[1:4])
            np.testing.assert_array_equal(obs, expected[0])
            assert info[TIME_STEPS] == REPEAT
    finally:
        env.close()
        reference.close()


def test_replay_keeps_the_games_frame_stacks_once_per_frame_and_gives_them_back_exactly(tmp_path: Path) -> None:
    """Real preprocessed Pong through a frame-store buffer and a plain one: the same transitions come back,
    episode starts included, at about one frame per transition."""
    env = short_run(tmp_path, "env.kwargs.max_episode_steps=25").env.make()
    [obs_spec] = normalize_specs(AtariQModel(num_actions=6).get_input_specs(), "AtariQModel")
    specs = ([obs_spec], [], normalize_specs([("action", dict(shape=[1], dtype="int64"))], "a"), [])
    capacity = 100
    frames_buffer = parl.ReplayBuffer(capacity, *specs, frame_inputs=["obs"])
    plain = parl.ReplayBuffer(capacity, *specs)
    rng = np.random.default_rng(0)
    try:
        obs, _ = env.reset(seed=0)
        episodes = 1
        for _ in range(150):
            action = int(rng.integers(6))
            next_obs, _, terminated, truncated, _ = env.step(action)
            transition = parl.Transition(
                inputs={"obs": obs},
                next_inputs={"obs": next_obs},
                actions={"action": np.array([action], np.int64)},
                rewards={},
                next_episode_end=np.array([float(terminated)], np.float32),
                states={},
                next_states={},
            )
            frames_buffer.add(transition)
            plain.add(transition)
            obs = next_obs
            if terminated or truncated:
                obs, _ = env.reset()
                episodes += 1
    finally:
        env.close()
    assert episodes >= 5  # the ring holds several episode starts
    slots = np.arange(capacity)
    kept, expected = frames_buffer.gather(slots), plain.gather(slots)
    for field in ("inputs", "next_inputs"):
        assert getattr(kept, field)["obs"].dtype == np.uint8
        np.testing.assert_array_equal(getattr(kept, field)["obs"], getattr(expected, field)["obs"])
    store = frames_buffer.frame_stores["obs"]
    assert store.frames_in_use <= capacity + episodes + store.window


# -- the short run ------------------------------------------------------------------------------


def test_a_short_run_steps_the_game_learns_and_writes_the_scalars(tmp_path: Path, monkeypatch) -> None:
    initial: Dict[str, np.ndarray] = {}
    real_build_manager = trainer_module.build_manager

    def spy(config: RobotConfig) -> parl.Manager:
        manager = real_build_manager(config)
        task = manager.tasks["RL"]
        task.predict({"obs": frames(1)}, {})  # builds the network, so its first weights can be kept
        initial.update(task.algorithm_weights()["model"])
        return manager

    monkeypatch.setattr(trainer_module, "build_manager", spy)
    config = short_run(tmp_path)
    trainer = Trainer(config, progress=False)
    result = trainer.run()
    assert result["stop_reason"] == "step budget"
    assert RUN_STEPS <= result["env_steps"] <= RUN_STEPS + config.agents * EPISODE_STEPS * REPEAT
    assert result["updates"]["RL"] >= 10
    assert -21 <= result["last_eval"] <= 21  # one real game of Pong, cut at 150 steps
    final = trainer.manager.tasks["RL"].algorithm_weights()["model"]
    assert set(final) == set(initial)
    assert all(not np.array_equal(initial[k], final[k]) for k in final), "some weights never changed"

    scalars = read_metrics(tmp_path)
    returns = [v for _, v in scalars["episode/reward"]]
    lengths = [v for _, v in scalars["episode/length"]]
    action_steps = [v for _, v in scalars["episode/action_steps"]]
    assert len(returns) >= 4 and all(-21 <= r <= 21 for r in returns)
    assert all(n == EPISODE_STEPS for n in action_steps)  # Pong outlasts 150 action steps: truncated
    assert all(n == EPISODE_STEPS * REPEAT for n in lengths)  # of 4 frames each
    losses = [v for _, v in scalars["task/RL/loss"]]
    assert losses and all(math.isfinite(v) and v >= 0 for v in losses)
    assert scalars["task/RL/q_mean"] and all(math.isfinite(v) for _, v in scalars["task/RL/q_mean"])
    rates = [v for _, v in scalars["robot/env_steps_per_second"]]
    assert max(rates) > 0 and min(rates) >= 0  # the last row may follow the previous one with no step between
    [(step, value)] = scalars["eval/mean_return"]
    assert value == result["last_eval"] and step == result["env_steps"]
    steps = [s for tag in scalars for s, _ in scalars[tag]]
    assert max(steps) == result["env_steps"]
    assert {tag for _, tag, _ in read_scalar_events(tmp_path)} == set(scalars)  # TensorBoard holds the same tags
