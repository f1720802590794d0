"""Env steps per second of placement "ray" as worker nodes are added, on local Ray clusters.

    python benchmarks/ray_scaling.py [--nodes 1 2 4] [--seconds 20] [--warmup 5] [--repeats 2]
                                     [--worker-placements threads cooperative] [--parts sleep cpu]
                                     [--learners synchronous asynchronous]
                                     [--agents-per-worker 4] [--step-ms 5]
                                     [--config examples/configs/a2c_cartpole.yaml]

Every point trains the PPO CartPole robot (examples/configs/ppo_cartpole.yaml: synchronous PPO,
each update joining a 32-step segment of every agent) with ``placement: ray`` on a fresh
``ray.cluster_utils.Cluster`` of one-CPU nodes (a head of 1 CPU and N - 1 more) on 127.0.0.1 only
(parl.runtime.ray_cluster.local_cluster; Ray is imported through parl), one worker actor per node, built
with the config builder and run by its Manager (no evaluations, no checkpoints).
Once every agent has stepped and ``--warmup`` seconds more have passed, the agents' live
``total_steps`` (the driver's copies, refreshed by every worker's answers) are read, again
``--seconds`` later, and the cluster is shut down.

- ``sleep``: an environment with CartPole's spaces whose steps each sleep 5 ms and whose episodes
  all last 200 steps (benchmarks/slow_env.py's ``SleepingEnv``: the work per step does not change
  as the policy learns), ``--agents-per-worker`` agents (default 4) per worker, for every
  ``--worker-placements`` (a sleeping env blocks a cooperative worker's every agent; threads sleep
  side by side), on ``--nodes`` nodes. Efficiency at N = throughput(N) / (N x throughput(1));
  targets: >= 0.9 at N = 2 and >= 0.8 at N = 4. With ``--learners asynchronous`` the APPO robot
  (``--asynchronous-config``, examples/configs/appo_cartpole.yaml) runs with ``placement.asynchronous:
  true``: each agent hands its segment over and acts on (two in flight at most), and every update
  takes the segments that have arrived (at least 4, or those of 50 ms); targets >= 0.95 at N = 2
  and >= 0.9 at N = 4.
- ``cpu``: CartPole-v1, ``--cpu-agents`` agents (default 8) per worker in cooperative workers, on 1
  and 2 nodes, and the agents of one worker placed in this process (placement ``cooperative``, no
  Ray): 2 workers against 1 (target >= 1.6x) and 1 worker against in-process (target >= 0.8).
  CartPole's episodes grow as the policy learns (the config reaches 500-step episodes within about
  20,000 env steps), and with them the env steps per update: give a warm-up that gets there.

Each point is measured ``--repeats`` times, the points taking turns, and the median is reported,
with the share of the wall time the driver's learner spent in ``learn`` and its milliseconds per
update: in synchronous PPO every agent waits while it updates, so that share of the run does not
shrink with more workers; and the share of the machine's CPU time that was busy while measuring
(/proc/stat, every process): N one-CPU "nodes" on a machine of fewer than N + 1 cores share them, and a
point whose machine is near 100 % busy measures the cores, not the placement. ``--step-ms`` makes every
step of the sleeping environment longer (fewer steps, so less CPU, per second): with the same protocol
and fewer CPU seconds per wall second, it shows how a cluster with a core per node would scale.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import parl  # noqa: E402 - sets the thread environment before Ray and Paddle start
from parl.experiment.config.build import build_manager  # noqa: E402
from parl.experiment.config.robot_config import load_config  # noqa: E402
from parl.experiment.train.trainer import env_steps  # noqa: E402
from parl.runtime.ray_cluster.local_cluster import start_local_cluster, stop_local_cluster  # noqa: E402
from parl.runtime.ray_cluster.session import import_ray  # noqa: E402

CONFIG = HERE.parent / "examples" / "configs" / "ppo_cartpole.yaml"
#: The asynchronous learner's robot: APPO (V-trace on PPO's objective), which learns from segments acted with
#: older weights (its placement block is replaced by each point's).
ASYNCHRONOUS_CONFIG = HERE.parent / "examples" / "configs" / "appo_cartpole.yaml"
#: Wall seconds each step of the sleeping environment waits (``--step-ms`` changes it).
SLEEP_SECONDS = 0.005
#: Seconds the workers may take to start acting.
START_TIMEOUT = 120.0
#: Overrides of every point: nothing is written, the synchronous batching of the config kept.
COMMON = ["log_dir=/tmp/parl-ray-scaling", "stall_seconds=null"]
#: Overrides of the asynchronous learner's points: two segments in flight per agent, so an agent never waits
#: for the update of its last one; the batching is the APPO config's (an update takes at least 4 segments, or
#: what came within 50 ms of the first).
ASYNCHRONOUS_BATCHING = ["placement.segments_in_flight=2"]
#: Segments an asynchronous update waits for at least (the APPO config's ``min_batchsize``), or every agent's
#: where there are fewer agents.
ASYNCHRONOUS_MIN_SEGMENTS = 4


@dataclass(frozen=True)
class Point:
    """One robot to measure: its environment, placement, workers (and nodes), agents."""

    env: str  # "sleep" or "cpu"
    placement: str  # "ray" or "cooperative"
    workers: int
    worker_placement: Optional[str]
    agents: int
    asynchronous: bool = False
    step_seconds: float = SLEEP_SECONDS  # each step of the sleeping environment

    def overrides(self) -> List[str]:
        """The config overrides of this robot."""
        out = COMMON + [f"agents={self.agents}", f"placement={self.placement}"]
        if self.env == "sleep":
            out += [
                f"python_path=[{HERE}]",
                "env.id=null",
                "env.factory=slow_env.SleepingEnv",
                f"env.kwargs={{sleep_seconds: {self.step_seconds}}}",
            ]
        if self.placement == "ray":
            out += [f"placement.workers={self.workers}", f"placement.worker_placement={self.worker_placement}"]
        if self.asynchronous:
            # The APPO config's update takes at least 4 segments: no more than there are agents.
            minimum = min(ASYNCHRONOUS_MIN_SEGMENTS, self.agents)
            out += ["placement.asynchronous=true", *ASYNCHRONOUS_BATCHING, f"tasks.RL.batching.min_batchsize={minimum}"]
        return out

    @property
    def label(self) -> str:
        where = f"ray, {self.workers} x {self.worker_placement}" if self.placement == "ray" else "in-process"
        return f"{self.env}: {where}{', asynchronous' if self.asynchronous else ''}"


class Run(NamedTuple):
    """One measurement: env steps per second, the learner's share of the wall time with its
    milliseconds per update (synchronous PPO: every agent waits while the learner updates), and the share
    of the machine's CPU time that was busy (every process: a cluster of N "nodes" on fewer cores than N
    plus the driver's is bound by them once this nears 1)."""

    steps_per_s: float
    learning_share: float
    ms_per_update: float
    cpu_busy: float


