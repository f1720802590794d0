"""A multi-task robot: two ComputationTasks sharing parts of one model through ``Manager(shared=...)``.

- both tasks' updates change the shared parameters, and neither changes the other's own layers;
- each task keeps its own optimizer state for the shared parameters;
- linked tasks share their locks: a prediction of one never runs inside the other's optimizer step,
  and their training passes never overlap (without the shared locks both happen);
- an evaluator built from the settings owns fresh parameters;
- checkpoints saved and loaded in task order give the newest copy of the shared weights;
- bad ``shared`` groups are refused with the key path;
- the example's agent feeds both tasks, and its config builds the intended robot (the RL task of
  examples/configs/a2c_cartpole.yaml, sizes from the environment, the trunk and statistics shared).

The tasks here are the example config's (examples/multitask/cartpole.yaml), made small by overrides.
"""

from __future__ import annotations

import pathlib
import sys
import threading
from typing import Dict

import gymnasium as gym
import numpy as np
import paddle
import pytest

import parl
from parl.experiment.config.build import build_manager, task_settings
from parl.experiment.config.robot_config import RobotConfig, load_config

from toys import WAIT, TwoLayerModel

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
MULTITASK = EXAMPLES / "multitask"
sys.path.insert(0, str(MULTITASK))

from multitask_robot import MultitaskAgent, RewardModel  # noqa: E402

#: The example's robot with one hidden layer of 8 in both tasks.
SMALL = ("tasks.RL.model.hidden_sizes=[8]", "tasks.Aux.model.hidden_sizes=[8]")
#: Its layers and statistics: ``shared`` of examples/multitask/cartpole.yaml.
SHARED = {
    "trunk": {"RL": "model.actor_hidden", "Aux": "model.trunk"},
    "input_statistics": {"RL": "normalizer", "Aux": "normalizer"},
}
RNG = np.random.default_rng(0)
#: How long a call that must wait behind the other task's lock is watched before the lock is released.
HELD = 0.5


def example_config(*overrides: str) -> RobotConfig:
    return load_config(str(MULTITASK / "cartpole.yaml"), [*SMALL, *overrides])


def example_tasks(*overrides: str) -> Dict[str, parl.TaskSettings]:
    """The settings of the example's tasks ("RL", "Aux"), small, with ``overrides``."""
    config = example_config(*overrides)
    return {name: task_settings(config, name) for name in config.tasks}


def robot(*overrides: str, **extra: parl.TaskSettings) -> parl.Manager:
    """The tasks of the example's config with ``overrides``, sharing what its ``shared`` says, and ``extra`` tasks."""
    config = example_config(*overrides)
    tasks = {**{name: task_settings(config, name) for name in config.tasks}, **extra}
    return parl.Manager(tasks, shared=config.shared, thread_placement="os")


def batch(rows: int = 6, seed: int = 0) -> parl.Transition:
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((rows + 1, 4)).astype(np.float32)
    end = np.zeros((rows, 1), np.float32)
    end[-1] = 1.0
    return parl.Transition(
        inputs={"obs": obs[:-1]},
        next_inputs={"obs": obs[1:]},
        states={},
        next_states={},
        actions={"action": rng.integers(0, 2, (rows, 1)).astype(np.int64)},
        rewards={"reward": np.ones((rows, 1), np.float32)},
        next_episode_end=end,
        sequence_lengths=(rows,),
    )


def build_all(manager: parl.Manager) -> None:
    """Call every task once, so every layer has its parameters (they are made on first call)."""
    obs = {"obs": RNG.standard_normal((3, 4)).astype(np.float32)}
    for task in manager.tasks.values():
        task.predict(obs, {})


def layer_values(model: parl.Model) -> Dict[str, np.ndarray]:
    return model.get_weights()


def changed(before: Dict[str, np.ndarray], after: Dict[str, np.ndarray]) -> set:
    return {k for k in before if not np.array_equal(before[k], after[k])}


# -- shared parameters -------------------------------------------------------------


def test_the_shared_parameters_are_updated_by_both_tasks_and_the_heads_only_by_their_own() -> None:
    manager = robot()
    rl, aux = manager.tasks["RL"], manager.tasks["Aux"]
    assert aux.algorithm.model.trunk is rl.algorithm.model.actor_hidden
    assert aux.normalizer is rl.normalizer
    build_all(manager)
    trunk = {f"actor_hidden.{k}" for k in ("0.w", "0.b")}

    rl_before, aux_before = layer_values(rl.algorithm.model), layer_values(aux.algorithm.model)
    rl.learn(batch(seed=1))
    rl_after, aux_after = layer_values(rl.algorithm.model), layer_values(aux.algorithm.model)
    assert trunk <= changed(rl_before, rl_after)
    assert changed(aux_before, aux_after) == {"trunk.0.w", "trunk.0.b"}  # the head did not move

    aux.learn(batch(seed=2))
    rl_final, aux_final = layer_values(rl.algorithm.model), layer_values(aux.algorithm.model)
    assert changed(rl_after, rl_final) == trunk  # policy, critic and their layers did not move
    assert changed(aux_after, aux_final) == {"trunk.0.w", "trunk.0.b", "outcome.w", "outcome.b"}
    assert rl.update_steps == 1 and aux.update_steps == 1


