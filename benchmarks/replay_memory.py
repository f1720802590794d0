"""Memory and time of an Atari-shaped replay buffer, with frame stacks kept once per frame or as plain arrays.

    python benchmarks/replay_memory.py                              # frame store: 1M capacity, 200k stored
    python benchmarks/replay_memory.py --plain --fill 20000         # plain arrays, for comparison

Builds the buffer through ``make_replay_buffer`` (uniform replay) with the specs of
``examples/configs/dqn_atari.yaml``: a uint8 ``[4, 84, 84]`` input, an int64 action and a float
reward. Fills it with a synthetic stream of consecutive frames as ``FrameStackObservation``
stacks them (random 84x84 frames; episodes of 300 to 3,000 steps, the first stack the reset
frame four times), and prints one table row: the transitions stored, the process's resident
memory (VmRSS) after building the buffer and after filling it, the bytes of resident memory per
stored transition, and the time of one ``add`` and one ``sample(32)``. Frames are made on the fly,
so what the resident memory grows by is the buffer.
"""

from __future__ import annotations

import argparse
import time
from typing import Iterator

import numpy as np

import parl
from parl.core.specs import Spec
from parl.core.task_specs import TaskSpecs
from parl.experience.prioritized_replay_buffer import make_replay_buffer

FRAMES, SIZE = 4, 84
SPECS = TaskSpecs(
    inputs=[Spec("obs", [FRAMES, SIZE, SIZE], "uint8")],
    states=[],
    actions=[Spec("action", [1], "int64")],
    rewards=[Spec("reward", [1], "float32")],
)


def rss_bytes() -> int:
    """This process's resident memory now (VmRSS)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS line in /proc/self/status")


def stream(rng: np.random.Generator) -> Iterator[parl.Transition]:
    """Endless episodes of consecutive random frames, stacked four to an observation, newest last."""
    while True:
        length = int(rng.integers(300, 3_000, endpoint=True))
        stack = np.stack([rng.integers(0, 256, (SIZE, SIZE), dtype=np.uint8)] * FRAMES)
        for t in range(length):
            next_stack = np.concatenate([stack[1:], rng.integers(0, 256, (1, SIZE, SIZE), dtype=np.uint8)])
            yield parl.Transition(
                inputs={"obs": stack},
                next_inputs={"obs": next_stack},
                actions={"action": np.array([int(rng.integers(6))], np.int64)},
                rewards={"reward": np.array([float(rng.normal())], np.float32)},
                next_episode_end=np.array([float(t == length - 1)], np.float32),
                states={},
                next_states={},
            )
            stack = next_stack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000, help="transitions the buffer holds")
    parser.add_argument("--fill", type=int, default=200_000, help="transitions stored")
    parser.add_argument("--plain", action="store_true", help="plain arrays instead of the frame store")
    parser.add_argument("--samples", type=int, default=2_000, help="sample(32) calls timed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    buffer = make_replay_buffer(
        args.capacity,
        SPECS,
        prioritized=False,
        alpha=0.6,
        beta_start=0.4,
        beta_steps=0,
        epsilon=1e-6,
        bootstrap_steps=False,
        frame_inputs=() if args.plain else ("obs",),
    )
    rng = np.random.default_rng(args.seed)
    before = rss_bytes()
    add_seconds = 0.0
    for _, transition in zip(range(args.fill), stream(rng)):
        start = time.perf_counter()
        buffer.add(transition)
        add_seconds += time.perf_counter() - start
    after = rss_bytes()
    start = time.perf_counter()
    for _ in range(args.samples):
        buffer.sample(32, rng)
    sample_seconds = time.perf_counter() - start

    print(
        "| storage | capacity | transitions stored | RSS after building | RSS after filling | bytes per transition "
        "| add | sample(32) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(
        f"| {'plain arrays' if args.plain else 'frame store'} | {args.capacity:,} | {len(buffer):,} "
        f"| {before / 2**20:,.0f} MiB | {after / 2**20:,.0f} MiB | {(after - before) / len(buffer):,.0f} "
        f"| {add_seconds / args.fill * 1e6:.1f} us | {sample_seconds / args.samples * 1e6:.0f} us |"
    )
    for name, store in buffer.frame_stores.items():
        print(
            f"\nframe store {name!r}: {store.frames_in_use:,} frames in use for {len(buffer):,} transitions "
            f"({store.bytes_in_use / len(buffer):,.0f} bytes per transition), pool of {store.pool_frames:,} frames"
        )


if __name__ == "__main__":
    main()
