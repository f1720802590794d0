"""One training run of a parl example, in this process: ``train(seed=..., verbose=False)``.

    .venv/bin/python benchmarks/parl_runner.py --example examples/dqn_cartpole.py --seed 0 --target 475
    .venv/bin/python benchmarks/parl_runner.py --example examples/a2c_po_cartpole.py --option model=lstm

``--target`` is passed to ``train`` when it takes one; ``--check-interval``
is set in the example's ``Settings`` when it has that field (otherwise
``train_until``'s default must equal it). Each ``--option
NAME=VALUE`` goes to ``train`` when it has a parameter ``NAME``, otherwise to
the example's ``Settings`` dataclass (passed as ``settings=``); values are
read as Python literals where they parse as one (``3``, ``0.5``, ``None``),
as strings otherwise. Prints one line ``RESULT {json}``: the dict ``train``
returns, plus ``budget`` (its ``max_steps``) and ``cpu_seconds`` (the process's
CPU time over the whole call: set-up, training, final evaluation).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import inspect
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional, Set

from parl.utils.training import train_until


def load_example(path: Path) -> ModuleType:
    """Import the example at ``path`` as a module named after its file (its folder goes on ``sys.path``)."""
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import example {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def parse_option(text: str) -> tuple:
    """``"NAME=VALUE"`` -> ``(NAME, value)``, the value a Python literal where it parses as one."""
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise ValueError(f"options are NAME=VALUE, got {text!r}")
    try:
        return name, ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return name, raw


def settings_fields(module: ModuleType) -> Set[str]:
    """Field names of the example's ``Settings`` dataclass (none when it has none)."""
    settings_class = getattr(module, "Settings", None)
    return {f.name for f in dataclasses.fields(settings_class)} if dataclasses.is_dataclass(settings_class) else set()


def train_arguments(
    module: ModuleType, seed: int, target: Optional[float], check_interval: Optional[int], options: Dict[str, Any]
) -> Dict[str, Any]:
    """Keyword arguments for ``module.train``: seed, quiet, ``target`` if taken, and ``options`` placed.

    ``check_interval`` goes into the example's ``Settings`` when it has that
    field; otherwise the example checks at ``train_until``'s default interval,
    which must then be ``check_interval``.

    Raises:
        ValueError: an option that is neither a parameter of ``train`` nor a field of ``module.Settings``,
            or a ``check_interval`` the example cannot be given.
    """
    parameters = inspect.signature(module.train).parameters
    fields = settings_fields(module)
    kwargs: Dict[str, Any] = {"seed": seed, "verbose": False}
    if target is not None and "target" in parameters:
        kwargs["target"] = target
    settings = {name: value for name, value in options.items() if name not in parameters}
    kwargs.update({name: value for name, value in options.items() if name in parameters})
    if check_interval is not None:
        if "check_interval" in fields:
            settings.setdefault("check_interval", check_interval)
        elif inspect.signature(train_until).parameters["check_interval"].default != check_interval:
            raise ValueError(
                f"{module.__name__}: its Settings has no check_interval, and train_until's default is not "
                f"{check_interval}"
            )
    if settings:
        unknown = sorted(set(settings) - fields)
        if unknown or "settings" not in parameters:
            raise ValueError(
                f"{module.__name__}: options {unknown or sorted(settings)} are neither parameters of train "
                f"{sorted(parameters)} nor fields of its Settings {sorted(fields)}"
            )
        kwargs["settings"] = module.Settings(**settings)
    return kwargs


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--example", type=Path, required=True, help="path of the example script")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=None, help="passed to train() when it takes one")
    parser.add_argument("--check-interval", type=int, default=None, help="env steps between greedy checks")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    module = load_example(args.example.resolve())
    options = dict(parse_option(o) for o in args.option)
    kwargs = train_arguments(module, args.seed, args.target, args.check_interval, options)
    cpu_start = time.process_time()
    result = dict(module.train(**kwargs))
    result["cpu_seconds"] = time.process_time() - cpu_start
    max_steps = inspect.signature(module.train).parameters.get("max_steps")
    default = None if max_steps is None or max_steps.default is inspect.Parameter.empty else max_steps.default
    result["budget"] = kwargs.get("max_steps", default)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
