"""DQN on an Atari game (ALE through ale-py) from 84x84 grayscale frames, 4 to a stack.

    python examples/dqn_atari.py --short-run        # ~2,000 env steps: steps, learns, logs (docs/atari.md)
    python examples/dqn_atari.py [--env ALE/Pong-v5] [--agents 2] [--max-steps 10000000] [--logdir runs/dqn_atari]

Agents play as threads feeding one ComputationTask whose network is the one of
Mnih et al. (2015). Progress lines go to the console; episode returns and
lengths, loss, mean Q and env steps per second go to TensorBoard files under
``--logdir``. Training stops when a greedy check reaches the target mean return
or the env step budget runs out; then a greedy evaluation on fresh seeds is
printed. See docs/atari.md for memory, timings and what a short run shows.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional

import ale_py
import dqn_cartpole
import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit
from tensorboardX import SummaryWriter

import parl
from parl.algorithms import DQN
from parl.models.atari_q_model import AtariQModel
from parl.utils import EpsilonGreedyAgent, LinearSchedule, train_until
from parl.utils.cli import example_parser
from parl.validation import check_int

gym.register_envs(ale_py)

ENV_ID = "ALE/Pong-v5"  # bundled with ale-py; its episodes end whatever the policy does (no FIRE to start)


@dataclass
class Settings:
    """Hyperparameters of this example. Sources: the DQN paper (Mnih et al., 2015) for the network and
    preprocessing; CleanRL's dqn_atari.py for the Adam learning rate, the target period, the final epsilon
    and the warm-up; the replay capacity is cut to fit this machine (docs/atari.md)."""

    env_id: str = ENV_ID
    agents: int = 2
    frame_skip: int = 4  # the paper's action repeat
    noop_max: int = 30  # the paper's up to 30 no-op actions at the start of an episode
    frames: int = 4  # the paper's agent history length
    screen_size: int = 84
    repeat_action_probability: float = 0.25  # ALE v5's sticky actions (Machado et al., 2018)
    max_episode_steps: Optional[int] = None  # agent steps; None: ALE v5's own cap of 108,000 frames
    learning_rate: float = 1e-4  # Adam, as CleanRL (the paper: RMSProp at 2.5e-4)
    gamma: float = 0.99
    double_q: bool = True  # van Hasselt et al. (2016); the paper's targets with False
    target_update_interval: int = 250  # updates: CleanRL's 1,000 env steps at one update per 4 steps
    grad_clip: Optional[float] = 10.0  # global gradient-norm bound, as SB3's DQN
    reward_clip: Optional[float] = 1.0  # the paper clips rewards to [-1, 1]
    epsilon_start: float = 1.0
    epsilon_end: float = 0.01  # CleanRL's (the paper: 0.1)
    epsilon_steps: int = 500_000  # per agent: 1M env steps in all with 2 agents, as the paper and CleanRL
    capacity: int = 50_000  # per agent: 100k transitions in all, 5.6 GB at uint8 (the paper: 1M)
    batch_size: int = 32  # the paper's
    warmup_steps: int = 40_000  # per agent: CleanRL's 80k env steps in all
    updates_per_step: float = 0.25  # the paper's one update per 4 agent steps
    max_batchsize: int = 16
    thread_placement: str = "split"  # convolutions gain from a core of their own (parl.affinity)
    log_interval: int = 1_000  # env steps (all agents) between reports of the train/ and perf/ scalars


def short_run_settings() -> Settings:
    """Settings of a short run (about 2,000 env steps) that shows the example stepping, learning and
    logging in about 20 s of CPU time: episodes cut at 500 steps, a short warm-up and exploration, and one batch of
    32 every 32 agent steps instead of every 4, so that updates do not dominate the run."""
    return Settings(
        max_episode_steps=500,
        epsilon_steps=500,
        warmup_steps=250,
        updates_per_step=1 / 32,
        target_update_interval=10,
        log_interval=250,
    )


def make_atari_env(
    env_id: str,
    *,
    frame_skip: int,
    noop_max: int,
    frames: int,
    screen_size: int,
    repeat_action_probability: float,
    max_episode_steps: Optional[int],
) -> gym.Env:
    """An ALE game as DQN sees it: gymnasium's AtariPreprocessing (max over the last two frames of each
    repeat, ``screen_size`` square grayscale, up to ``noop_max`` no-op starts, no episode end on life
    loss) and the last ``frames`` frames stacked into one uint8 observation of shape [frames, size, size]."""
    env = gym.make(env_id, frameskip=1, repeat_action_probability=repeat_action_probability)
    env = AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=frame_skip,
        screen_size=screen_size,
        terminal_on_life_loss=False,
        grayscale_obs=True,
    )
    env = FrameStackObservation(env, frames)
    if max_episode_steps is not None:
        env = TimeLimit(env, max_episode_steps=max_episode_steps)
    return env


def make_env(s: Settings) -> gym.Env:
    """The game of ``s`` (:func:`make_atari_env` with its fields)."""
    return make_atari_env(
        s.env_id,
        frame_skip=s.frame_skip,
        noop_max=s.noop_max,
        frames=s.frames,
        screen_size=s.screen_size,
        repeat_action_probability=s.repeat_action_probability,
        max_episode_steps=s.max_episode_steps,
    )


def num_actions(s: Settings) -> int:
    """Size of the game's minimal action set."""
    env = make_env(s)
    try:
        return int(env.action_space.n)
    finally:
        env.close()


