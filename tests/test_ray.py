"""Placement "ray" beyond the placement contract: weight broadcasts and their versions, replay shards
and what they store, the evaluation actor, a lost worker started again, Ctrl-C, and Ray staying
optional. The tests that need Ray run on the session's local cluster (tests/conftest.py's
``ray_cluster``: a head and two more nodes of one CPU each, on 127.0.0.1)."""

from __future__ import annotations

import dataclasses
import io
import ipaddress
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import pytest

import parl
from parl.core.specs import Spec
from parl.experience.helpers import ExpReplayHelper
from parl.runtime.ray.broadcast import Broadcaster, writable_weights
from parl.runtime.ray.replay import (
    REPLAY_KNOBS,
    Allowance,
    ReplayLearner,
    ReplaySettings,
    ReplayShard,
    is_replay_helper,
)
from parl.serving.transforms import InputNormalizer

from toys import (
    WAIT,
    CountEnv,
    IdReportingAgent,
    ReportingEchoAgent,
    echo_algorithm_func,
    replay_sample,
    running,
    wait_for,
)

if TYPE_CHECKING:
    from parl.experiment.config.robot_config import RobotConfig
    from parl.runtime.ray.evaluation import RayEvaluation

ROOT = Path(__file__).resolve().parents[1]


# -- broadcasts ----------------------------------------------------------------------------------


class FakeRay:
    """Counts ``put`` calls; an object ref is the object itself."""

    def __init__(self) -> None:
        self.puts: List[object] = []

    def put(self, value: object) -> object:
        self.puts.append(value)
        return value


def test_a_broadcast_is_one_put_of_a_snapshot_numbered_from_0_when_enough_updates_passed() -> None:
    task = parl.ComputationTask("T", echo_algorithm_func()())
    task.build_layers()
    ray = FakeRay()
    broadcaster = Broadcaster(ray, {"T": task})
    heard: List[int] = []
    broadcaster.listen(lambda: heard.append(broadcaster.version("T")))
    assert broadcaster.version("T") == 0 and len(ray.puts) == 1
    (version, (weights,)) = broadcaster.current()["T"]
    assert version == 0 and weights.keys() == task.algorithm_weights().keys()

    assert not broadcaster.after_update("T", every=3)  # no update yet
    task.update_steps += 2
    assert not broadcaster.after_update("T", every=3) and len(ray.puts) == 1
    task.update_steps += 1
    assert broadcaster.after_update("T", every=3)
    assert broadcaster.version("T") == 1 and len(ray.puts) == 2 and heard == [1]
    task.update_steps += 1
    assert broadcaster.after_update("T", every=1) and broadcaster.version("T") == 2 and heard == [1, 2]


def test_weights_from_the_object_store_are_copied_where_read_only() -> None:
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    out = writable_weights({"model": {"w": frozen, "b": np.zeros(2)}})
    assert out["model"]["w"].flags.writeable and np.array_equal(out["model"]["w"], frozen)


# -- replay shards -------------------------------------------------------------------------------


ECHO_TASK = parl.ComputationTask("T", echo_algorithm_func()())
REPLAY_SPECS = ECHO_TASK.specs


def helper_with(**kwargs: object) -> ExpReplayHelper:
    return ExpReplayHelper(capacity=100, batch_size=4, warmup_steps=10, updates_per_step=0.5, **kwargs)


def test_replay_settings_come_from_the_agents_helpers_and_must_agree() -> None:
    settings = ReplaySettings.from_helpers("RL", [helper_with(seed=i) for i in range(4)], shards=2)
    # The memory of per-agent buffers, split over the shards; the warm-up of all agents.
    assert (settings.capacity, settings.warmup_steps, settings.batch_size) == (200, 40, 4)
    with pytest.raises(ValueError, match="task 'RL' needs ExpReplayHelpers on every agent, got .*OnPolicy"):
        ReplaySettings.from_helpers("RL", [helper_with(), parl.OnPolicyHelper()], shards=2)
    with pytest.raises(ValueError, match="ExpReplayHelpers of task 'RL' have different settings"):
        ReplaySettings.from_helpers("RL", [helper_with(), helper_with(n_step=3)], shards=2)


