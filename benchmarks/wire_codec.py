"""What a training batch costs to cross a worker pipe: parl.wire frames beside pickle, in one run.

    python benchmarks/wire_codec.py [--repeats 7]

Each row encodes and decodes one message of the worker transport
(``["learn", slot, batch]``, a Transition crossing as the tuple of its fields) through
``parl.wire`` and through ``pickle`` (protocol 5, what the transport used before), alternating
the two in every repeat, and prints the median microseconds per message of each, so the machine's
drift between seconds hits both alike. Decoding makes writable arrays in both.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import timeit
from typing import Callable, Dict, List, Tuple

import numpy as np

from parl import wire
from parl.core.batch import Transition


def batch(rows: int, obs_shape: Tuple[int, ...], dtype: str) -> Transition:
    """A replay sample of ``rows`` rows (weights and bootstrap steps included)."""
    rng = np.random.default_rng(0)

    def obs() -> np.ndarray:
        return rng.integers(0, 255, (rows, *obs_shape)).astype(dtype)

    column = np.ones((rows, 1), np.float32)
    return Transition(
        inputs={"obs": obs()},
        actions={"action": np.zeros((rows, 1), np.int64)},
        rewards={"reward": column},
        next_inputs={"obs": obs()},
        next_episode_end=np.zeros((rows, 1), np.float32),
        states={},
        next_states={},
        bootstrap_steps=column,
        weights=column,
    )


MESSAGES: Dict[str, object] = {
    "CartPole replay, 64 rows": ["learn", 3, batch(64, (4,), "float32")],
    "Atari replay, 32 rows (84x84x4 uint8)": ["learn", 3, batch(32, (4, 84, 84), "uint8")],
    "costs of an update": {"loss": np.float32(0.5), "q_mean": 1.25, "grad_norm": np.float32(3.0)},
}


def codecs() -> Dict[str, Tuple[Callable[[object], bytes], Callable[[bytes], object]]]:
    return {
        "pickle": (lambda v: pickle.dumps(v, protocol=5), pickle.loads),
        "wire": (wire.pack, wire.unpack),
    }


def per_message_us(encode: Callable, decode: Callable, message: object) -> Tuple[float, float, int]:
    frame = encode(message)
    number = max(1, int(2e5 // max(len(frame), 1e3)))
    enc = timeit.timeit(lambda: encode(message), number=number) / number * 1e6
    dec = timeit.timeit(lambda: decode(frame), number=number) / number * 1e6
    return enc, dec, len(frame)


def main(argv: List[str] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="alternations of the two codecs per message")
    args = parser.parse_args(argv)
    print(f"{'message':<40} {'codec':<7} {'bytes':>10} {'encode us':>10} {'decode us':>10} {'total us':>9}")
    for name, message in MESSAGES.items():
        runs: Dict[str, List[Tuple[float, float, int]]] = {codec: [] for codec in codecs()}
        for _ in range(args.repeats):
            for codec, (encode, decode) in codecs().items():
                runs[codec].append(per_message_us(encode, decode, message))
        for codec, results in runs.items():
            enc = statistics.median(r[0] for r in results)
            dec = statistics.median(r[1] for r in results)
            print(f"{name:<40} {codec:<7} {results[0][2]:>10,} {enc:>10.1f} {dec:>10.1f} {enc + dec:>9.1f}")


if __name__ == "__main__":
    main()