def make_algorithm_func(s: Settings, actions: int) -> Callable[[], DQN]:
    """The DQN factory for ``s`` over ``actions`` actions (the Manager and the evaluator each build one)."""
    return parl.create_algorithm_func(
        AtariQModel,
        dict(num_actions=actions, frames=s.frames, screen_size=s.screen_size),
        DQN,
        dict(
            gamma=s.gamma,
            learning_rate=s.learning_rate,
            target_update_interval=s.target_update_interval,
            double_q=s.double_q,
            grad_clip=s.grad_clip,
        ),
    )


def make_settings(s: Settings, actions: int) -> parl.TaskSettings:
    """The task settings for ``s``."""
    return parl.TaskSettings(
        make_algorithm_func(s, actions),
        max_batchsize=s.max_batchsize,
        reward_clip=s.reward_clip,
    )


def make_helper(s: Settings, seed: int) -> parl.ExpReplayHelper:
    """One agent's replay helper: dqn_cartpole's, with this example's replay settings."""
    replay = dqn_cartpole.Settings(
        capacity=s.capacity,
        batch_size=s.batch_size,
        warmup_steps=s.warmup_steps,
        updates_per_step=s.updates_per_step,
        gamma=s.gamma,
    )
    return dqn_cartpole.make_helper(replay, seed)


class TrainingLog:
    """The scalars of a run, written with tensorboardX and printed; shared by every agent thread.

    The step of every scalar is the env step count of all agents together.
    Tags:

    - ``episode/return``, ``episode/length``: at the end of each episode (unclipped reward, agent steps);
    - ``train/loss``, ``train/q_mean``: means over the updates since the last report (Huber TD loss,
      Q of the actions taken), every ``interval`` env steps once updates have started;
    - ``train/epsilon``: the exploration rate of the agent that crossed the report step;
    - ``perf/env_steps_per_second``: env steps since the last report over the wall time since then.

    Args:
        writer: where scalars go (None: only printed).
        interval: env steps between reports.
        verbose: print a line at each report.
    """

    TAGS = (
        "episode/return",
        "episode/length",
        "train/loss",
        "train/q_mean",
        "train/epsilon",
        "perf/env_steps_per_second",
    )

    def __init__(self, writer: Optional[SummaryWriter], *, interval: int, verbose: bool) -> None:
        self.writer = writer
        self.interval = check_int("log_interval", interval, 1)
        self.verbose = verbose
        self.env_steps = 0
        self.episodes = 0
        self._lock = threading.Lock()
        self._costs: Dict[str, List[float]] = {"loss": [], "q_mean": []}
        self._returns: List[float] = []
        self._last_report = (0, time.perf_counter())

    def env_step(self, epsilon: float) -> None:
        """Count one env step; report when the count reaches a multiple of the interval."""
        with self._lock:
            self.env_steps += 1
            if self.env_steps % self.interval == 0:
                self._report(epsilon)

    def costs(self, costs: Mapping[str, Any]) -> None:
        """Keep the scalar costs of one update for the next report."""
        with self._lock:
            for name, values in self._costs.items():
                values.append(float(costs[name]))

    def episode(self, episode_return: float, length: int) -> None:
        """Write the statistics of one finished episode."""
        with self._lock:
            self.episodes += 1
            self._returns = (self._returns + [episode_return])[-20:]
            self._scalar("episode/return", episode_return)
            self._scalar("episode/length", length)

    def close(self) -> None:
        """Flush and close the writer."""
        if self.writer is not None:
            self.writer.close()

    def _report(self, epsilon: float) -> None:
        steps, start = self._last_report
        now = time.perf_counter()
        rate = (self.env_steps - steps) / max(now - start, 1e-9)
        self._last_report = (self.env_steps, now)
        means = {name: float(np.mean(values)) for name, values in self._costs.items() if values}
        for name in self._costs:
            self._costs[name] = []
        for name, value in means.items():
            self._scalar(f"train/{name}", value)
        self._scalar("train/epsilon", epsilon)
        self._scalar("perf/env_steps_per_second", rate)
        if self.verbose:
            recent = f"{np.mean(self._returns):6.1f}" if self._returns else "   n/a"
            loss = f"loss {means['loss']:.4f}  q_mean {means['q_mean']:7.3f}" if means else "(warm-up)"
            print(
                f"env steps {self.env_steps:8d}  episodes {self.episodes:5d}  recent return {recent}  "
                f"{loss}  epsilon {epsilon:.3f}  env steps/s {rate:6.1f}",
                flush=True,
            )

    def _scalar(self, tag: str, value: float) -> None:
        if self.writer is not None:
            self.writer.add_scalar(tag, value, self.env_steps)