def test_sharing_the_critic_layers_leaves_the_policy_to_the_rl_task() -> None:
    manager = robot("shared.trunk.RL=model.critic_hidden")
    rl, aux = manager.tasks["RL"], manager.tasks["Aux"]
    build_all(manager)
    before = layer_values(rl.algorithm.model)
    aux.learn(batch())
    assert changed(before, layer_values(rl.algorithm.model)) == {"critic_hidden.0.w", "critic_hidden.0.b"}


def test_each_task_keeps_its_own_optimizer_state_for_the_shared_parameters() -> None:
    manager = robot()
    rl, aux = manager.tasks["RL"], manager.tasks["Aux"]
    build_all(manager)
    rl.learn(batch(seed=1))
    aux.learn(batch(seed=2))
    shared_w = rl.algorithm.model.actor_hidden[0].params["w"].name
    rl_state = rl._optimizer.state_dict()
    aux.learn(batch(seed=3))
    # RMSProp's mean square of RL is not touched by Aux's Adam steps, which keep moments of their own.
    np.testing.assert_array_equal(
        rl._optimizer.state_dict()[f"{shared_w}_mean_square"], rl_state[f"{shared_w}_mean_square"]
    )
    aux_state = aux._optimizer.state_dict()
    assert np.abs(aux_state[f"{shared_w}_moment1"]).sum() > 0
    # Adam's bias correction counts Aux's own two steps on the shared weight (beta1 ** (steps + 1)), not RL's.
    np.testing.assert_allclose(aux_state[f"{shared_w}_beta1_pow"], [0.9**3], rtol=1e-6)


# -- locks -------------------------------------------------------------------------


class GatedAlgorithm(parl.Algorithm):
    """Predicts ``argmax(value)``; learns a regression. Can be held inside learn or inside the optimizer step."""

    def __init__(self, model_func) -> None:
        super().__init__(model_func, learning_rate=1e-2)
        self.hold_in_learn = False
        self.hold_in_update = False
        self.inside = threading.Event()
        self.gate = threading.Event()
        self.learn_entered = threading.Event()

    def _hold(self) -> None:
        self.inside.set()
        assert self.gate.wait(WAIT * 4)

    def predict(self, inputs, states, *, deterministic=False):
        return {"action": paddle.argmax(self.model.value(inputs["x"]), axis=1, keepdim=True)}, {}

    def learn(self, batch):
        self.learn_entered.set()
        if self.hold_in_learn:
            self._hold()
        error = self.model.value(batch.inputs["x"]).mean(axis=1, keepdim=True) - batch.rewards["reward"]
        return {"loss": (error * error).mean()}

    def after_update(self, update_step: int) -> None:  # runs inside the optimizer step's lock
        if self.hold_in_update:
            self._hold()


def toy_batch() -> parl.Transition:
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    return parl.Transition(
        inputs={"x": x},
        next_inputs={"x": x},
        states={},
        next_states={},
        actions={"action": np.zeros((4, 1), np.int64)},
        rewards={"reward": np.ones((4, 1), np.float32)},
        next_episode_end=np.zeros((4, 1), np.float32),
    )


def gated_tasks(linked: bool) -> Dict[str, parl.ComputationTask]:
    """Tasks A and B whose models share their first layer, with shared locks (from the Manager) or without."""
    if linked:
        settings = {n: parl.TaskSettings(lambda: GatedAlgorithm(TwoLayerModel)) for n in "AB"}
        manager = parl.Manager(
            settings, shared={"first": {"A": "model.first", "B": "model.first"}}, thread_placement="os"
        )
        tasks = manager.tasks
        assert manager.linked_tasks == [["A", "B"]]
    else:
        first = parl.layers.fc(4, act="tanh")
        tasks = {n: parl.ComputationTask(n, GatedAlgorithm(lambda: TwoLayerModel(first))) for n in "AB"}
    assert tasks["A"].algorithm.model.first is tasks["B"].algorithm.model.first
    assert tasks["A"].shares_locks_with(tasks["B"]) == linked
    for task in tasks.values():
        task.predict({"x": np.zeros((1, 3), np.float32)}, {})
        task.learn(toy_batch())  # makes the optimizers
    return tasks