def _cpu_times() -> Tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot (/proc/stat; (0, 0) where there is none)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


class _LearnClock:
    """Times every update of the learner task it wraps (set as the task's ``learn_checked``, what its
    wrapper calls for each update)."""

    def __init__(self, task: parl.ComputationTask) -> None:
        self._learn = task.learn_checked
        self.seconds, self.calls = 0.0, 0

    def __call__(self, batch: object) -> object:
        start = time.perf_counter()
        try:
            return self._learn(batch)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


def measure(point: Point, seconds: float, warmup: float, config_path: Path = CONFIG) -> Run:
    """Env steps per second of ``point`` after ``warmup`` seconds, over ``seconds``, and its learner's load."""
    config = load_config(str(config_path), point.overrides())
    cluster = start_local_cluster(point.workers, log_to_driver=False) if point.placement == "ray" else None
    try:
        manager = build_manager(config)
        task = manager.tasks["RL"]
        clock = task.learn_checked = _LearnClock(task)
        manager.start()
        try:
            _wait_for_every_agent(manager)
            time.sleep(warmup)
            first, learned, calls, start = env_steps(manager, 0), clock.seconds, clock.calls, time.perf_counter()
            busy, total = _cpu_times()
            time.sleep(seconds)
            steps, elapsed = env_steps(manager, 0) - first, time.perf_counter() - start
            busy_after, total_after = _cpu_times()
            learned, calls = clock.seconds - learned, clock.calls - calls
            if manager.errors:
                raise manager.errors[0]
        finally:
            manager.stop()
    finally:
        if cluster is not None:
            stop_local_cluster(cluster)
    cpu_busy = (busy_after - busy) / max(total_after - total, 1)
    return Run(steps / elapsed, learned / elapsed, 1e3 * learned / max(calls, 1), cpu_busy)