def test_replay_settings_read_what_a_helper_keeps_of_its_replay_not_its_class() -> None:
    helper = helper_with(n_step=3)
    kept = {name: getattr(helper, name) for name in REPLAY_KNOBS}
    own = SimpleNamespace(**kept, store_only=lambda writer: None)  # a helper of another class, the same replay
    assert is_replay_helper(own) and not is_replay_helper(parl.OnPolicyHelper())
    assert not is_replay_helper(SimpleNamespace(store_only=lambda writer: None))  # no replay settings
    assert ReplaySettings.from_helpers("RL", [own, helper], shards=1) == ReplaySettings.from_helpers(
        "RL", [helper, helper], shards=1
    )


def test_a_shard_stores_rows_and_samples_them_with_slots_when_prioritized() -> None:
    settings = ReplaySettings.from_helpers("RL", [helper_with(prioritized=True)], shards=1)
    shard = ReplayShard(REPLAY_SPECS, settings, seed=0)
    assert shard.sample(4, 2) == ([], 0, shard.instance)  # nothing held: no batch
    rows = replay_sample(3, rows=6)
    assert shard.add(rows) == 6
    batches, size, _ = shard.sample(4, 3)
    assert size == 6 and len(batches) == 3
    batch, slots = batches[0]
    assert batch.batch_size == 4 and batch.weights.shape == (4, 1) and slots.shape == (4,)
    shard.update_priorities(slots, np.full(4, 5.0))
    assert np.all(shard.buffer.priorities(slots) > 1.0)


def test_a_shard_keeps_frame_stacks_as_its_helpers_say() -> None:
    frame_specs = dataclasses.replace(REPLAY_SPECS, inputs=[Spec("obs", [4, 6, 7], "uint8")])
    settings = ReplaySettings.from_helpers("RL", [helper_with()], shards=1)
    assert settings.frame_store == "auto"
    assert list(ReplayShard(frame_specs, settings, seed=0).buffer.frame_stores) == ["obs"]
    plain = ReplaySettings.from_helpers("RL", [helper_with(frame_store=False)], shards=1)
    assert list(ReplayShard(frame_specs, plain, seed=0).buffer.frame_stores) == []
    with pytest.raises(ValueError, match="ExpReplayHelpers of task 'RL' have different settings"):
        ReplaySettings.from_helpers("RL", [helper_with(), helper_with(frame_store=False)], shards=2)


class Collect:
    """A writer that keeps what a helper hands it."""

    def __init__(self) -> None:
        self.rows: List[parl.Transition] = []
        self.flushes = 0

    def add(self, transition: parl.Transition) -> None:
        self.rows.append(transition)

    def flush(self) -> None:
        self.flushes += 1


def test_a_store_only_helper_hands_on_exactly_the_n_step_rows_its_own_buffer_would_keep_and_never_learns() -> None:
    """Transforms before storage (n-step sums) are the helper's, made once in the agent; the rows are
    raw otherwise (normalization and reward scaling happen at learn, after sampling)."""
    kept, sent = helper_with(n_step=3, gamma=0.9), helper_with(n_step=3, gamma=0.9)

    wrapper = parl.ComputationWrapper(ECHO_TASK)  # never started: the helpers only read its specs
    for helper in (kept, sent):
        helper.bind(wrapper.communicator(0))
    writer = Collect()
    sent.store_only(writer)
    for step in range(7):
        for helper in (kept, sent):
            obs = np.array([step, 0.0], np.float32)
            helper.store_data({"obs": obs}, {"action": np.array([1])}, float(step), {"obs": obs + 1}, step == 6, False)
            assert sent.learn() is None
    assert len(writer.rows) == len(kept.buffer) == 7 and writer.flushes == 1  # flushed at the episode's end
    stored = kept.buffer.gather(np.arange(7))
    for i, row in enumerate(writer.rows):
        assert np.array_equal(row.inputs["obs"], stored.inputs["obs"][i])  # raw observations
        assert np.allclose(row.rewards["reward"], stored.rewards["reward"][i])  # the same n-step sums
        assert np.array_equal(np.reshape(row.bootstrap_steps, 1), stored.bootstrap_steps[i])


