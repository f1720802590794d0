"""The RLX client in another language: CartPole written in JavaScript (examples/rlx/node/) trains against
``parl serve examples/configs/ppo_cartpole.yaml``, and the robot it trains balances gymnasium's CartPole
(the server's evaluation plays local gymnasium copies, which no client ever stepped).

The test installs the pinned ``@msgpack/msgpack`` of examples/rlx/node/package-lock.json (``npm ci``) into a
directory of its own; without ``node`` and ``npm`` on PATH it is skipped, naming them.

Measured on AMD EPYC (2 cores), 8 connections from one Node process, seeds 100-105: 6/6 reached the
target, 5.3k-28.5k env steps (PPO CartPole through ``parl train`` with 8 agents: 40/40, 6.5k-31.5k). The
budget is about twice the most; 2 of 3 seeds must reach, as tests/test_learning.py asks of the example.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from toys import serve_process

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rlx" / "node"
SEEDS = (100, 101, 102)
MIN_REACHED = 2
BUDGET = 60_000
CONNECTIONS = 8

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None,
    reason="the JavaScript RLX client needs Node.js 18 or newer and npm on PATH",
)


@pytest.fixture(scope="module")
def node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the pinned packages of examples/rlx/node (npm ci from its lock file)."""
    directory = tmp_path_factory.mktemp("rlx-node")
    for name in ("package.json", "package-lock.json"):
        shutil.copy(EXAMPLE / name, directory / name)
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"npm ci failed: {done.stderr[-2000:]}"
    return directory / "node_modules"


def train(seed: int, log_dir: Path, node_modules: Path) -> dict:
    """One ``parl serve`` of the example config and one Node process of CONNECTIONS CartPoles against it,
    until the server stops; the server's result.json."""
    server, address = serve_process(
        "examples/configs/ppo_cartpole.yaml",
        "--bind",
        "127.0.0.1:0",
        "--quiet",
        "-o",
        f"seed={seed}",
        "-o",
        f"train.max_env_steps={BUDGET}",
        "-o",
        f"log_dir={log_dir}",
    )
    try:
        client = subprocess.run(
            ["node", str(EXAMPLE / "train_cartpole.js"), "--address", address, "--connections", str(CONNECTIONS)]
            + ["--seed", str(seed)],
            env=dict(os.environ, NODE_PATH=str(node_modules)),
            capture_output=True,
            text=True,
            timeout=600,
        )
        _, err = server.communicate(timeout=120)
    finally:
        server.kill()
    assert server.returncode == 0, err
    assert client.returncode == 0, client.stderr
    played = json.loads(client.stdout.strip().splitlines()[-1])
    assert played["episodes"] > 0
    return json.loads((log_dir / "result.json").read_text())


def test_cartpole_in_javascript_trains_against_parl_serve(tmp_path: Path, node_modules: Path) -> None:
    results = []
    for seed in SEEDS:
        result = train(seed, tmp_path / f"seed-{seed}", node_modules)
        results.append(result)
        assert result["env_steps"] <= BUDGET + 1_000
        reached, left = sum(r["reached"] for r in results), len(SEEDS) - len(results)
        if reached >= MIN_REACHED or reached + left < MIN_REACHED:
            break
    summary = [{key: r[key] for key in ("seed", "env_steps", "final_eval", "stop_reason")} for r in results]
    assert sum(r["reached"] for r in results) >= MIN_REACHED, summary