def _wait_for_every_agent(manager: parl.Manager, timeout: float = START_TIMEOUT) -> None:
    """Return once every agent has stepped (the workers are up and acting).

    Raises:
        RuntimeError: not within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not all(agent.total_steps > 0 for agent in manager.agents):
        if manager.errors:
            raise manager.errors[0]
        if time.monotonic() > deadline:
            raise RuntimeError(f"the agents did not all step within {timeout:g} s")
        time.sleep(0.1)


def points(args: argparse.Namespace) -> List[Point]:
    """Every point the options ask for, in measuring order."""
    out = []
    if "sleep" in args.parts:
        for asynchronous in [learner == "asynchronous" for learner in args.learners]:
            for placement in args.worker_placements:
                out += [
                    Point("sleep", "ray", n, placement, n * args.agents_per_worker, asynchronous, args.step_ms / 1e3)
                    for n in args.nodes
                ]
    if "cpu" in args.parts:
        out += [Point("cpu", "ray", n, "cooperative", n * args.cpu_agents) for n in (1, 2)]
        out.append(Point("cpu", "cooperative", 1, None, args.cpu_agents))
    return out


def table(runs: Dict[Point, List[Run]]) -> List[str]:
    """The results as a markdown table: medians over the runs and the ratio each part is judged by."""
    lines = [
        "| env | placement | learner | workers (nodes) | worker placement | agents | env steps/s (median) | runs "
        "| learner busy, ms per update | CPU busy | ratio |",
        "|---|---|---|---:|---|---:|---:|---|---|---:|---|",
    ]
    medians = {point: statistics.median(r.steps_per_s for r in values) for point, values in runs.items()}
    for point, values in runs.items():
        busy = statistics.median(r.learning_share for r in values)
        update = statistics.median(r.ms_per_update for r in values)
        cpu = statistics.median(r.cpu_busy for r in values)
        env = f"sleep {point.step_seconds * 1e3:g} ms" if point.env == "sleep" else point.env
        lines.append(
            f"| {env} | {point.placement} | {'asynchronous' if point.asynchronous else 'synchronous'} | "
            f"{point.workers if point.placement == 'ray' else '-'} | "
            f"{point.worker_placement or 'cooperative'} | {point.agents} | {medians[point]:,.0f} | "
            f"{', '.join(f'{r.steps_per_s:,.0f}' for r in values)} | {busy:.0%}, {update:.1f} | {cpu:.0%} | "
            f"{_ratio(point, medians)} |"
        )
    return lines


def _ratio(point: Point, medians: Dict[Point, float]) -> str:
    """Efficiency against one worker (ray points), or one worker against in-process (that row)."""
    if point.placement != "ray":
        one = next((p for p in medians if p.env == point.env and p.placement == "ray" and p.workers == 1), None)
        return "" if one is None else f"1 ray worker / in-process = {medians[one] / medians[point]:.2f}"
    one = next((p for p in medians if _same_kind(p, point) and p.workers == 1), None)
    if one is None or point.workers == 1:
        return ""
    if point.env == "cpu":
        return f"{point.workers} / 1 workers = {medians[point] / medians[one]:.2f}x"
    return f"efficiency {medians[point] / (point.workers * medians[one]):.2f}"


def _same_kind(a: Point, b: Point) -> bool:
    return (a.env, a.placement, a.worker_placement, a.asynchronous) == (
        b.env,
        b.placement,
        b.worker_placement,
        b.asynchronous,
    )


def machine() -> str:
    """CPU model, cores, memory and the software measured."""
    import paddle

    ray = import_ray()  # through parl, as every Ray of this benchmark: nodes on 127.0.0.1 only
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{model}, {len(os.sched_getaffinity(0))} cores, {memory:.0f} GiB; Python {platform.python_version()}, "
        f"Ray {ray.__version__}, paddlepaddle {paddle.__version__}"
    )


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4], help="cluster sizes of the sleep part")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run")
    parser.add_argument(
        "--warmup", type=float, default=5.0, help="seconds between every agent's first step and the measuring"
    )
    parser.add_argument("--repeats", type=int, default=2, help="runs per point (the median is reported)")
    parser.add_argument("--parts", nargs="+", default=["sleep", "cpu"], choices=["sleep", "cpu"])
    parser.add_argument(
        "--worker-placements", nargs="+", default=["threads", "cooperative"], choices=["threads", "cooperative"]
    )
    parser.add_argument(
        "--learners",
        nargs="+",
        default=["synchronous", "asynchronous"],
        choices=["synchronous", "asynchronous"],
        help="learners of the sleep part",
    )
    parser.add_argument("--agents-per-worker", type=int, default=4, help="agents per worker, sleep part")
    parser.add_argument(
        "--step-ms",
        type=float,
        default=SLEEP_SECONDS * 1e3,
        help="milliseconds each step of the sleeping environment waits (longer steps: less CPU per second)",
    )
    parser.add_argument("--cpu-agents", type=int, default=8, help="agents per worker, cpu part")
    parser.add_argument(
        "--config", type=Path, default=CONFIG, help="the robot (default: ppo_cartpole.yaml; its task must be 'RL')"
    )
    parser.add_argument(
        "--asynchronous-config",
        type=Path,
        default=ASYNCHRONOUS_CONFIG,
        help="the asynchronous learner's robot (default: appo_cartpole.yaml; its task must be 'RL')",
    )
    args = parser.parse_args(argv)
    command = shlex.join(["python", "benchmarks/ray_scaling.py", *(sys.argv[1:] if argv is None else argv)])
    print(command)
    print(machine(), flush=True)
    runs: Dict[Point, List[Run]] = {point: [] for point in points(args)}
    loads = [os.getloadavg()[0]]
    for repeat in range(args.repeats):
        for point in runs:
            config = args.asynchronous_config if point.asynchronous else args.config
            run = measure(point, args.seconds, args.warmup, config)
            runs[point].append(run)
            loads.append(os.getloadavg()[0])
            print(
                f"  run {repeat}: {point.label}, {point.agents} agents: {run.steps_per_s:,.0f} env steps/s, "
                f"learner busy {run.learning_share:.0%} ({run.ms_per_update:.1f} ms per update), "
                f"CPU {run.cpu_busy:.0%} busy",
                flush=True,
            )
    print()
    print(f"```bash\n{command}\n```\n")
    print(f"{machine()}; 1-minute load average {min(loads):.1f}-{max(loads):.1f} during the runs.\n")
    print("\n".join(table(runs)))


if __name__ == "__main__":
    main()