def test_the_learner_earns_updates_as_a_helper_does_and_lets_writers_lead_by_a_bounded_margin() -> None:
    settings = ReplaySettings.from_helpers("RL", [helper_with(seed=i) for i in range(2)], shards=1)
    learner = ReplayLearner(
        None, [], settings, stored=lambda: 0, after_update=lambda: None, on_error=lambda e: None, seed=0
    )
    # ceil((stored - warmup + 1) * 0.5) from the 20th row (2 agents x 10 warm-up steps), as the helper counts.
    assert [learner.earned(n) for n in (0, 19, 20, 21, 22, 23)] == [0, 0, 1, 1, 2, 2]
    learner.updates = 10
    allowed = learner.allowed_rows()
    assert learner.earned(allowed) >= 10 + 64 > learner.earned(allowed - 2)  # AHEAD_UPDATES beyond those learned
    allowance = Allowance({"RL": 5})
    allowance.take("RL", 5)
    allowance.raise_to({"RL": 8})
    allowance.take("RL", 3)
    assert allowance.sent == {"RL": 8}
    allowance.close()
    allowance.take("RL", 100)  # a closed allowance waits no more


# -- on the cluster ------------------------------------------------------------------------------


def ray_manager(
    agents: int,
    games: int,
    length: int = 4,
    *,
    task: Optional[parl.TaskSettings] = None,
    helper: Callable[[int], parl.AgentHelper] = lambda code: parl.OnPolicyHelper(),
    **options: object,
) -> parl.Manager:
    """A robot on Ray (two workers) of ``agents`` echo agents playing ``games`` CountEnv episodes of ``length``
    steps, agent ``code`` with ``helper(code)``; ``task`` (default: the echo algorithm's) is task "T", and
    ``options`` are the RayOptions."""
    manager = parl.Manager(
        {"T": task or parl.TaskSettings(echo_algorithm_func())},
        placement=parl.RayOptions(workers=2, **options),
        thread_placement="os",
    )
    for code in range(agents):
        manager.add_agent(ReportingEchoAgent(CountEnv(code, length=length), num_games=games), {"T": helper(code)})
    return manager


def replay_helper(code: int) -> parl.ExpReplayHelper:
    """Agent ``code``'s helper in the robots whose replay lives in Ray's shards."""
    return parl.ExpReplayHelper(capacity=200, batch_size=8, warmup_steps=5, updates_per_step=0.5, seed=code)


def test_every_on_policy_update_is_broadcast_and_synchronous_segments_are_never_stale(ray_cluster) -> None:
    task = parl.TaskSettings(
        echo_algorithm_func(), batching=parl.Batching(min_batchsize=4, max_batchsize=4, training_timeout=30.0)
    )
    manager = ray_manager(agents=4, games=3, task=task, max_staleness=0)
    manager.start()
    episodes = manager.join(timeout=WAIT * 6)
    runner = manager.runner
    assert manager.errors == [] and len(episodes) == 12
    assert all(e["mismatches"] == 0 for e in episodes)
    assert sorted(e["learned"] for e in episodes) == [1] * 4 + [2] * 4 + [3] * 4  # each episode's segment learned
    task = manager.tasks["T"]
    assert task.update_steps == 3  # one update per round of the 4 agents' segments
    assert runner._broadcaster.version("T") == task.update_steps  # every update broadcast, numbered
    assert runner.dropped_segments == 0


def test_an_agent_in_a_worker_sees_its_robots_agent_id_as_its_own(ray_cluster) -> None:
    manager = parl.Manager(
        {"T": parl.TaskSettings(echo_algorithm_func())}, placement=parl.RayOptions(workers=2), thread_placement="os"
    )
    for code in range(4):
        manager.add_agent(IdReportingAgent(CountEnv(code), num_games=2), {"T": parl.OnPolicyHelper()})
    manager.start()
    episodes = manager.join(timeout=WAIT * 6)
    assert manager.errors == [] and len(episodes) == 8
    assert sorted(manager.runner.agents_of("parl-ray-worker-1")) != [0, 1]  # not the first ids: positions differ
    assert all(e["own_id"] == e["agent_id"] for e in episodes)
    assert sorted({e["own_id"] for e in episodes}) == [0, 1, 2, 3]