class AtariAgent(EpsilonGreedyAgent):
    """parl's epsilon-greedy agent on uint8 frames, reporting every env step, update and
    episode to a :class:`TrainingLog`."""

    def __init__(self, env: gym.Env, *, epsilon: LinearSchedule, seed: int, log: TrainingLog) -> None:
        super().__init__(env, epsilon=epsilon, seed=seed)
        self.log = log

    def after_step(self, costs: Optional[Dict[str, Any]]) -> None:
        if costs is not None:
            self.log.costs(costs)
        self.log.env_step(self.epsilon(self.total_steps))

    def run_one_episode(self) -> Dict[str, float]:
        result = super().run_one_episode()
        self.log.episode(result["reward"], int(result["steps"]))
        return result


def train(
    seed: int = 0,
    max_steps: int = 10_000_000,
    target: float = 18.0,
    eval_episodes: int = 10,
    settings: Optional[Settings] = None,
    verbose: bool = True,
    logdir: Optional[str] = "runs/dqn_atari",
    placement: str = "threads",
) -> Dict[str, float]:
    """Train until a greedy check reaches ``target`` or ``max_steps`` env steps pass (see
    :func:`parl.utils.train_until`); scalars go to TensorBoard files in ``logdir`` (None: none);
    ``placement`` is the Manager's ("threads" or "cooperative").

    Greedy checks start once the mean of the last 20 training returns is at least 0.
    The defaults are a full-scale run (10M env steps = 40M frames; the paper's Pong score is 18.9).
    """
    s = settings or Settings()
    parl.seed_everything(seed)
    actions = num_actions(s)
    task_settings = make_settings(s, actions)
    manager = parl.Manager({"RL": task_settings}, placement=placement, thread_placement=s.thread_placement)
    log = TrainingLog(SummaryWriter(logdir) if logdir is not None else None, interval=s.log_interval, verbose=verbose)
    try:
        for i in range(s.agents):
            agent_seed = seed * 1000 + i
            epsilon = LinearSchedule(s.epsilon_start, s.epsilon_end, s.epsilon_steps)
            agent = AtariAgent(make_env(s), epsilon=epsilon, seed=agent_seed, log=log)
            manager.add_agent(agent, {"RL": make_helper(s, agent_seed)})
        return train_until(
            manager,
            task_settings,
            lambda: make_env(s),
            target=target,
            max_steps=max_steps,
            seed=seed,
            eval_episodes=eval_episodes,
            check_from=0.0,
            verbose=verbose,
        )
    finally:
        log.close()


if __name__ == "__main__":
    parser = example_parser(__doc__, max_steps=10_000_000, target=18.0, agents=Settings.agents)
    parser.add_argument(
        "--short-run", action="store_true", help="short_run_settings(), 2,000 env steps, 1 eval episode"
    )
    parser.add_argument("--env", default=ENV_ID, help="ALE game id, e.g. ALE/Breakout-v5")
    parser.add_argument("--warmup", type=int, help="replay warm-up, steps per agent")
    parser.add_argument("--capacity", type=int, help="replay capacity per agent")
    parser.add_argument("--logdir", default="runs/dqn_atari", help="directory of the TensorBoard event files")
    if parser.parse_known_args()[0].short_run:
        parser.set_defaults(max_steps=2_000, eval_episodes=1)
    args = parser.parse_args()
    settings = short_run_settings() if args.short_run else Settings()
    settings.env_id, settings.agents = args.env, args.agents
    if args.warmup is not None:
        settings.warmup_steps = args.warmup
    if args.capacity is not None:
        settings.capacity = args.capacity
    train(
        args.seed,
        args.max_steps,
        args.target,
        args.eval_episodes,
        settings,
        not args.quiet,
        args.logdir,
        args.placement,
    )
