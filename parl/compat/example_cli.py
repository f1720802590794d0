"""``parl.utils.cli`` as it was before 0.2.0: the command line of the example scripts that called
their own ``train()``. Deprecated: an example is now its robot config launched by
:func:`parl.experiment.train.launch.launch` (the same options, as config overrides).

    parser = example_parser(__doc__, max_steps=100_000, target=475.0, agents=4)
    run_example(train, parser.parse_args(), Settings())
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Dict

from parl.runtime import registry


def example_parser(description: str, *, max_steps: int, target: float, agents: int) -> argparse.ArgumentParser:
    """Options of an example script: ``--seed --max-steps --target --eval-episodes --agents --placement --quiet``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=max_steps, help="env step budget for training")
    parser.add_argument("--target", type=float, default=target, help="deterministic mean return that ends training")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--agents", type=int, default=agents)
    parser.add_argument(
        "--placement", choices=registry.names(), default="threads", help="where the agents run (parl.Manager's)"
    )
    parser.add_argument("--quiet", action="store_true", help="print nothing (the result is what train() returns)")
    return parser


def run_example(train: Callable[..., Dict[str, Any]], args: argparse.Namespace, settings: Any) -> Dict[str, Any]:
    """Call an example's ``train(seed, max_steps, target, eval_episodes, settings, verbose=, placement=)``
    with the options :func:`example_parser` parsed into ``args``; returns what it returns."""
    return train(
        args.seed,
        args.max_steps,
        args.target,
        args.eval_episodes,
        settings,
        verbose=not args.quiet,
        placement=args.placement,
    )