def test_an_agent_id_given_to_add_agent_is_the_agents_and_is_checked(make_manager) -> None:
    manager = make_manager()

    def agent() -> parl.Agent:
        return ReportingEchoAgent(CountEnv(0), num_games=1)

    first = agent()
    assert manager.add_agent(first, {"T": parl.OnPolicyHelper()}, agent_id=5) == 5 and first.id == 5
    assert manager.add_agent(agent(), {"T": parl.OnPolicyHelper()}) == 1  # by default its index
    with pytest.raises(ValueError, match="agent id 5 is another agent's"):
        manager.add_agent(agent(), {"T": parl.OnPolicyHelper()}, agent_id=5)
    with pytest.raises(ValueError, match="agent_id must be an integer >= 0, got -1"):
        manager.add_agent(agent(), {"T": parl.OnPolicyHelper()}, agent_id=-1)
    manager.start()
    assert sorted(e["agent_id"] for e in manager.join(timeout=WAIT)) == [1, 5]


def test_stale_segments_are_dropped_when_max_staleness_says_so(ray_cluster) -> None:
    manager = ray_manager(agents=8, games=6, max_staleness=0)
    manager.start()
    episodes = manager.join(timeout=WAIT * 6)
    runner = manager.runner
    assert manager.errors == [] and len(episodes) == 48
    learned = sum(len(b) for b in manager.tasks["T"].algorithm.learn_batches)
    dropped = runner.dropped_segments
    # Agents send segments one by one (min_batchsize 1): some are gathered before the update of another's.
    assert learned + 4 * dropped == 48 * 4 and dropped > 0