def in_thread(fn) -> threading.Event:
    done = threading.Event()

    def run() -> None:
        fn()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done


@pytest.mark.parametrize("linked", [True, False], ids=["shared-locks", "own-locks"])
def test_a_prediction_of_one_task_never_runs_inside_the_other_tasks_update(linked: bool) -> None:
    tasks = gated_tasks(linked)
    b = tasks["B"].algorithm
    b.hold_in_update = True
    learning = in_thread(lambda: tasks["B"].learn(toy_batch()))
    assert b.inside.wait(WAIT)  # B is inside its optimizer step, the shared weights half-written
    predicting = in_thread(lambda: tasks["A"].predict({"x": np.zeros((2, 3), np.float32)}, {}))
    overlapped = predicting.wait(HELD if linked else WAIT)  # returns at once when it does not wait
    b.gate.set()
    assert learning.wait(WAIT) and predicting.wait(WAIT)
    # With the Manager's shared locks A waits for B's step; with locks of their own it reads mid-step.
    assert overlapped == (not linked)


@pytest.mark.parametrize("linked", [True, False], ids=["shared-locks", "own-locks"])
def test_training_passes_of_linked_tasks_never_overlap(linked: bool) -> None:
    tasks = gated_tasks(linked)
    a, b = tasks["A"].algorithm, tasks["B"].algorithm
    a.hold_in_learn = b.hold_in_learn = True
    learning_b = in_thread(lambda: tasks["B"].learn(toy_batch()))
    assert b.inside.wait(WAIT)  # B's forward pass is under way: its gradients will land on the shared layer
    a.learn_entered.clear()
    learning_a = in_thread(lambda: tasks["A"].learn(toy_batch()))
    overlapped = a.learn_entered.wait(HELD if linked else WAIT)
    # Let the passes finish one after the other: two unsynchronised passes over a shared layer race on its
    # gradient (Paddle may free it under the other pass), which is what the shared locks exist to prevent.
    b.gate.set()
    assert learning_b.wait(WAIT)
    a.gate.set()
    assert learning_a.wait(WAIT)
    assert overlapped == (not linked)


def test_only_tasks_linked_by_a_group_share_locks() -> None:
    manager = robot(Other=example_tasks()["RL"])
    rl, aux, other = (manager.tasks[n] for n in ("RL", "Aux", "Other"))
    assert manager.linked_tasks == [["RL", "Aux"]]
    assert rl.shares_locks_with(aux) and not rl.shares_locks_with(other)
    assert other.algorithm.model.actor_hidden is not rl.algorithm.model.actor_hidden


# -- evaluators and checkpoints ------------------------------------------------------


def test_an_evaluator_built_from_the_settings_owns_fresh_parameters() -> None:
    tasks = example_tasks()
    settings = tasks["RL"]
    manager = parl.Manager(tasks, shared=SHARED, thread_placement="os")
    rl, aux = manager.tasks["RL"], manager.tasks["Aux"]
    build_all(manager)
    rl.learn(batch())
    evaluator = settings.make_task("eval")
    evaluator.set_algorithm_weights(rl.algorithm_weights())
    live = rl.algorithm.model.actor_hidden[0].params["w"]
    assert evaluator.algorithm.model.actor_hidden[0].params["w"] is not live
    assert evaluator.normalizer is not rl.normalizer
    obs = {"obs": RNG.standard_normal((5, 4)).astype(np.float32)}
    np.testing.assert_array_equal(
        evaluator.predict(obs, {}, deterministic=True)[0]["action"],
        rl.predict(obs, {}, deterministic=True)[0]["action"],
    )
    # An update of Aux moves the live trunk, not the evaluator's copy; a copy into the evaluator moves nothing live.
    copied = evaluator.algorithm_weights()
    aux.learn(batch(seed=5))
    assert not np.array_equal(live.numpy(), copied["model"]["actor_hidden.0.w"])
    np.testing.assert_array_equal(
        evaluator.algorithm_weights()["model"]["actor_hidden.0.w"], copied["model"]["actor_hidden.0.w"]
    )
    before = live.numpy().copy()
    evaluator.set_algorithm_weights(copied)
    np.testing.assert_array_equal(live.numpy(), before)


def test_checkpoints_saved_and_loaded_in_task_order_restore_the_newest_shared_weights(tmp_path) -> None:
    manager = robot()
    rl, aux = manager.tasks["RL"], manager.tasks["Aux"]
    build_all(manager)
    rl.learn(batch(seed=1))
    aux.learn(batch(seed=2))
    rl.save(str(tmp_path / "RL.ckpt"))
    aux.learn(batch(seed=3))  # an update between the two saves: the files hold different trunks
    aux.save(str(tmp_path / "Aux.ckpt"))
    live = {n: t.algorithm_weights() for n, t in manager.tasks.items()}

    restored = robot()
    for name in ("RL", "Aux"):  # the Manager's task order, as checkpoints save and load them
        restored.tasks[name].load(str(tmp_path / f"{name}.ckpt"))
    for name, task in restored.tasks.items():
        weights = task.algorithm_weights()
        for key, values in live[name]["model"].items():
            np.testing.assert_array_equal(weights["model"][key], values, err_msg=f"{name} {key}")
    assert restored.tasks["Aux"].algorithm.model.trunk is restored.tasks["RL"].algorithm.model.actor_hidden