def test_distributed_replay_learns_from_the_shards_and_the_helpers_send_no_batch(ray_cluster) -> None:
    manager = ray_manager(agents=4, games=3, length=10, helper=replay_helper, replay_shards=2, broadcast_interval=2)
    manager.start()
    episodes = manager.join(timeout=WAIT * 6)
    assert manager.errors == [] and len(episodes) == 12
    assert all(e["learned"] == 0 for e in episodes)  # no helper sent a batch: the learner sampled
    batches = manager.tasks["T"].algorithm.learn_batches
    assert batches and all(len(b) == 8 for b in batches)
    codes = {int(v) // 1000 for b in batches for v in b[:, 0]}
    assert codes <= set(range(4)) and len(codes) >= 2  # rows of the agents, from both workers' shards


def ppo_cartpole_evaluation(
    log_dir: Path,
) -> Tuple["RobotConfig", Dict[str, parl.ComputationTask], Dict[str, dict], "RayEvaluation"]:
    """examples/configs/ppo_cartpole.yaml's config, its tasks (layers built), their weights, and a RayEvaluation
    of it (the caller closes it)."""
    from parl.experiment.config.build import task_settings
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.evaluation.remote import remote_evaluation

    config = load_config(str(ROOT / "examples/configs/ppo_cartpole.yaml"), [f"log_dir={log_dir}", "placement=ray"])
    tasks = {name: task_settings(config, name).make_task(name) for name in config.tasks}
    for task in tasks.values():
        task.build_layers()
    weights = {name: task.algorithm_weights() for name, task in tasks.items()}
    return config, tasks, weights, remote_evaluation(config)  # placement ray's: an actor


def test_the_evaluation_actor_plays_what_the_driver_would(ray_cluster, tmp_path: Path) -> None:
    from parl.experiment.config.build import make_agent
    from parl.experiment.config.robot_config import load_config
    from parl.experiment.evaluation.agents import evaluate_agents
    from parl.experiment.evaluation.remote import remote_evaluation

    in_threads = load_config(str(ROOT / "examples/configs/ppo_cartpole.yaml"), [f"log_dir={tmp_path}"])
    assert remote_evaluation(in_threads) is None  # placement threads: evaluations in the driver
    config, tasks, weights, evaluation = ppo_cartpole_evaluation(tmp_path)
    try:
        remote = evaluation.play(weights, 3, 1000)
    finally:
        evaluation.close()
    local = evaluate_agents(lambda seed: make_agent(config, 0, seed=seed), tasks, episodes=3, seed=1000)
    assert remote == local and len(remote) == 3


def test_a_killed_worker_is_reported_by_name_started_again_and_its_agents_play_on(ray_cluster, caplog) -> None:
    import ray

    caplog.set_level(logging.ERROR, logger="parl")
    manager = ray_manager(agents=4, games=400, length=5)
    try:
        manager.start()
        runner = manager.runner
        assert wait_for(lambda: len(manager.episodes()) >= 8, WAIT * 2)
        victim = "parl-ray-worker-1"
        ids = runner.agents_of(victim)
        before = {i: manager.agents[i].episode for i in ids}
        ray.kill(runner.worker_actors()[victim], no_restart=True)
        assert wait_for(lambda: len(runner.losses) == 1, WAIT * 2)
        (loss,) = runner.losses
        assert loss.name == victim and loss.agent_ids == ids
        assert f"Ray worker {victim} (agents {ids}) was lost" in caplog.text
        # Started again: its agents go on from their live counters, the others never stopped.
        assert wait_for(lambda: all(manager.agents[i].episode >= before[i] + 3 for i in ids), WAIT * 4)
        assert manager.running() and manager.errors == []
    finally:
        manager.stop()


def test_a_removed_node_loses_its_worker_which_starts_again_on_another(ray_cluster) -> None:
    import ray

    nodes = [ray_cluster.add_node(num_cpus=1, resources={"spare": 1}) for _ in range(2)]
    manager = parl.Manager(
        {"T": parl.TaskSettings(echo_algorithm_func())},
        placement=parl.RayOptions(workers=1, worker_resources={"spare": 1}),  # on one of the two spare nodes
        thread_placement="os",
    )
    for code in range(2):
        manager.add_agent(ReportingEchoAgent(CountEnv(code), num_games=400), {"T": parl.OnPolicyHelper()})
    try:
        manager.start()
        runner = manager.runner
        assert wait_for(lambda: len(manager.episodes()) >= 4, WAIT * 2)
        node_id = ray.get(runner.worker_actors()["parl-ray-worker-0"].ping.remote())
        (doomed,) = [node for node in nodes if node.node_id == node_id]
        ray_cluster.remove_node(doomed)
        nodes.remove(doomed)
        assert wait_for(lambda: len(runner.losses) == 1, WAIT * 4)
        episodes = len(manager.episodes())
        # The worker starts again in a new process on the other node (paddle imported afresh): on a machine
        # busy with other tests that start alone took more than 20 s once. A bound for a busy machine.
        assert wait_for(lambda: len(manager.episodes()) >= episodes + 4, WAIT * 12)
        assert ray.get(runner.worker_actors()["parl-ray-worker-0"].ping.remote()) == nodes[0].node_id
        assert manager.errors == []
    finally:
        manager.stop()
        for node in nodes:
            ray_cluster.remove_node(node)


# -- optional -------------------------------------------------------------------------------------


def test_import_parl_does_not_import_ray() -> None:
    code = "import sys, parl; assert 'ray' not in sys.modules, 'ray imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_without_ray_the_placement_says_in_one_line_how_to_install_it(monkeypatch, tmp_path: Path) -> None:
    from parl.experiment.config.robot_config import ConfigError, load_config

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: import ray raises ImportError
    hint = "placement 'ray' needs Ray, which is not installed: pip install 'parl[ray]'"
    with pytest.raises(ImportError, match=hint.replace("[", r"\[").replace("]", r"\]")):
        parl.Manager({"T": parl.TaskSettings(echo_algorithm_func())}, placement="ray")
    with pytest.raises(ConfigError) as caught:
        load_config(str(ROOT / "examples/configs/ppo_cartpole.yaml"), ["placement=ray", f"log_dir={tmp_path}"])
    assert str(caught.value) == f"placement: {hint}"


# -- input statistics gathered apart -----------------------------------------------------------------


def test_input_statistics_gathered_by_copies_merge_into_the_learners_as_if_seen_there() -> None:
    shapes = {"obs": [2]}
    learner, copy, together = (InputNormalizer(shapes) for _ in range(3))
    copy.take_changes()  # tracking starts
    rng = np.random.default_rng(0)
    first, second = rng.normal(3.0, 2.0, (50, 2)), rng.normal(-1.0, 0.5, (30, 2))
    learner.update({"obs": first})
    copy.update({"obs": second})
    learner.merge(copy.take_changes())
    together.update({"obs": np.concatenate([first, second])})
    for name in ("mean", "var", "count"):
        assert np.allclose(learner.state_dict()["obs"][name], together.state_dict()["obs"][name])
    assert copy.take_changes() == {}  # nothing new since
    with pytest.raises(ValueError, match=r"normalizer changes for inputs \['goal'\]"):
        learner.merge({"goal": {"mean": np.zeros(2), "var": np.ones(2), "count": np.array(1.0)}})


# -- Ctrl-C ---------------------------------------------------------------------------------------


def descendants(pid: int) -> List[int]:
    """Every running process below ``pid``."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def test_ctrl_c_writes_the_final_checkpoint_and_leaves_no_ray_process_of_the_run(tmp_path: Path) -> None:
    """A run that starts its own local Ray (no cluster joined) ends it with itself on SIGINT."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    command = [sys.executable, "-m", "parl", "train", str(ROOT / "examples/configs/ppo_cartpole.yaml")]
    overrides = ["placement.name=ray", "placement.workers=2", f"log_dir={tmp_path}", "train.target_return=null"]
    run = subprocess.Popen(
        command + [a for o in overrides for a in ("-o", o)] + ["--quiet"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        metrics = tmp_path / "metrics.jsonl"
        assert wait_for(lambda: metrics.exists() and '"episode/' in metrics.read_text(), 120), "no episode ended"
        started = descendants(run.pid)
        assert any("raylet" in _command_of(pid) for pid in started), "no Ray of the run's own"
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, out
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["stop_reason"] == "signal SIGINT" and result["checkpoint"] is not None
    assert Path(result["checkpoint"]).is_dir()
    time.sleep(0.5)
    assert [pid for pid in started if running(pid)] == []


def _command_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_a_lost_replay_shard_is_started_again_its_rows_counted_lost_and_the_run_goes_on(ray_cluster) -> None:
    import ray

    manager = ray_manager(agents=4, games=400, length=10, helper=replay_helper, replay_shards=2, broadcast_interval=2)
    try:
        manager.start()
        runner = manager.runner
        (learner,) = runner._learners.values()
        # Twenty updates need rows from the workers through the shards, six Ray processes that share
        # the cores with the other tests of a parallel session: a bound for a busy machine.
        assert wait_for(lambda: learner.updates >= 20 and learner._seen[0] > 0, WAIT * 12)
        ray.kill(runner._shards[0], no_restart=False)  # Ray starts it again, empty
        assert wait_for(lambda: learner.shard_restarts == 1, WAIT * 4)
        assert learner.rows_lost > 0
        updates = learner.updates
        assert wait_for(lambda: learner.updates >= updates + 20, WAIT * 4)  # learning goes on
        assert manager.running() and manager.errors == []
        (row,) = [values for _, values in manager.placement_metrics()]
        assert row["ray/T/replay_shard_restarts"] == 1 and row["ray/T/replay_rows_lost"] == learner.rows_lost
    finally:
        manager.stop()


def test_a_lost_evaluation_actor_is_started_again_and_one_lost_for_good_leaves_evaluations_to_the_driver(
    ray_cluster, tmp_path: Path
) -> None:
    import ray

    from parl.experiment.train.trainer import Trainer

    config, tasks, weights, evaluation = ppo_cartpole_evaluation(tmp_path)
    try:
        first = evaluation.play(weights, 2, 1000)
        ray.kill(evaluation._actor, no_restart=False)
        assert evaluation.play(weights, 2, 1000) == first  # started again, the same seeded episodes
        ray.kill(evaluation._actor, no_restart=True)
        trainer = Trainer(config, progress=False, stream=io.StringIO())
        trainer._remote = evaluation
        assert trainer._play_weights(tasks, weights, 2, 1000) == first  # played here instead
        assert trainer._remote is None and trainer.evaluation_actor_lost
        assert "the evaluation actor was lost" in trainer.stream.getvalue()
    finally:
        evaluation.close()


# -- joining a cluster ----------------------------------------------------------------------------


@pytest.fixture
def closed_address(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``127.0.0.1:<port>`` of a port bound but not listening (a connection is refused), with this process
    taken for one that has joined no Ray (whatever this session's tests joined)."""
    from parl.runtime.ray_cluster.session import import_ray

    ray = import_ray()  # through parl: a local cluster of a later test stays on loopback

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{bound.getsockname()[1]}"


def test_an_address_where_nothing_listens_is_one_line_at_once(closed_address: str) -> None:
    from parl.runtime.ray_cluster.address import RayJoinError
    from parl.runtime.ray_cluster.session import RaySession

    start = time.monotonic()
    for address in (closed_address, f"ray://{closed_address}"):
        with pytest.raises(RayJoinError) as raised:
            RaySession.join(address, cpus_wanted=1)
        assert str(raised.value) == f"cannot reach the Ray cluster at {address}: Connection refused"
    assert time.monotonic() - start < 10  # not Ray's minutes of retries


@pytest.mark.parametrize("mode", [None, "token"])
def test_ray_refusing_to_join_is_one_line_saying_what_a_token_cluster_needs(monkeypatch, mode) -> None:
    from parl.runtime.ray_cluster.address import AUTH_HINT, RayJoinError
    from parl.runtime.ray_cluster.session import RaySession, import_ray

    ray = import_ray()  # through parl: a local cluster of a later test stays on loopback

    def refused(**kwargs: object) -> None:  # as Ray 2.60 refuses a driver without the cluster's token
        raise ConnectionError("Failed to connect to Ray cluster at 127.0.0.1:1\n(more lines)")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refused)
    if mode is None:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    else:
        monkeypatch.setenv("RAY_AUTH_MODE", mode)
    with socket.socket() as listening:  # something answers there
        listening.bind(("127.0.0.1", 0))
        listening.listen(1)
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(RayJoinError) as raised:
            RaySession.join(address, cpus_wanted=1)
    line = f"cannot join the Ray cluster at {address}: Failed to connect to Ray cluster at 127.0.0.1:1"
    assert str(raised.value) == (line if mode == "token" else f"{line} ({AUTH_HINT})")


@pytest.mark.parametrize("command", ["tune", "train"])
def test_parl_tune_and_train_at_an_unreachable_address_say_so_in_one_line(
    closed_address: str, tmp_path: Path, capsys, command: str
) -> None:
    from parl.experiment.cli.commands import main

    config = str(ROOT / "examples/configs/ppo_cartpole.yaml")
    if command == "tune":
        args = ["tune", config, "--grid", "seed=1,2", "--log-dir", str(tmp_path), "--address", closed_address]
    else:
        overrides = ["placement.name=ray", "placement.workers=1", f"placement.address={closed_address}"]
        overrides.append(f"log_dir={tmp_path}")
        args = ["train", config, "--quiet", *[part for o in overrides for part in ("-o", o)]]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err == f"parl {command}: cannot reach the Ray cluster at {closed_address}: Connection refused\n"


# -- loopback only -------------------------------------------------------------------------------


def listening_addresses(pids: List[int]) -> List[str]:
    """``host`` of every TCP socket in state LISTEN that one of ``pids`` holds (from /proc)."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue  # it ended meanwhile
        inodes.update(link[len("socket:[") : -1] for link in links if link.startswith("socket:["))
    hosts = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                    raw = bytes.fromhex(fields[1].split(":")[0])
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # per 32-bit word
                    hosts.append(str(ipaddress.ip_address(words)))
    return hosts


def _loopback(host: str) -> bool:
    address = ipaddress.ip_address(host)
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def test_the_sessions_local_cluster_listens_on_loopback_only(ray_cluster) -> None:
    hosts = listening_addresses([os.getpid(), *descendants(os.getpid())])
    assert hosts and [host for host in hosts if not _loopback(host)] == []


def run_without_parls_environment(code: str) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh Python at the repository's root, without the environment parl sets for Ray;
    asserts that it succeeds."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_local_cluster_is_refused_when_ray_was_imported_without_parls_environment() -> None:
    code = (
        "import ray\n"
        "from parl.runtime.ray_cluster.local_cluster import NotLoopbackError, start_local_cluster\n"
        "try:\n    start_local_cluster(1)\nexcept NotLoopbackError as exc:\n    print(exc)\n"
        "else:\n    raise SystemExit('a cluster started')\n"
    )
    done = run_without_parls_environment(code)
    assert "import ray through parl" in done.stdout


def test_the_ray_scaling_benchmark_imports_ray_through_parl() -> None:
    code = (
        "import sys\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "import ray_scaling\n"
        "ray_scaling.machine()  # the first import of ray of a run of the benchmark\n"
        "from ray._private import ray_constants\n"
        "assert not ray_constants.ENABLE_RAY_CLUSTER, 'ray imported without parl environment: nodes on the network'\n"
    )
    run_without_parls_environment(code)