# -- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shared, message",
    [
        ({"trunk": {"RL": "model.actor_hidden"}}, "shared.trunk: expected a mapping of at least two"),
        ({"trunk": {"RL": "model.actor_hidden", "Nope": "model.trunk"}}, "shared.trunk: unknown task 'Nope'"),
        ({"trunk": {"RL": "model.actor_hidden", "Aux": "model.torso"}}, "shared.trunk.Aux: 'model.torso'"),
        ({"trunk": {"RL": "model.actor_hidden", "Aux": "trunk"}}, "shared.trunk.Aux: expected 'normalizer' or"),
        ({"trunk": {"RL": "model.actor_hidden", "Aux": "model.outcome"}}, "shared.trunk.Aux: layers"),
        ({"trunk": {"RL": "model.actor_hidden", "Aux": "normalizer"}}, "shared.trunk.Aux: 'normalizer' can only be"),
        ({"stats": {"RL": "normalizer", "Aux": "model.trunk"}}, "shared.stats.Aux: a normalizer can only"),
    ],
)
def test_bad_groups_are_refused_with_their_key_path(shared, message: str) -> None:
    tasks = example_tasks()
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        parl.Manager(tasks, shared=shared, thread_placement="os")


def test_parts_of_different_structure_are_refused() -> None:
    with pytest.raises(ValueError, match=r"shared.trunk.Aux: layers \[\('0', 'FC'\), \('1', 'FC'\)\] differ"):
        parl.Manager(example_tasks("tasks.Aux.model.hidden_sizes=[8, 8]", "shared={}"), shared=SHARED)


def test_a_normalizer_is_shared_only_between_tasks_that_normalize() -> None:
    tasks = example_tasks("tasks.RL.transforms.normalize_inputs=false", "shared={}")
    with pytest.raises(ValueError, match="shared.input_statistics.RL: task 'RL' does not normalize inputs"):
        parl.Manager(tasks, shared=SHARED)


# -- the example ---------------------------------------------------------------------


def test_the_example_agent_feeds_both_tasks() -> None:
    manager = robot()
    for i in range(2):
        manager.add_agent(
            MultitaskAgent(gym.make("CartPole-v1", max_episode_steps=12), seed=i, num_games=3),
            {"RL": parl.OnPolicyHelper(sample_interval=4), "Aux": parl.OnPolicyHelper(sample_interval=4)},
        )
    manager.start()
    episodes = manager.join(timeout=WAIT * 6)
    assert not manager.errors
    assert len(episodes) == 6
    assert manager.tasks["RL"].update_steps > 0 and manager.tasks["Aux"].update_steps > 0


def test_the_config_builds_the_rl_task_of_a2c_cartpole_beside_an_aux_task_on_its_trunk() -> None:
    config = load_config(str(MULTITASK / "cartpole.yaml"))
    baseline = load_config(str(EXAMPLES / "configs" / "a2c_cartpole.yaml"))
    assert list(config.tasks) == ["RL", "Aux"]  # RL first: its parts are the ones kept
    assert config.tasks["RL"].to_dict() == baseline.tasks["RL"].to_dict()  # the baseline of compare.py
    assert (config.agents, config.env.id) == (baseline.agents, baseline.env.id)
    assert config.evaluation == baseline.evaluation and config.train.target_return == baseline.train.target_return
    assert config.agent.cls is MultitaskAgent and config.shared == SHARED
    env = gym.make(config.env.id)
    sizes = {"obs_dim": env.observation_space.shape[0], "num_actions": int(env.action_space.n)}
    assert all(task.model_sizes == sizes for task in config.tasks.values())  # none stated in the config
    manager = build_manager(config)
    rl, aux = manager.tasks["RL"], manager.tasks["Aux"]
    assert isinstance(aux.algorithm.model, RewardModel)
    assert aux.algorithm.model.trunk is rl.algorithm.model.actor_hidden and aux.normalizer is rl.normalizer
    assert manager.linked_tasks == [["RL", "Aux"]]
    assert all(isinstance(agent, MultitaskAgent) for agent in manager.agents) and len(manager.agents) == 8
    assert set(manager.agents[0].helpers) == {"RL", "Aux"}
